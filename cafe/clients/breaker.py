"""A circuit breaker per server that tells a dead server from a busy one. Dead: ``threshold``
attempts in a row refused (nothing listens, DNS, no route, TLS), or nothing but failures (5xx,
resets, timeouts, malformed bodies) for ``dead_after_s`` seconds and at least ``errors`` attempts
in a row. Busy: resets, timeouts or errors among answers; those are backed off and retried by the
retry policy, never stopped (a server with a small listen backlog resets connections under a
burst while it answers the rest). A good answer (or a 429, or a 4xx that no retry fixes: the
server is there and said so) resets both counts. Once dead, every call to the server fails at
once with ``ServerUnreachable`` instead of retrying with backoff for minutes.

Commands let ``ServerUnreachable`` through their per-item error handling: the run stops within
seconds, keeps what it wrote, and says which server and which option named it, so that fixing
the server and running the same command again resumes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cafe.errors import CafeError

#: attempts refused in a row that open a breaker (0: never)
BREAK_AFTER = 3
#: failed attempts in a row (with answers or not) that open a breaker, once they have also
#: lasted DEAD_AFTER_S without a single good answer
ERRORS_IN_A_ROW = 8
DEAD_AFTER_S = 1.2
#: how long a server that has answered is given to come back from nothing but errors (an
#: outage of a healthy server is ridden out, said once; one that never answered still fails
#: within DEAD_AFTER_S)
RIDE_OUT_S = 60.0


class ServerUnreachable(CafeError):
    """A server that gave no reply to ``failures`` attempts in a row (the last ``reason``)."""

    def __init__(
        self, url: str | None, reason: str, failures: int, option: str | None = None,
        note: str | None = None, seconds: float | None = None,
    ):  # fmt: skip
        self.url, self.reason, self.failures, self.option = url, reason, failures, option
        self.seconds = seconds  # None: refused; else how long nothing but failures came
        where = url or "the service's default endpoint"
        named = f" (set by {option})" if option else ""
        text = (
            f"no reply from {where}{named}: {failures} attempts in a row failed "
            f"without an answer (last: {reason})"
            if seconds is None
            else f"no good reply from {where}{named}: {failures} attempts in a row over "
            f"{seconds:.0f} s failed (last: {reason})"
        )
        if note:
            text += f"; stopped: {note}; once the server answers, run the same command again"
        super().__init__(text)

    def stopped(self, note: str) -> ServerUnreachable:
        """The same error saying what the stopped command kept (and that a re-run resumes)."""
        return ServerUnreachable(
            self.url, self.reason, self.failures, self.option, note, self.seconds
        )


class Breaker:
    """Counts, for one server, attempts refused in a row (open at ``threshold``) and failed
    attempts in a row since the last good answer (open at ``errors`` once they span
    ``dead_after_s`` seconds of ``clock``)."""

    def __init__(
        self, url: str | None, threshold: int = BREAK_AFTER, option: str | None = None, *,
        errors: int = ERRORS_IN_A_ROW, dead_after_s: float = DEAD_AFTER_S,
        clock: Callable[[], float] = time.monotonic, ride_out_s: float = RIDE_OUT_S,
        say: Callable[[str], None] | None = None,
    ):  # fmt: skip
        self.url = url
        self.threshold = threshold
        self.option = option  # the command-line option that named the server, for the message
        self.errors, self.dead_after_s, self.clock = errors, dead_after_s, clock
        self.failures = 0  # refused in a row
        self.failed = 0  # failed in a row, refused or not
        self.failing_since: float | None = None  # the first of those
        self.seconds: float | None = None  # set when opened by failures over time
        self.reason = ""
        self.is_open = False
        self.answered = False  # a good answer came once: an outage is ridden out
        self.ride_out_s = ride_out_s
        self.say = say or _say
        self._said = False  # this outage said once
        self._http = True  # the failures in a row are all HTTP answers (a 5xx), none a reset
        self._lock = threading.Lock()
        self._sleepers: list[asyncio.Future[None]] = []

    def error(self) -> ServerUnreachable:
        if self.seconds is not None:
            return ServerUnreachable(
                self.url, self.reason, self.failed, self.option, seconds=self.seconds
            )
        return ServerUnreachable(self.url, self.reason, self.failures, self.option)

    def check(self) -> None:
        if self.is_open:
            raise self.error()

    def on_reply(self) -> None:
        """A good answer (or one that says the server is there: 429, a 4xx)."""
        with self._lock:
            if not self.is_open:
                self.failures = self.failed = 0
                self.failing_since = None
                self.answered, self._said = True, False

    def on_no_reply(self, reason: str) -> None:
        """Refused: nothing listens there (or no route to it, no such name)."""
        self._failed(reason, refused=True)

    def on_error(self, reason: str, status: int | None = None) -> None:
        """A failure from a server that is there, maybe busy: a 5xx (its HTTP ``status``), a
        reset, a timeout."""
        self._failed(reason, refused=False, answered=status is not None)

    def _failed(self, reason: str, refused: bool, answered: bool = False) -> None:
        with self._lock:
            now = self.clock()
            self.failures = self.failures + 1 if refused else 0
            self.failed += 1
            if self.failing_since is None:
                self.failing_since = now
                self._http = True
            self._http = self._http and answered  # the streak is HTTP error answers only
            self.reason = reason
            span = now - self.failing_since
            outage = self.answered and self._http  # a healthy server answering errors
            limit = self.ride_out_s if outage else self.dead_after_s
            by_time = 0 < self.errors <= self.failed and span >= limit
            tell = outage and not self._said and not self.is_open
            self._said = self._said or tell
            opened = (
                not self.is_open
                and self.threshold > 0
                and (self.threshold <= self.failures or by_time)
            )
            if opened:
                self.is_open = True
                if self.failures < self.threshold:
                    self.seconds = span
                sleepers, self._sleepers = self._sleepers, []
        if tell:
            self.say(f"{self.url or 'the server'} answered before and now fails ({reason}): "
                     f"retrying for up to {self.ride_out_s:g} s before stopping")  # fmt: skip
        if opened:  # calls backing off before their next attempt give up now
            for fut in sleepers:
                fut.get_loop().call_soon_threadsafe(_resolve, fut)

    def riding_out(self) -> bool:
        """Whether the server is in an outage being ridden out: it answered before, has
        answered nothing but HTTP errors (a 5xx: no reset, no refusal) since, and RIDE_OUT_S has
        not run out. A call keeps retrying meanwhile, past the retry policy's attempts."""
        with self._lock:
            return (
                not self.is_open and self.answered and self.failed > 0 and self._http
                and self.failing_since is not None
                and self.clock() - self.failing_since < self.ride_out_s
            )  # fmt: skip

    async def sleep(
        self, delay: float, wait: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ) -> None:
        """Back off for ``delay`` seconds (``wait``: the endpoint's sleep), or less if the
        breaker opens meanwhile."""
        fut = asyncio.get_running_loop().create_future()
        with self._lock:
            if self.is_open:
                return
            self._sleepers.append(fut)
        waiting = asyncio.ensure_future(wait(delay))
        try:
            await asyncio.wait({fut, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            with self._lock:
                if fut in self._sleepers:
                    self._sleepers.remove(fut)


def _say(line: str) -> None:
    import sys

    print(f"warning: {line}", file=sys.stderr)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
