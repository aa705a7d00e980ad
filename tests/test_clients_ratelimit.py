"""The adaptive limiter and retry policy on their own: cap, halving, slow recovery, pauses."""

from __future__ import annotations

import asyncio
import threading

import pytest
from manual_clock import ManualClock

from cafe.clients.ratelimit import (
    AdaptiveLimiter,
    CallError,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
)


def test_cap_is_never_exceeded_and_every_waiter_runs():
    lim = AdaptiveLimiter(3)
    peak = 0

    async def job():
        nonlocal peak
        await lim.acquire()
        try:
            peak = max(peak, lim.in_flight)
            await asyncio.sleep(0.01)
        finally:
            lim.release()

    async def main():
        await asyncio.gather(*(job() for _ in range(20)))

    asyncio.run(main())
    assert peak == 3 and lim.in_flight == 0


class _Clock:
    """A clock that moves only when told (the limiter reads time through it)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_halves_on_429_and_recovers_one_slot_per_streak():
    # changed with the limiter (issue 21): one cut per cut window, so the clock moves past it
    # between the 429s; it stands still otherwise, so only the streak of successes recovers
    clock = _Clock()
    lim = AdaptiveLimiter(16, recover_after=5, clock=clock)
    lim.on_rate_limited()
    assert lim.limit == 8
    for _ in range(4):
        clock.now += lim.cut_window_s
        lim.on_rate_limited()
    assert lim.limit == 1  # 16 -> 8 -> 4 -> 2 -> 1 -> stays at the floor
    for _ in range(4):
        lim.on_success()
    assert lim.limit == 1
    lim.on_success()
    assert lim.limit == 2
    lim.on_failure()  # a failure breaks the streak
    for _ in range(4):
        lim.on_success()
    assert lim.limit == 2
    for _ in range(5 * 20):
        lim.on_success()
    assert lim.limit == 16  # never above the cap


def test_retry_after_pauses_new_calls():
    clock = ManualClock()
    # at its floor (issue 21: above it, a 429 cuts concurrency instead of pausing every caller)
    lim = AdaptiveLimiter(1, clock=clock.now, sleep=clock.sleep)
    t429 = clock.now()
    lim.on_rate_limited(retry_after=0.3)
    started: list[float] = []  # virtual time at which each call got its slot

    async def call():
        await lim.acquire()
        started.append(clock.now())
        lim.release()

    async def main():
        await asyncio.gather(*(call() for _ in range(3)))

    asyncio.run(main())
    assert len(started) == 3 and lim.in_flight == 0
    # not one call started before the pause ended; each waited it out once, none longer
    assert sum(t < t429 + 0.3 for t in started) == 0
    assert started == [pytest.approx(t429 + 0.3)] * 3
    assert clock.sleeps == [pytest.approx(0.3)] * 3
    asyncio.run(call())  # after the pause: straight through, no wait
    assert len(clock.sleeps) == 3 and started[-1] == pytest.approx(t429 + 0.3)


def test_backoff_waits_through_the_endpoint_clock():
    clock = ManualClock()
    calls = []

    async def flaky():
        calls.append(clock.now())
        raise CallError("HTTP 503", status=503)

    policy = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=10.0)
    lim = AdaptiveLimiter(2, clock=clock.now, sleep=clock.sleep)  # the backoff waits on it too
    out = asyncio.run(call_with_retries(flaky, lim, policy))
    assert out.attempts == 3 and len(calls) == 3
    # two backoffs (1 s then 2 s nominal, ±50 % jitter) and none after the last attempt
    assert len(clock.sleeps) == 2
    assert 0.5 <= clock.sleeps[0] <= 1.5 and 1.0 <= clock.sleeps[1] <= 3.0
    assert calls[1] - calls[0] == pytest.approx(clock.sleeps[0])


def test_one_limiter_serves_several_loops_and_threads():
    lim = AdaptiveLimiter(2)
    peak = []

    def worker():
        async def job():
            await lim.acquire()
            peak.append(lim.in_flight)
            await asyncio.sleep(0.02)
            lim.release()

        async def main():
            await asyncio.gather(*(job() for _ in range(5)))

        asyncio.run(main())

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(peak) == 15 and max(peak) <= 2 and lim.in_flight == 0


def test_backoff_is_exponential_jittered_and_capped():
    p = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.5)
    for attempt, nominal in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (8, 5.0)):
        d = p.delay(attempt)
        assert nominal * 0.5 <= d <= nominal * 1.5
    assert p.delay(1, retry_after=30.0) == 30.0
    assert parse_retry_after("7") == 7.0 and parse_retry_after("soon") is None
    assert parse_retry_after("99999") == 99999.0  # as sent; capped where it is used:
    said: list[str] = []
    p = RetryPolicy(say=said.append)
    assert p.delay(1, retry_after=1e9) == 60.0 and p.delay(2, retry_after=1e9) == 60.0
    assert len(said) == 1 and "1e+09 s (Retry-After)" in said[0]
    assert "longer than cafe waits (60 s)" in said[0]


def test_non_retryable_errors_stop_and_attempts_are_bounded():
    calls = []

    async def bad_request():
        calls.append(1)
        raise CallError("HTTP 400: nope", status=400, retryable=False)

    async def flaky():
        calls.append(1)
        raise CallError("HTTP 503", status=503)

    policy = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.002)
    out = asyncio.run(call_with_retries(bad_request, AdaptiveLimiter(2), policy))
    assert out.attempts == 1 and len(calls) == 1 and "400" in out.error
    calls.clear()
    out = asyncio.run(call_with_retries(flaky, AdaptiveLimiter(2), policy))
    assert out.attempts == 4 and len(calls) == 4 and "after 4 attempt(s)" in out.error


@pytest.mark.parametrize("value", [None, ""])
def test_missing_retry_after(value):
    assert parse_retry_after(value) is None
