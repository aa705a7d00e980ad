"""A circuit breaker per server: after ``threshold`` attempts in a row that got no reply at all
(connection refused, DNS, TLS, the connection dropped before any answer), the server is taken
for dead and every call to it fails at once with ``ServerUnreachable`` instead of retrying with
backoff for minutes. Any reply (even a 429 or a 500) resets the count: a busy or failing server
is the retry policy's business, not the breaker's.

Commands let ``ServerUnreachable`` through their per-item error handling: the run stops within
seconds, keeps what it wrote, and says which server and which option named it, so that fixing
the server and running the same command again resumes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from cafe.errors import CafeError

#: attempts in a row without any reply that open a breaker (0: never)
BREAK_AFTER = 3


class ServerUnreachable(CafeError):
    """A server that gave no reply to ``failures`` attempts in a row (the last ``reason``)."""

    def __init__(
        self, url: str | None, reason: str, failures: int, option: str | None = None,
        note: str | None = None,
    ):  # fmt: skip
        self.url, self.reason, self.failures, self.option = url, reason, failures, option
        where = url or "the service's default endpoint"
        named = f" (set by {option})" if option else ""
        text = (
            f"no reply from {where}{named}: {failures} attempts in a row failed "
            f"without an answer (last: {reason})"
        )
        if note:
            text += f"; stopped: {note}; once the server answers, run the same command again"
        super().__init__(text)

    def stopped(self, note: str) -> ServerUnreachable:
        """The same error saying what the stopped command kept (and that a re-run resumes)."""
        return ServerUnreachable(self.url, self.reason, self.failures, self.option, note)


class Breaker:
    """Counts attempts without a reply for one server; opens at ``threshold`` in a row."""

    def __init__(self, url: str | None, threshold: int = BREAK_AFTER, option: str | None = None):
        self.url = url
        self.threshold = threshold
        self.option = option  # the command-line option that named the server, for the message
        self.failures = 0  # in a row
        self.reason = ""
        self.is_open = False
        self._lock = threading.Lock()
        self._sleepers: list[asyncio.Future[None]] = []

    def error(self) -> ServerUnreachable:
        return ServerUnreachable(self.url, self.reason, self.failures, self.option)

    def check(self) -> None:
        if self.is_open:
            raise self.error()

    def on_reply(self) -> None:
        with self._lock:
            if not self.is_open:
                self.failures = 0

    def on_no_reply(self, reason: str) -> None:
        with self._lock:
            self.failures += 1
            self.reason = reason
            opened = not self.is_open and 0 < self.threshold <= self.failures
            if opened:
                self.is_open = True
                sleepers, self._sleepers = self._sleepers, []
        if opened:  # calls backing off before their next attempt give up now
            for fut in sleepers:
                fut.get_loop().call_soon_threadsafe(_resolve, fut)

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


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
