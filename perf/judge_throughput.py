"""Judge throughput: `judge_run` against a loopback OpenAI-compatible judge with 200 ms latency.

At concurrency C and latency L the bound is C / L judgements per second (32 / 0.2 s = 160/s);
the target is at least 80% of it. A cached re-judge (judgement files deleted, call cache kept)
must make 0 calls. The loopback judge runs in its own process, as a real judge server would, so
its request threads do not compete with the judge pipeline for the interpreter lock. The chat
client alone at the same concurrency is measured too: it is the ceiling this machine allows.
Prints figures; asserts nothing about time.

    PYTHONPATH=. python perf/judge_throughput.py [--items 960] [--concurrency 32] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from cafe.judge.extraction import build_prompt
from cafe.prompts import text_template
from cafe.records import Prediction, Sample
from cafe.steps.cafe_judge import judge_run
from cafe.store import RunStore

TEMPLATE = text_template("extraction")[0]
REPLY = json.dumps(
    {
        "required_events": ["dog barks"],
        "all_caption_events": ["dog barks", "rain"],
        "all_reasoning_events": ["dog barks", "horn"],
        "matched_events": ["dog barks"],
        "error_matched": ["horn"],
        "error_use": [],
        "neutral_events": [],
        "missed_events": [],
    }
)


def _reply(body: dict) -> str:
    return REPLY


def _serve(latency: float, urls: mp.Queue, counts: mp.Queue, stop: mp.Event) -> None:
    from cafe.testing.loopback import OpenAILoopback

    with OpenAILoopback(reply=_reply, latency_s=latency) as srv:
        urls.put(srv.url)
        stop.wait()
        counts.put(len(srv.requests))


class JudgeServer:
    """The loopback judge in a child process; ``requests()`` stops it and returns its count."""

    def __init__(self, latency: float):
        self._urls, self._counts, self._stop = mp.Queue(), mp.Queue(), mp.Event()
        self._proc = mp.Process(
            target=_serve, args=(latency, self._urls, self._counts, self._stop), daemon=True
        )
        self._proc.start()
        self.url = self._urls.get(timeout=60)

    def requests(self) -> int:
        self._stop.set()
        n = self._counts.get(timeout=60)
        self._proc.join(timeout=10)
        return n


def build(root: Path, n: int) -> RunStore:
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "perf"}})
    samples = [
        Sample(f"s{i}", "mmar", "1", f"question {i}?", ["a", "b"], "a", [], caption=f"cap {i}")
        for i in range(n)
    ]
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(
            Prediction(
                s.id,
                0,
                "m",
                "lalm",
                "h",
                f"a. Reasoning: {s.id}",
                correct=True,
                reasoning_tokens=i % 200,
            )  # fmt: skip
            for i, s in enumerate(samples)
        )
    return store


async def _raw_client_rate(url: str, n: int, concurrency: int) -> float:
    from cafe.clients import make_client

    client = make_client("openai-compatible", "raw", endpoints=[url], concurrency=concurrency)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        # the same prompt the judge sends for item i, so the ceiling is for these requests
        prompt = build_prompt(TEMPLATE, question=f"question {i}?", answer="a",
                              caption=f"cap {i}", output=f"a. Reasoning: s{i}")  # fmt: skip
        content = [{"type": "text", "text": prompt}]
        async with sem:
            await client.achat([{"role": "user", "content": content}], temperature=0.0,
                               max_tokens=2048)  # fmt: skip

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    await client.aclose()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=960)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    args = ap.parse_args()
    import scipy.stats  # noqa: F401  (warm the metrics import so it is not timed as judging)

    bound = args.concurrency / args.latency
    print(f"items {args.items}, concurrency {args.concurrency}, latency "
          f"{args.latency * 1000:.0f} ms, bound {bound:.0f}/s, load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "run", args.items)
        cache = Path(tmp) / "judge.sqlite"
        server = JudgeServer(args.latency)
        t0 = time.perf_counter()
        sec = judge_run(store.root, "openai-compatible", "perf-judge", [server.url],
                        args.concurrency, progress=False, cache=cache)  # fmt: skip
        wall = time.perf_counter() - t0
        rate = args.items / wall
        jw = sec["calls"]["judge_wall_s"]
        jrate = args.items / jw
        print(
            f"judging phase {jw:.2f} s: {jrate:.1f} judgements/s = {100 * jrate / bound:.1f}% "
            f"of the bound; {sec['calls']['sent']} calls; {sec['judgements']}"
        )
        print(f"whole judge_run (with metrics, CIs, decay) {wall:.2f} s: {rate:.1f}/s = "
              f"{100 * rate / bound:.1f}% of the bound")  # fmt: skip
        for p in store.root.glob("judgements*.jsonl"):
            p.unlink()
        t0 = time.perf_counter()
        again = judge_run(store.root, "openai-compatible", "perf-judge", [server.url],
                          args.concurrency, progress=False, cache=cache)  # fmt: skip
        cached_wall = time.perf_counter() - t0
        raw = asyncio.run(_raw_client_rate(server.url, args.items, args.concurrency))
        seen = server.requests()
        print(
            f"cached re-judge: {again['calls']['sent']} calls sent, {cached_wall:.2f} s; "
            f"server saw {seen} requests in all ({args.items} judge + {args.items} raw)"
        )
        print(
            f"chat client alone, same prompts: {raw:.1f} calls/s = {100 * raw / bound:.1f}% of "
            f"the bound; judging phase at {100 * jrate / raw:.1f}% of the client alone"
        )


if __name__ == "__main__":
    main()
