"""The Ray path's cost (`cafe run --engine ray`) against the in-process run, and its throughput
with 1 and 2 actors.

A loopback OpenAI-compatible server answers every call after a fixed latency (0.2 s by
default); the openai-compatible adapter runs in-process, or in Ray actors on a local cluster
bound to 127.0.0.1, each actor with its own client of ``--per-actor`` calls in flight. Runs are
alternated (in-process, 1 actor, 2 actors, repeated) so the machine's load hits all alike.
Printed: seconds per item of each, the ratio of the 1-actor run to the in-process one (the cost
of the proxy, the actors' calls and the pickling), the 2-actor throughput over the 1-actor one,
and the actors' start (placed + adapter loaded), which a run pays once.

    PYTHONPATH=. .venv/bin/python perf/ray_pool.py [--items 120] [--latency 0.2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=120)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--per-actor", type=int, default=4, help="calls in flight per client")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from cafe.cluster.session import LOOPBACK_ONLY

    os.environ.setdefault(LOOPBACK_ONLY, "0")
    from cafe.cluster.session import connect
    from cafe.runner.main import run_with
    from cafe.testing.loopback import OpenAILoopback

    connect(None, num_cpus=2)
    work = Path(tempfile.mkdtemp(prefix="cafe-ray-perf-"))
    wall: dict[str, list[float]] = {"in-process": [], "ray x1": [], "ray x2": []}
    start: list[float] = []
    with OpenAILoopback(reply=lambda b: "Answer: A", latency_s=args.latency) as server:
        base = {"model": "m", "endpoints": [server.url], "concurrency": args.per_actor}
        placements = {"in-process": None, "ray x1": 1, "ray x2": 2}
        for r in range(args.rounds):
            for name, actors in placements.items():
                options = dict(base)
                if actors:
                    options["ray"] = {"actors": actors, "cpus": 0.5}
                    start.append(_start_time(options))
                t0 = time.perf_counter()
                run_with("openai-compatible", "synth", limit=args.items, out=work / f"{name}-{r}",
                    progress=False, cache=False, options=options, concurrency=None)  # fmt: skip
                wall[name].append(time.perf_counter() - t0)
    boot = statistics.median(start)
    per_item = {k: statistics.median(v) / args.items for k, v in wall.items()}
    # the same with the actors' start taken out: what each further item costs
    steady = {k: (statistics.median(v) - (boot if k != "in-process" else 0)) / args.items
              for k, v in wall.items()}  # fmt: skip
    for k, v in per_item.items():
        print(f"{k:<11} {v * 1000:7.1f} ms/item, {steady[k] * 1000:7.1f} without the start "
              f"(median of {args.rounds} runs of {args.items})")  # fmt: skip
    for name, figures in (("whole run", per_item), ("start taken out", steady)):
        print(f"{name}: cost per item, ray x1 / in-process: "
              f"x{figures['ray x1'] / figures['in-process']:.2f}; throughput, ray x2 / ray x1: "
              f"x{figures['ray x1'] / figures['ray x2']:.2f}")  # fmt: skip
    print(f"(latency {args.latency} s, {args.per_actor} calls in flight per client; actors' "
          f"start, placed + loaded: median {boot:.1f} s, paid once per run)")  # fmt: skip


def _start_time(options: dict) -> float:
    """Seconds to place the actors and load the adapter in them (then closed again)."""
    from cafe.adapters import load_model

    t0 = time.perf_counter()
    _, adapter = load_model("openai-compatible", options=options)
    took = time.perf_counter() - t0
    adapter.close()
    return took


if __name__ == "__main__":
    main()
