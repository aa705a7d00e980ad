"""Throughput under rate limiting: 200 calls at concurrency 16 against a loopback server that
answers after 200 ms and turns every 10th request away with 429 (Retry-After 1 s). Prints the
fault-free time, the faulty time and their ratio (target: at most 2x), and the counters the
run manifest records (429s, retries, seconds waited).

    PYTHONPATH=. python perf/ratelimit_429.py [--items 200] [--concurrency 16] [--every 10]
    PYTHONPATH=. python perf/ratelimit_429.py --cafe-run   # the same through `cafe run`'s path
                                                          # (synth items, served-model adapter)

Before issue 21 each 429 halved concurrency and paused every caller, and a slot came back only
after 20 successes in a row: 19.6x (63.7 s vs 3.25 s)."""

from __future__ import annotations

import argparse
import asyncio
import time

from cafe.clients import make_client
from cafe.execution import run_sync
from cafe.testing.loopback import Fault, OpenAILoopback


def timed(url: str, items: int, concurrency: int) -> tuple[float, dict]:
    client = make_client("openai-compatible", "m", [url], concurrency=concurrency)

    async def all_calls() -> list:
        msgs = [{"role": "user", "content": "Question? (A) dog (B) cat"}]
        try:
            return await asyncio.gather(*(client.achat(msgs) for _ in range(items)))
        finally:
            await client.aclose()

    t0 = time.perf_counter()
    replies = run_sync(all_calls())
    wall = time.perf_counter() - t0
    failed = sum(r.error is not None for r in replies)
    assert failed == 0, f"{failed} calls failed"
    return wall, client.call_stats()


def timed_run(url: str, items: int, concurrency: int) -> tuple[float, dict]:
    """The same calls as `cafe run --model openai-compatible` makes them (synth clips encoded,
    the runner's batches and threads), into a throwaway run folder, no cache."""
    import tempfile

    from cafe.runner.main import run_with

    out = tempfile.mkdtemp()
    t0 = time.perf_counter()
    res = run_with("openai-compatible", "synth", version=f"n{items}-seed0", out=out, judge="none",
              progress=False, cache=False, concurrency=concurrency,
              options={"model": "m", "endpoints": [url], "concurrency": concurrency})  # fmt: skip
    wall = time.perf_counter() - t0
    assert res.new_predictions == items and not res.most_failed
    usage = res.manifest.get("usage") or {}
    return wall, {k: usage.get(k) for k in ("rate_limited", "retries", "waited_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--every", type=int, default=10, help="every Nth request gets a 429")
    ap.add_argument("--retry-after", type=float, default=1.0)
    ap.add_argument("--cafe-run", action="store_true", help="through `cafe run` (the runner)")
    args = ap.parse_args()
    measure = timed_run if args.cafe_run else timed
    if args.cafe_run:
        from cafe.benchmarks.synth import ensure_generated

        ensure_generated(args.items, 0)  # generated once, outside the timings

    def faults(i: int, body: dict) -> Fault | None:
        return (
            Fault("429", retry_after=args.retry_after) if i % args.every == args.every - 1 else None
        )

    with OpenAILoopback(reply=lambda b: "(A)", latency_s=args.latency) as srv:
        timed(srv.url, args.concurrency, args.concurrency)  # warm: imports, connections
        clean, _ = measure(srv.url, args.items, args.concurrency)
    with OpenAILoopback(reply=lambda b: "(A)", latency_s=args.latency, faults=faults) as srv:
        faulty, stats = measure(srv.url, args.items, args.concurrency)
        sent = srv.count
    print(f"fault-free: {clean:.2f} s   with every {args.every}th request 429 "
          f"(Retry-After {args.retry_after:g} s): {faulty:.2f} s   ratio {faulty / clean:.2f}x "
          "(target <= 2x)")  # fmt: skip
    print(f"requests sent {sent}; {stats}")


if __name__ == "__main__":
    main()
