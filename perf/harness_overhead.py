"""Harness overhead: N synth items through the whole `cafe run` pipeline with `reference`.

Prints time per stage (load and decode, model, parse + score + write), items/s, peak RSS, and
the wall time of re-running the finished run from the command line. Each N runs in a fresh
process so peak RSS belongs to that N alone (memory should stay flat as N grows).
Targets (issue 2): non-model overhead <= 5 ms/item, peak RSS < 500 MB at 1000 items and flat
in N, finished-run re-run < 2 s.

    PYTHONPATH=. python perf/harness_overhead.py            # N = 250 and 1000
    PYTHONPATH=. python perf/harness_overhead.py --n 1000 --n 4000

The synth sets are generated once into $CAFE_CACHE/synth (not timed); the model call cache is
off, so every item reaches the model."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import click

STAGES = ("bench load", "load and decode", "model", "parse + score + write")
# "load and decode" = the runner's header check + content hash + the decode the adapter calls
# (cafe.audio.load_audio, timed inside generate and taken out of "model")


def _child(n: int, out: Path, model: str) -> dict:
    """One run in this process, stages timed by wrapping the runner's collaborators."""
    import cafe.audio as audio_mod
    import cafe.runner.execute as execute
    import cafe.runner.main as runner
    from cafe.adapters import ADAPTERS
    from cafe.adapters.resolve import resolve_model
    from cafe.benchmarks import BENCHMARKS
    from cafe.benchmarks.synth import ensure_generated
    from cafe.store import JsonlWriter

    ensure_generated(n, 0)  # generation is not part of the harness cost
    spent: dict[str, float] = defaultdict(float)  # wall seconds
    cpu: dict[str, float] = defaultdict(float)  # CPU seconds of the calling thread
    lock = threading.Lock()

    def timed(stage: str, fn):  # type: ignore[no-untyped-def]
        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            t, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                with lock:
                    spent[stage] += time.perf_counter() - t
                    cpu[stage] += time.thread_time() - c

        return wrapper

    bench_cls = BENCHMARKS.get("synth")
    bench_cls.load = timed("bench load", bench_cls.load)
    runner.check_audio = timed("load and decode", runner.check_audio)
    execute.file_sha256 = timed("load and decode", execute.file_sha256)
    adapter_cls = ADAPTERS.get(resolve_model(model).card.adapter)
    adapter_cls.generate = timed("generate", adapter_cls.generate)
    audio_mod.load_audio = timed("decode", audio_mod.load_audio)
    runner.score_completion = timed("parse + score + write", runner.score_completion)
    JsonlWriter.write_many = timed("parse + score + write", JsonlWriter.write_many)

    t0, c0 = time.perf_counter(), time.process_time()
    result = runner.run_with(
        model, "synth", version=f"n{n}-seed0", out=out, cache=False, judge="none", progress=False
    )
    total, total_cpu = time.perf_counter() - t0, time.process_time() - c0
    for d in (spent, cpu):  # the adapter's decode is timed inside generate: move it out
        d["model"] = d.pop("generate", 0.0) - d.get("decode", 0.0)
        d["load and decode"] += d.pop("decode", 0.0)
    acc = result.metrics["accuracy"]["total"]
    return {
        "n": n,
        "total_s": total,
        "stages": dict(spent),
        "cpu": dict(cpu),
        "total_cpu_s": total_cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "acc": acc["acc"],
    }


def _rerun_seconds(n: int, out: Path, model: str) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "cafe.cli", "run", "--model", model, "--bench", "synth",
           "--version", f"n{n}-seed0", "--out", str(out), "--judge", "none", "--quiet",
           "--no-cache"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode != 0 or "0 new predictions" not in done.stdout:
        raise SystemExit(f"re-run did not find a finished run:\n{done.stdout}\n{done.stderr}")
    return elapsed, cpu


@click.command()
@click.option("--n", "sizes", multiple=True, type=int, help="Items (repeat) [250, 1000].")
@click.option("--model", default="reference", show_default=True)
@click.option("--child", type=int, hidden=True)
@click.option("--out", type=click.Path(), hidden=True)
def main(sizes: tuple[int, ...], model: str, child: int | None, out: str | None) -> None:
    if child is not None:
        print(json.dumps(_child(child, Path(out or "."), model)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="cafe-perf-") as tmp:
        for n in sizes or (250, 1000):
            run_dir = Path(tmp) / f"run-{n}"
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(n), "--out", str(run_dir),
                 "--model", model],
                capture_output=True, text=True, env=os.environ,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["rerun_s"], row["rerun_cpu_s"] = _rerun_seconds(n, run_dir, model)
            rows.append(row)
    print("Wall times depend on machine load; CPU times (thread/process CPU) do not.")
    for r in rows:
        n, st, cp = r["n"], r["stages"], r["cpu"]
        print(f"\n== {n} items, model {model}: accuracy {r['acc']}%")
        print(f"  {'stage':<24} {'wall s':>8} {'wall ms/item':>13} {'CPU ms/item':>12}")
        for stage in STAGES:
            w, c = st.get(stage, 0.0), cp.get(stage, 0.0)
            print(f"  {stage:<24} {w:8.2f} {1000 * w / n:13.2f} {1000 * c / n:12.2f}")
        print(f"  total {r['total_s']:.2f} s wall, {n / r['total_s']:.1f} items/s")
        wall_over = (r["total_s"] - st.get("model", 0.0)) / n * 1000
        cpu_over = (r["total_cpu_s"] - cp.get("model", 0.0)) / n * 1000
        print(
            f"  non-model overhead {cpu_over:.2f} ms/item CPU, {wall_over:.2f} ms/item wall "
            "(target <= 5)"
        )
        print(f"  peak RSS {r['peak_rss_mb']:.0f} MB (target < 500, flat in N)")
        print(
            f"  finished run re-run (CLI, new process) {r['rerun_s']:.2f} s wall, "
            f"{r['rerun_cpu_s']:.2f} s CPU (target < 2)"
        )


if __name__ == "__main__":
    main()
