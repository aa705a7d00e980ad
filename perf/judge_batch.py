"""Judging by batch: calls and cost, direct vs batch vs a cached re-run, and what it takes to
prepare and submit a large batch.

Part 1: ``--judgements`` (item, run)s (default 3,000: 1,000 items x 3 runs, every run's output
distinct) judged by ``openai:<--model>`` against a loopback speaking chat completions and Files +
Batches, in its own process: the dry-run estimate, then direct (fresh cache), batch (fresh
cache) and a cached re-run (judgement files deleted, cache kept). Calls are the requests the
server answered; cost is the ledger's, from the server's reported usage (word counts) and
cafe/clients/prices.yaml.

Part 2: ``--submit`` requests (default 10,000) through the batch client: wall time from the first
call to the batch id in the log (spool to disk, upload, create), and Python's peak traced memory
during it, for that size and a tenth of it (flat memory: the request lines go to disk as they
come, so the peak per request is what the callers hold, not the batch).

    PYTHONPATH=. python perf/judge_batch.py [--judgements 3000] [--submit 10000]
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from cafe.records import Prediction, Sample
from cafe.steps.cafe_judge import judge_run
from cafe.store import RunStore

REPLY = json.dumps(
    {
        "required_events": ["dog barks", "rain"],
        "all_caption_events": ["dog barks", "rain", "car horn"],
        "all_reasoning_events": ["dog barks", "horn"],
        "matched_events": ["dog barks"],
        "error_matched": ["horn"],
        "error_use": [],
        "neutral_events": [],
        "missed_events": ["rain"],
    }
)
KEY = "sk-perf-not-a-real-key"


def _reply(body: dict) -> str:
    return REPLY


def _serve(urls: mp.Queue, counts: mp.Queue, stop: mp.Event) -> None:
    from cafe.testing.loopback import OpenAILoopback

    with OpenAILoopback(reply=_reply) as srv:
        urls.put(srv.url)
        while not stop.wait(0.2):
            counts.put((len(srv.requests), sum(srv.batches.paid.values())))
        counts.put((len(srv.requests), sum(srv.batches.paid.values())))


class Server:
    """The loopback in a child process; ``counts()`` -> (direct calls, batch lines answered)."""

    def __init__(self) -> None:
        self._urls, self._counts, self._stop = mp.Queue(), mp.Queue(), mp.Event()
        self._proc = mp.Process(target=_serve, args=(self._urls, self._counts, self._stop),
                                daemon=True)  # fmt: skip
        self._proc.start()
        self.url = self._urls.get(timeout=60)
        self._last = (0, 0)

    def counts(self) -> tuple[int, int]:
        time.sleep(0.5)
        while not self._counts.empty():
            self._last = self._counts.get()
        return self._last

    def stop(self) -> None:
        self._stop.set()
        self._proc.join(timeout=10)


def build(root: Path, n: int) -> RunStore:
    items = max(1, n // 3)
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "perf"}})
    caption = "A dog barks twice while rain falls; a car horn sounds near the end. " * 3
    choices = ["a dog", "a horn"]
    samples = [
        Sample(f"s{i}", "mmar", "1", f"What is heard first in clip {i}?", choices, "a dog", [],
               caption=caption)
        for i in range(items)
    ]  # fmt: skip
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    reasoning = "I hear a dog barking first, then rain and a horn, so the answer is a dog. " * 4
    with store.writer("predictions.jsonl") as w:
        w.write_many(
            Prediction(s.id, r, "m", "lalm", "h", f"a dog. Reasoning ({r}): {reasoning}",
                       correct=True, reasoning_tokens=60)
            for s in samples for r in range(3)
        )  # fmt: skip
    return store


def part1(n: int, model: str) -> None:
    os.environ["OPENAI_API_KEY"] = os.environ["CAFE_ENDPOINT_API_KEY"] = KEY  # a loopback URL
    srv = Server()
    fast = {"poll_s": 0.2, "collect_s": 0.5}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            store = build(tmp / "run", n)
            total = len(store.predictions())

            def run(cache: str, **kw):  # type: ignore[no-untyped-def]
                for p in store.root.glob("judgements*.jsonl"):
                    p.unlink()
                t0 = time.perf_counter()
                sec = judge_run(store.root, "openai", model, [srv.url], 64, progress=False,
                                cache=tmp / cache, **kw)  # fmt: skip
                return sec, time.perf_counter() - t0

            est, _ = run("a.sqlite", dry_run=True)
            print(f"{total} judgements by openai:{model}; dry run: {est['calls']} calls, "
                  f"est. ${est['cost_usd_direct_est']:.4f} direct / "
                  f"${est['cost_usd_batch_est']:.4f} batch "
                  f"(replies ~{est['expected_output_tokens']} tokens)")  # fmt: skip
            rows = []
            before = srv.counts()
            for label, cache, kw in (
                ("direct", "a.sqlite", {}),
                ("batch", "b.sqlite", {"batch": True, "batch_options": fast}),
                ("cached re-run", "a.sqlite", {}),
            ):
                sec, wall = run(cache, **kw)
                now = srv.counts()
                calls = (now[0] - before[0]) + (now[1] - before[1])
                before = now
                cost = (sec["calls"].get("cost") or {}).get("total_cost_usd") or 0.0
                rows.append((label, calls, cost, wall, sec["judgements"]["ok"]))
            print(f"{'mode':<14}{'calls':>8}{'cost USD':>12}{'wall s':>9}{'ok':>7}")
            for label, calls, cost, wall, ok in rows:
                print(f"{label:<14}{calls:>8}{cost:>12.4f}{wall:>9.1f}{ok:>7}")
            d, b = rows[0][2], rows[1][2]
            if d:
                print(f"batch / direct cost: {b / d:.2f} (same tokens, batch price)")
    finally:
        srv.stop()


async def _submit(url: str, n: int, folder: Path, model: str) -> float:
    from cafe.clients import make_client
    from cafe.clients.batch import BatchSpec
    from cafe.clients.calls import CallPlan

    plan = CallPlan(mode="batch", batch=BatchSpec(folder, collect_s=0.2, poll_s=3600))
    client = make_client("openai", model, endpoints=[url], calls=plan)
    text = "Judge this reasoning against the caption and list the events. " * 20  # ~1.3 KB
    t0 = time.perf_counter()
    tasks = [
        asyncio.ensure_future(client.achat(
            [{"role": "user", "content": [{"type": "text", "text": f"{i}: {text}"}]}],
            temperature=0.0, max_tokens=2048))
        for i in range(n)
    ]  # fmt: skip
    while not any('"submitted"' in p.read_text() for p in folder.glob("*/log.jsonl")):
        await asyncio.sleep(0.01)
    wall = time.perf_counter() - t0
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()
    return wall


def part2(n: int, model: str) -> None:
    os.environ["OPENAI_API_KEY"] = os.environ["CAFE_ENDPOINT_API_KEY"] = KEY  # a loopback URL
    srv = Server()
    try:
        for size in (max(1, n // 10), n):
            with tempfile.TemporaryDirectory() as tmp:
                wall = asyncio.run(_submit(srv.url, size, Path(tmp) / "b", model))
            with tempfile.TemporaryDirectory() as tmp:
                tracemalloc.start()
                asyncio.run(_submit(srv.url, size, Path(tmp) / "b", model))
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            print(
                f"prepare + submit {size:>6} requests: {wall:6.2f} s "
                f"({size / wall:,.0f}/s); peak traced memory {peak / 2**20:6.1f} MiB "
                f"({peak / size / 1024:.1f} KiB a request, callers' messages included)"
            )
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judgements", type=int, default=3000)
    ap.add_argument("--submit", type=int, default=10000)
    ap.add_argument("--model", default="gpt-4o-mini")
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.judgements:
        part1(args.judgements, args.model)
    if args.submit:
        part2(args.submit, args.model)


if __name__ == "__main__":
    main()
