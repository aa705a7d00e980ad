"""Adaptive concurrency limiter and retry policy shared by every chat client: additive increase,
multiplicative decrease in proportion to the share of calls rate-limited (as DCTCP does with
congestion marks). A 429 cuts the allowed concurrency by half that share (all of them 429: a
halving; one in ten: 5%), at most once per cut window (the 429s of calls already in flight
describe the load before the cut, and cutting again for each of them sinks concurrency towards
1); it grows back by one slot every ``recover_every_s`` seconds of successes (or every
``recover_after`` successes, whichever comes first), so it recovers in seconds. Retry-After
delays the call that got it; it pauses every caller only once the limit is at its floor (a cut
is the answer above it). One slot less per 429 where a tenth of the calls are turned away keeps
a run within 2x of its fault-free time (perf/ratelimit_429.py). Failures back off exponentially
with jitter (from 0.1 s: a busy server's 5xx is mostly one-off), and a per-server circuit
breaker (cafe.clients.breaker) ends calls to a dead server (refused, or nothing but failures for
a while), never to a busy one.

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

from cafe.clients.breaker import Breaker

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
        no_reply: bool = False,
        refused: bool | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.no_reply = no_reply  # no answer at all (refused, reset, dropped): counted apart
        # nobody there (refused, DNS, no route, TLS): the breaker's dead server; a reset or a
        # drop (no_reply without refused) happens to busy servers too
        self.refused = no_reply if refused is None else refused


def is_retryable_status(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500


#: longest wait honoured, Retry-After included: a bogus header must not stall a run (said once)
MAX_RETRY_AFTER_S = 60.0


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds as the server sent it (capped when used: RetryPolicy.delay); the
    HTTP-date form is rare for APIs and treated as absent, like a value that is no number."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN: absent


def _say(line: str) -> None:
    import sys

    print(f"warning: {line}", file=sys.stderr)


@dataclass
class RetryPolicy:
    """Bounded retries: attempt k (1-based) waits base_delay·2^(k-1) (capped at max_delay) times a
    uniform jitter factor in [1-jitter, 1+jitter]; a 429 without Retry-After waits
    ``rate_limited_factor`` times that (the limiter's cut is the main answer to a rate limit).
    The first wait after a 5xx or a reset is short (a busy server's error is mostly one-off) and
    the tail bounded: 6 attempts wait 3.1 s in all, on average. A server's Retry-After is taken
    as it is (waiting longer only loses time), up to ``max_retry_after``; a longer one gives the
    call up at once (call_with_retries), said once (``say``)."""

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 60.0
    max_retry_after: float = MAX_RETRY_AFTER_S
    jitter: float = 0.5
    timeout_s: float = 120.0  # one attempt's wall clock
    rate_limited_factor: float = 10.0
    say: Callable[[str], None] = _say
    _said: bool = False

    def delay(
        self, attempt: int, retry_after: float | None = None, rate_limited: bool = False
    ) -> float:
        if retry_after is not None:
            if retry_after > self.max_retry_after and not self._said:
                self._said = True  # once per client: every call may carry the same header
                self.say(f"a server asked to wait {retry_after:g} s (Retry-After), longer than "
                         f"cafe waits ({self.max_retry_after:g} s): the calls it answers so are "
                         "given up, not retried; run the same command again later")  # fmt: skip
            return min(retry_after, self.max_retry_after)
        base = self.base_delay * (self.rate_limited_factor if rate_limited else 1.0)
        d = min(self.max_delay, base * (2 ** (attempt - 1)))
        return d * random.uniform(1 - self.jitter, 1 + self.jitter)


#: seconds of successes per regained slot
RECOVER_EVERY_S = 0.05
#: shortest time between two cuts (a longer Retry-After stretches it)
CUT_WINDOW_S = 1.0


class AdaptiveLimiter:
    """Concurrency cap that shrinks under rate limiting and recovers in seconds.

    ``limit`` starts at ``max_concurrency``; ``on_rate_limited`` multiplies it by 1 - share/2,
    share being the 429s among the calls answered since the last cut (not below
    ``min_concurrency``; a fresh limiter's first 429 halves it), unless it was cut less than a
    cut window ago (``CUT_WINDOW_S``, or the Retry-After if longer); at the floor it pauses new
    calls for Retry-After instead. A success gives back one slot per ``recover_every_s`` seconds
    since the last change (at least one after ``recover_after`` successes in a row), up to
    ``max_concurrency``. ``clock``/``sleep``: injectable for tests. Counters (429s, 5xx, no
    reply, retries, seconds waited) feed run manifests."""

    def __init__(
        self,
        max_concurrency: int = 16,
        *,
        min_concurrency: int = 1,
        recover_after: int = 20,
        recover_every_s: float = RECOVER_EVERY_S,
        cut_window_s: float = CUT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.min_concurrency = max(1, min(min_concurrency, max_concurrency))
        self.recover_after = max(1, recover_after)
        self.recover_every_s = recover_every_s
        self.cut_window_s = cut_window_s
        self.clock, self.sleep = clock, sleep
        self.limit = max_concurrency
        self.in_flight = 0
        self.paused_until = 0.0
        self.rate_limited = 0  # how many 429s were seen (reported in run manifests)
        self.server_errors = 0  # 5xx replies
        self.no_reply = 0  # attempts that got no reply at all
        self.retries = 0  # attempts after the first
        self.waited_s = 0.0  # seconds calls spent backing off
        self._streak = 0
        self._answered = self._limited = 0  # calls answered / rate-limited since the last cut
        self._changed_at = clock()  # last cut or growth
        self._cut_until = -1.0  # no cut before this time
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
            if fut is None:  # paused by Retry-After at the floor: every caller waits it out
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
            self._answered += 1
            now = self.clock()
            # one slot per recover_every_s since the last change, all at once: replies come in
            # waves, and one slot per reply-wave would tie recovery to the server's latency
            steps = int((now - self._changed_at) / self.recover_every_s)
            if self._streak >= self.recover_after:
                steps = max(steps, 1)
            if steps and self.limit < self.max_concurrency:
                self.limit = min(self.max_concurrency, self.limit + steps)
                self._streak = 0
                self._changed_at = now
                grew = True
        if grew:
            self._wake()

    def on_rate_limited(self, retry_after: float | None = None) -> None:
        with self._lock:
            self.rate_limited += 1
            self._streak = 0
            now = self.clock()
            self._answered += 1
            self._limited += 1
            if self.limit <= self.min_concurrency:  # nothing left to cut: the server says wait
                if retry_after:
                    self.paused_until = max(self.paused_until, now + retry_after)
                self._changed_at = now  # and no growth until it has been quiet a while
            elif now >= self._cut_until:
                share = self._limited / self._answered
                cut = max(1, int(self.limit * share / 2))
                self.limit = max(self.min_concurrency, self.limit - cut)
                self._answered = self._limited = 0
                self._cut_until = now + max(self.cut_window_s, retry_after or 0.0)
                self._changed_at = now

    def on_failure(self, status: int | None = None, no_reply: bool = False) -> None:
        with self._lock:
            self._streak = 0
            if status is not None and status >= 500:
                self.server_errors += 1
            if no_reply:
                self.no_reply += 1

    def on_backoff(self, seconds: float) -> None:
        with self._lock:
            self.retries += 1
            self.waited_s += seconds

    def stats(self) -> dict[str, Any]:
        return {
            "limit": self.limit, "max": self.max_concurrency, "rate_limited": self.rate_limited,
            "server_errors": self.server_errors, "no_reply": self.no_reply,
            "retries": self.retries, "waited_s": round(self.waited_s, 3),
        }  # fmt: skip


#: the counters of ``AdaptiveLimiter.stats`` that add up over endpoints and sessions
CALL_COUNTERS = ("rate_limited", "server_errors", "no_reply", "retries", "waited_s")


def add_call_stats(*stats: dict[str, Any]) -> dict[str, Any]:
    """Field-wise sum of the call counters of several limiters (or sessions)."""
    out: dict[str, Any] = dict.fromkeys(CALL_COUNTERS, 0)
    for st in stats:
        for k in CALL_COUNTERS:
            out[k] += st.get(k) or 0
    out["waited_s"] = round(out["waited_s"], 3)
    return out


def format_call_stats(stats: dict[str, Any]) -> str | None:
    """One line for a command's summary, or None when every call went through at once."""
    if not any(stats.get(k) for k in CALL_COUNTERS):
        return None
    return (
        f"server calls: {stats.get('rate_limited', 0)} rate-limited (429), "
        f"{stats.get('server_errors', 0)} server errors (5xx), "
        f"{stats.get('no_reply', 0)} without reply; {stats.get('retries', 0)} retries, "
        f"{stats.get('waited_s', 0):g} s waiting"
    )


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
    breaker: Breaker | Callable[[], Breaker] | None = None,
) -> Outcome:
    """Run ``once`` under a limiter slot and a per-attempt timeout, retrying CallErrors that are
    retryable (and timeouts) with backoff. Never raises for a failed call: the error is returned
    (redacted), so one bad item never loses a batch. ``limiter`` may be a function that picks
    one per attempt (several endpoints: a retry may go elsewhere); ``breaker`` likewise (the
    chosen endpoint's, read after ``limiter`` chose): the one exception, ServerUnreachable, is
    raised once it opens, at once for calls backing off too."""
    choose = (lambda: limiter) if isinstance(limiter, AdaptiveLimiter) else limiter
    which = (lambda: breaker) if isinstance(breaker, Breaker) else breaker
    # several endpoints: one whose breaker opens is left for the others (``choose`` skips it,
    # and raises ServerUnreachable once every one has opened); one endpoint: raised at once
    pooled = not isinstance(limiter, AdaptiveLimiter)
    last = "no attempt made"
    attempt, limit = 0, policy.max_attempts  # the limit grows while an outage is ridden out
    while attempt < limit:
        attempt += 1
        retry_after = None
        retryable = True
        last_status: int | None = None
        lim = choose()
        brk = which() if which is not None else None
        if brk is not None:
            brk.check()
        await lim.acquire()
        try:
            if brk is not None and brk.is_open and pooled:
                continue  # it opened while this call waited for a slot: try another endpoint
            if brk is not None:
                brk.check()  # it may have opened while this call waited for a slot
            # the HTTP client enforces timeout_s on the call itself; this outer limit is a
            # backstop only, so cold-start work (imports, first connection) never eats into it
            value = await asyncio.wait_for(once(), timeout=policy.timeout_s * 1.5 + 0.5)
        except asyncio.TimeoutError:
            last = f"timed out after {policy.timeout_s * 1.5 + 0.5:g} s"
            lim.on_failure()
            if brk is not None:
                brk.on_error(redact(last))
        except CallError as e:
            last = str(e)
            retryable = e.retryable
            retry_after = e.retry_after
            last_status = e.status
            if e.status == 429:
                lim.on_rate_limited(
                    None if retry_after is None else min(retry_after, policy.max_retry_after)
                )
            else:
                lim.on_failure(e.status, e.no_reply)
            if brk is not None:
                if e.refused:  # nobody there
                    brk.on_no_reply(redact(last))
                elif e.status == 429 or not e.retryable:  # there, and said so
                    brk.on_reply()
                else:  # a 5xx, a reset, a malformed body: busy, or dead if it lasts
                    brk.on_error(redact(last), e.status)
        else:
            lim.on_success()
            if brk is not None:
                brk.on_reply()
            return Outcome(value=value, attempts=attempt)
        finally:
            lim.release()
        if brk is not None and not pooled:
            brk.check()
        if retry_after is not None and retry_after > policy.max_retry_after:
            policy.delay(attempt, retry_after)  # said once
            return Outcome(error=redact(
                f"{last}: the server asks to wait {retry_after:g} s (Retry-After), longer than "
                f"cafe waits ({policy.max_retry_after:g} s); run the same command again later"
            ), attempts=attempt)  # fmt: skip
        # a healthy server's outage (other calls fail too: not this request's own fault):
        # keep on, the breaker bounds it in time
        if attempt == limit and brk is not None and brk.riding_out() and brk.failed > attempt:
            limit += 1
        if not retryable or attempt == limit:
            return Outcome(error=redact(f"{last} (after {attempt} attempt(s))"), attempts=attempt)
        step = min(attempt, policy.max_attempts)  # riding out: the last backoff, no longer
        pause = policy.delay(step, retry_after, rate_limited=last_status == 429)
        lim.on_backoff(pause)
        # the endpoint's clock waits (the limiter's sleep); a breaker that opens meanwhile ends it
        await (brk.sleep(pause, lim.sleep) if brk is not None else lim.sleep(pause))
    return Outcome(error=redact(last), attempts=limit)
