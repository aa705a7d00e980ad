"""MMAR rubric judging throughput: `rubric_run` (5 raters per correct item) against a loopback
OpenAI-compatible judge with 200 ms latency, in its own process as a real server would be.

At concurrency C and latency L the bound is C / L calls per second. Two figures: rubric judging
through the shared clients as a share of the bound, and as a share of a raw loopback baseline
(the same client sending the same prompts at the same concurrency, no rubric code). The target
is at least 80% of the baseline. A cached re-score (records deleted, call cache kept) must send
no call. Prints figures; asserts nothing about time.

    PYTHONPATH=. python perf/rubric_concurrency.py [--items 96] [--concurrency 32] [--latency 0.2]
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

from cafe.judge.rubric import RubricTemplate, build_prompt, criteria_of
from cafe.records import Prediction, Sample
from cafe.steps.rubric import rubric_run
from cafe.store import RunStore

RUBRIC = [
    {"name": f"criterion {i}", "scoring_point": "1 if met", "note": "", "choices": [0, 1]}
    for i in range(5)
]
REPLY = json.dumps(
    [{"name": c["name"], "score": 1, "justification": "met"} for c in RUBRIC], ensure_ascii=False
)


def _reply(body: dict) -> str:
    return REPLY


def _serve(latency: float, urls: mp.Queue, counts: mp.Queue, stop: mp.Event) -> None:
    from cafe.testing.loopback import OpenAILoopback

    with OpenAILoopback(reply=_reply, latency_s=latency) as srv:
        urls.put(srv.url)
        stop.wait()
        counts.put(len(srv.requests))


def samples_for(n: int) -> list[Sample]:
    meta = {"rubric": RUBRIC, "thinking": "ideal reasoning", "modality": "sound"}
    return [
        Sample(f"s{i}", "mmar", "v2", f"question {i}?", ["a", "b"], "a", [], meta=meta)
        for i in range(n)
    ]


def build(root: Path, n: int) -> RunStore:
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "perf"}, "bench": {"name": "mmar"}})
    samples = samples_for(n)
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    with store.writer("predictions.jsonl") as w:
        w.write_many(
            Prediction(s.id, 0, "m", "lalm", "h", f"a. Reasoning: {s.id}", answer="a",
                       sections={"reasoning": s.id}, correct=True)
            for s in samples
        )  # fmt: skip
    return store


async def _raw(url: str, n: int, raters: int, concurrency: int) -> float:
    from cafe.clients import make_client

    client = make_client("openai-compatible", "raw", endpoints=[url], concurrency=concurrency)
    sem = asyncio.Semaphore(concurrency)
    template = RubricTemplate.load()
    prompts = [build_prompt(template, s, criteria_of(s), s.id, "a") for s in samples_for(n)]

    async def one(prompt: str) -> None:
        async with sem:
            await client.achat(
                [{"role": "system", "content": template.system},
                 {"role": "user", "content": [{"type": "text", "text": prompt}]}],
                temperature=0.0, max_tokens=2048, seed=42,
            )  # fmt: skip

    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts for _ in range(raters)))
    await client.aclose()
    return n * raters / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=96)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    args = ap.parse_args()
    bound = args.concurrency / args.latency
    print(f"items {args.items} x 5 raters, concurrency {args.concurrency}, latency "
          f"{args.latency * 1000:.0f} ms, bound {bound:.0f} calls/s, load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    urls, counts, stop = mp.Queue(), mp.Queue(), mp.Event()
    proc = mp.Process(target=_serve, args=(args.latency, urls, counts, stop), daemon=True)
    proc.start()
    url = urls.get(timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "run", args.items)
        cache = Path(tmp) / "judge.sqlite"
        asyncio.run(_raw(url, max(1, args.concurrency // 5), 5, args.concurrency))  # warm-up
        raw = asyncio.run(_raw(url, args.items, 5, args.concurrency))
        t0 = time.perf_counter()
        sec = rubric_run(store.root, "openai-compatible", "perf-judge", [url], args.concurrency,
                         cache=cache, progress=False)  # fmt: skip
        wall = time.perf_counter() - t0
        rate = sec["calls"]["sent"] / sec["calls"]["wall_s"]
        print(f"raw loopback baseline (same prompts, same client): {raw:.1f} calls/s = "
              f"{100 * raw / bound:.1f}% of the bound")  # fmt: skip
        print(
            f"rubric judging phase {sec['calls']['wall_s']:.2f} s: {rate:.1f} calls/s = "
            f"{100 * rate / bound:.1f}% of the bound, {100 * rate / raw:.1f}% of the raw "
            f"baseline; whole rubric_run {wall:.2f} s; score {sec['score']}, {sec['status']}"
        )
        store.path(sec["file"]).unlink()
        t0 = time.perf_counter()
        again = rubric_run(store.root, "openai-compatible", "perf-judge", [url],
                           args.concurrency, cache=cache, progress=False)  # fmt: skip
        print(f"cached re-score: {again['calls']['sent']} calls sent, "
              f"{time.perf_counter() - t0:.2f} s")  # fmt: skip
    stop.set()
    print(f"server saw {counts.get(timeout=60)} requests")
    proc.join(timeout=10)


if __name__ == "__main__":
    main()
