"""A clock that moves only when something sleeps on it: timing behaviour (pauses, backoff) is
asserted in virtual seconds, never against the wall clock."""

from __future__ import annotations

import asyncio


class ManualClock:
    """``now()`` reads virtual time; ``await sleep(s)`` records ``s``, yields to the event loop
    once and moves time to at least (time at the call) + ``s``, so concurrent sleepers that start
    together all wake at the same virtual instant, as they would on a real clock."""

    def __init__(self, start: float = 1000.0):
        self.t = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        wake = self.t + max(0.0, seconds)
        self.sleeps.append(seconds)
        await asyncio.sleep(0)
        self.t = max(self.t, wake)
