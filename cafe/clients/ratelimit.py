"""Adaptive concurrency limiter and retry policy shared by every chat client (after MMAR's
evaluation_rubrics.py): the allowed concurrency halves on each 429 and creeps back one slot per
run of successes; Retry-After pauses every caller; failures back off exponentially with jitter.

The limiter holds no asyncio primitive bound to one event loop (waiters are futures of whichever
loop awaits them, woken thread-safely), so one client can serve several ``asyncio.run`` calls and
several threads at once, sharing a single budget per endpoint.

Time comes from injectable ``clock``/``sleep`` (the limiter's) and ``RetryPolicy.sleep`` (the
backoff's), real by default, so tests drive pauses and backoff on a manual clock."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class CallError(Exception):
    """One failed attempt. ``retryable`` says whether another attempt may succeed."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = True,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500


#: longest Retry-After honoured: a bogus header must not stall a run for hours
MAX_RETRY_AFTER_S = 600.0


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare for APIs and treated as absent)."""
    if not value:
        return None
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value)))
    except ValueError:
        return None


@dataclass
class RetryPolicy:
    """Bounded retries: attempt k (1-based) waits base_delay·2^(k-1) (capped at max_delay) times a
    uniform jitter factor in [1-jitter, 1+jitter], or Retry-After if that is longer."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.5
    timeout_s: float = 120.0  # one attempt's wall clock
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep  # how a backoff waits

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        d = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        d *= random.uniform(1 - self.jitter, 1 + self.jitter)
        if retry_after is not None:
            d = max(d, retry_after)
        return d


class AdaptiveLimiter:
    """Concurrency cap that halves on rate limiting and recovers slowly.

    ``limit`` starts at ``max_concurrency``; ``on_rate_limited`` halves it (not below
    ``min_concurrency``) and pauses new calls for Retry-After; every ``recover_after`` successes
    in a row raise it by one, back up to ``max_concurrency``. ``clock`` (seconds, monotonic) and
    ``sleep`` are how the pause reads and waits out time."""

    def __init__(
        self,
        max_concurrency: int = 16,
        *,
        min_concurrency: int = 1,
        recover_after: int = 20,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.min_concurrency = max(1, min(min_concurrency, max_concurrency))
        self.recover_after = max(1, recover_after)
        self.clock = clock
        self.sleep = sleep
        self.limit = max_concurrency
        self.in_flight = 0
        self.paused_until = 0.0
        self.rate_limited = 0  # how many 429s were seen (reported in run manifests)
        self._streak = 0
        self._lock = threading.Lock()
        self._waiters: deque[asyncio.Future[None]] = deque()

    # -- slots -------------------------------------------------------------------------------
    async def acquire(self) -> None:
        while True:
            fut: asyncio.Future[None] | None = None
            with self._lock:
                pause = self.paused_until - self.clock()
                if pause <= 0:
                    if self.in_flight < self.limit:
                        self.in_flight += 1
                        return
                    fut = asyncio.get_running_loop().create_future()
                    self._waiters.append(fut)
            if fut is None:  # paused by Retry-After: every caller waits it out
                await self.sleep(pause)
                continue
            try:
                await fut
            except asyncio.CancelledError:
                with self._lock:
                    if fut in self._waiters:
                        self._waiters.remove(fut)
                self._wake()  # it may have been woken just before cancellation
                raise

    def release(self) -> None:
        with self._lock:
            self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        """Wake as many waiters as there are free slots; each re-checks under the lock."""
        with self._lock:
            free = self.limit - self.in_flight
            woken = []
            while free > 0 and self._waiters:
                woken.append(self._waiters.popleft())
                free -= 1
        for fut in woken:
            loop = fut.get_loop()
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, fut)

    # -- feedback ----------------------------------------------------------------------------
    def on_success(self) -> None:
        grew = False
        with self._lock:
            self._streak += 1
            if self._streak >= self.recover_after and self.limit < self.max_concurrency:
                self.limit += 1
                self._streak = 0
                grew = True
        if grew:
            self._wake()

    def on_rate_limited(self, retry_after: float | None = None) -> None:
        with self._lock:
            self.rate_limited += 1
            self._streak = 0
            self.limit = max(self.min_concurrency, self.limit // 2)
            if retry_after:
                self.paused_until = max(self.paused_until, self.clock() + retry_after)

    def on_failure(self) -> None:
        with self._lock:
            self._streak = 0

    def stats(self) -> dict[str, Any]:
        return {"limit": self.limit, "max": self.max_concurrency, "rate_limited": self.rate_limited}


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass
class Outcome:
    """What ``call_with_retries`` returns: a value, or the last error after bounded attempts."""

    value: Any = None
    error: str | None = None
    attempts: int = 0


async def call_with_retries(
    once: Callable[[], Awaitable[T]],
    limiter: AdaptiveLimiter | Callable[[], AdaptiveLimiter],
    policy: RetryPolicy,
    *,
    redact: Callable[[str], str] = lambda s: s,
) -> Outcome:
    """Run ``once`` under a limiter slot and a per-attempt timeout, retrying CallErrors that are
    retryable (and timeouts) with backoff. Never raises for a failed call: the error is returned
    (redacted), so one bad item never loses a batch. ``limiter`` may be a function that picks
    one per attempt (several endpoints: a retry may go elsewhere)."""
    choose = (lambda: limiter) if isinstance(limiter, AdaptiveLimiter) else limiter
    last = "no attempt made"
    for attempt in range(1, policy.max_attempts + 1):
        retry_after = None
        retryable = True
        lim = choose()
        await lim.acquire()
        try:
            # the HTTP client enforces timeout_s on the call itself; this outer limit is a
            # backstop only, so cold-start work (imports, first connection) never eats into it
            value = await asyncio.wait_for(once(), timeout=policy.timeout_s * 1.5 + 0.5)
        except asyncio.TimeoutError:
            last = f"timed out after {policy.timeout_s * 1.5 + 0.5:g} s"
            lim.on_failure()
        except CallError as e:
            last = str(e)
            retryable = e.retryable
            retry_after = e.retry_after
            if e.status == 429:
                lim.on_rate_limited(retry_after)
            else:
                lim.on_failure()
        else:
            lim.on_success()
            return Outcome(value=value, attempts=attempt)
        finally:
            lim.release()
        if not retryable or attempt == policy.max_attempts:
            return Outcome(error=redact(f"{last} (after {attempt} attempt(s))"), attempts=attempt)
        await policy.sleep(policy.delay(attempt, retry_after))
    return Outcome(error=redact(last), attempts=policy.max_attempts)
