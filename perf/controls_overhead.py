"""Listening-control overhead: a control run should cost its model time and nothing more, so
its harness time (wall minus time inside the adapter's generate) must stay within 10% of a
plain run's.

For each model (``random``: no model time at all; ``reference``: real signal processing), N synth
items run plain and under every control, each into a fresh folder with the model call cache off
(every item reaches the model) and no judge. Control clips are made on first use and cached in
$CAFE_CACHE/controls: the "cold" pass includes making them (once per benchmark, shared by every
model), the "warm" pass is what each further model pays. Prints figures; asserts nothing.

    PYTHONPATH=. python perf/controls_overhead.py [--n 200] [--model random --model reference]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

CONTROLS = ("silence", "noise", "shuffled", "text-only")


def timed_adapters(names: list[str]) -> dict[str, list[float]]:
    """Wrap each adapter's generate to add up the seconds spent inside it."""
    from cafe.adapters import ADAPTERS

    spent: dict[str, list[float]] = {}
    for name in names:
        cls = ADAPTERS.get(name)
        box = spent.setdefault(name, [0.0])
        inner = cls.generate

        def generate(self, requests, _inner=inner, _box=box):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return _inner(self, requests)
            finally:
                _box[0] += time.perf_counter() - t0

        cls.generate = generate  # type: ignore[method-assign]
    return spent


def one(model: str, n: int, out: Path, control: str | None, spent: list[float]) -> tuple:
    from cafe.runner.main import run_with

    spent[0] = 0.0
    t0 = time.perf_counter()
    run_with(model, "synth", version=f"n{n}-seed0", out=out, control=control, judge="none",
        cache=False, progress=False)  # fmt: skip
    wall = time.perf_counter() - t0
    return wall, spent[0], wall - spent[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--model", action="append")
    ap.add_argument("--reps", type=int, default=3, help="Warm runs of each; the best is shown.")
    args = ap.parse_args()
    models = args.model or ["random", "reference"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CAFE_CACHE"] = str(Path(tmp) / "cache")
        from cafe.benchmarks.synth import ensure_generated

        ensure_generated(args.n, 0)  # generation is not part of any run's cost
        spent = timed_adapters(models)
        print(f"{args.n} synth items, call cache off, no judge; load {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores")  # fmt: skip
        print(f"{'model':<10} {'run':<18} {'wall s':>7} {'model s':>8} {'harness s':>9} "
              f"{'harness vs plain':>17}")  # fmt: skip
        k = 0
        for model in models:
            k += 1
            one(model, args.n, Path(tmp) / f"warmup{k}", None, spent[model])  # imports, caches
            from cafe.controls import default_folder

            shutil.rmtree(default_folder(), ignore_errors=True)  # this model's cold pass
            cold = {c: one(model, args.n, Path(tmp) / f"{model}-cold-{c}", c, spent[model])
                    for c in CONTROLS}  # fmt: skip
            # warm: the clips exist; the best of --reps runs each (a shared machine's noise)
            best: dict[str, tuple] = {}
            for rep in range(args.reps):
                for c in (None, *CONTROLS):
                    out = Path(tmp) / f"{model}-{rep}-{c or 'plain'}"
                    r = one(model, args.n, out, c, spent[model])
                    key = c or "plain"
                    if key not in best or r[2] < best[key][2]:
                        best[key] = r
            plain = best["plain"]
            rows = [("plain", plain)]
            rows += [(f"{c} (cold)", cold[c]) for c in CONTROLS]
            rows += [(f"{c} (warm)", best[c]) for c in CONTROLS]
            for name, (wall, mod, harness) in rows:
                ratio = f"{100 * (harness / plain[2] - 1):+.1f}%" if name != "plain" else "-"
                print(f"{model:<10} {name:<18} {wall:7.2f} {mod:8.2f} {harness:9.2f} {ratio:>17}")


if __name__ == "__main__":
    main()
