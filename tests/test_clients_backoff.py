"""The limiter under rate limiting (issue 21), on an injected clock and counted sleeps: cuts in
proportion to the share of 429s, at most once per cut window; regrowth on time, in seconds;
Retry-After delays only the call that got it (everyone only at the floor); retries, 5xx and
waits are counted."""

from __future__ import annotations

import asyncio

from cafe.clients.ratelimit import (
    AdaptiveLimiter,
    CallError,
    RetryPolicy,
    add_call_stats,
    call_with_retries,
    format_call_stats,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_429_among_many_successes_costs_one_slot_and_all_429s_halve():
    clock = Clock()
    lim = AdaptiveLimiter(16, clock=clock)
    for _ in range(9):
        lim.on_success()
    lim.on_rate_limited(1.0)  # 1 in 10 rate-limited: 16 * (1 - 0.1 / 2) -> one slot less
    assert lim.limit == 15
    clock.now += 1.0
    lim.on_rate_limited(1.0)  # nothing but 429s since the last cut: 15 - floor(15 / 2)
    assert lim.limit == 8


def test_one_cut_per_window_however_many_429s_arrive_in_it():
    clock = Clock()
    lim = AdaptiveLimiter(16, clock=clock, cut_window_s=1.0)
    for _ in range(5):  # the calls in flight when the server pushed back all come back 429
        lim.on_rate_limited(0.5)
    assert lim.limit == 8 and lim.rate_limited == 5
    clock.now += 0.99
    lim.on_rate_limited(0.5)
    assert lim.limit == 8
    clock.now += 0.02  # a window after the cut: the share since then is all 429s
    lim.on_rate_limited(0.5)
    assert lim.limit == 4


def test_a_long_retry_after_stretches_the_cut_window():
    clock = Clock()
    lim = AdaptiveLimiter(16, clock=clock, cut_window_s=1.0)
    lim.on_rate_limited(5.0)
    clock.now += 2.0
    lim.on_rate_limited(5.0)
    assert lim.limit == 8  # still inside the 5 s the server asked for


def test_concurrency_grows_back_on_time_not_on_streaks():
    clock = Clock()
    lim = AdaptiveLimiter(16, clock=clock, recover_every_s=0.05, recover_after=1000)
    lim.on_rate_limited()
    assert lim.limit == 8
    lim.on_success()
    assert lim.limit == 8  # no time has passed
    clock.now += 0.2  # four slots' worth, regained by the next success all at once
    lim.on_success()
    assert lim.limit == 12
    clock.now += 10.0
    lim.on_success()
    assert lim.limit == 16  # never above the cap


def test_retry_after_above_the_floor_does_not_stall_other_callers():
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    lim = AdaptiveLimiter(8, clock=Clock(), sleep=sleep)
    lim.on_rate_limited(retry_after=30.0)

    async def take() -> None:
        await lim.acquire()
        lim.release()

    asyncio.run(take())
    assert slept == [] and lim.paused_until == 0.0


def test_retry_after_at_the_floor_pauses_new_calls_for_that_long():
    clock = Clock()
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        clock.now += s

    lim = AdaptiveLimiter(1, clock=clock, sleep=sleep)
    lim.on_rate_limited(retry_after=3.0)

    async def take() -> None:
        await lim.acquire()
        lim.release()

    asyncio.run(take())
    assert slept == [3.0]


def test_the_call_that_got_retry_after_waits_exactly_that_and_is_counted():
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    replies = iter([CallError("429", status=429, retry_after=1.5),
                    CallError("503", status=503), "ok"])  # fmt: skip

    async def once() -> str:
        r = next(replies)
        if isinstance(r, Exception):
            raise r
        return r

    lim = AdaptiveLimiter(4, clock=Clock(), sleep=sleep)
    policy = RetryPolicy(max_attempts=5, base_delay=2.0, jitter=0.0)
    out = asyncio.run(call_with_retries(once, lim, policy))
    assert out.value == "ok" and out.attempts == 3
    assert slept == [1.5, 4.0]  # Retry-After as given; then base 2 s doubled for attempt 2
    st = lim.stats()
    counted = (st["rate_limited"], st["server_errors"], st["retries"], st["waited_s"])
    assert counted == (1, 1, 2, 5.5)


def test_call_stats_add_up_and_print_only_when_something_happened():
    a = {"rate_limited": 2, "server_errors": 1, "no_reply": 0, "retries": 3, "waited_s": 2.25}
    b = {"rate_limited": 1, "server_errors": 0, "no_reply": 0, "retries": 1, "waited_s": 1.0}
    total = add_call_stats(a, b)
    assert total == {"rate_limited": 3, "server_errors": 1, "no_reply": 0, "retries": 4,
                     "waited_s": 3.25}  # fmt: skip
    line = format_call_stats(total)
    assert "3 rate-limited (429)" in line and "1 server errors (5xx)" in line
    assert "4 retries" in line and "3.25 s waiting" in line
    assert format_call_stats(add_call_stats()) is None


def test_cafe_run_records_429s_5xx_retries_and_waits_in_manifest_and_summary(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from cafe.cli import main
    from cafe.testing.loopback import Fault, OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    faults = [Fault("429", retry_after=0.01), "500"]
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>", faults=faults) as srv:
        args = ["run", "--model", "openai-compatible", "-o", "model=m", "--bench", "synth",
                "--version", "n4-seed0", "--out", str(out), "--judge", "none", "--no-progress",
                "--endpoint", srv.url, "-o", "base_delay=0.001", "-o", "max_delay=0.002",
                "--concurrency", "1", "--batch-size", "1"]  # fmt: skip
        res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    usage = json.loads((out / "manifest.json").read_text())["usage"]
    assert usage["calls"] == 4
    assert (usage["rate_limited"], usage["server_errors"], usage["retries"]) == (1, 1, 2)
    assert usage["waited_s"] >= 0.01  # the Retry-After, as given
    assert "1 rate-limited (429), 1 server errors (5xx), 0 without reply; 2 retries" in res.output
