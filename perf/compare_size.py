"""Time of `cafe compare` and `cafe explain` on an MMAR-sized pair: N items x R runs (default
1,000 x 3), outcomes drawn at random (seeded) for two runs, six modality cells, 2,000 bootstrap
resamples for compare and 1,000 for explain. Prints the seconds of each.

    PYTHONPATH=. python perf/compare_size.py [--items 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from outcome_runs import make_outcome_run  # noqa: E402

from cafe.reports.compare import compare  # noqa: E402
from cafe.reports.explain import explain  # noqa: E402

MODALITIES = ["sound", "music", "speech", "mix-sound-music", "mix-sound-speech", "mix-music-speech"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(0)
    ids = [f"i{k:05d}" for k in range(args.items)]
    modality = {sid: MODALITIES[k % len(MODALITIES)] for k, sid in enumerate(ids)}
    with tempfile.TemporaryDirectory() as tmp:
        roots = []
        for name, p_right in (("a", 0.55), ("b", 0.6)):
            outcomes = {
                sid: "".join(rng.choices("RWLUF", [p_right, 0.3, 0.05, 0.03, 0.02])[0]
                             for _ in range(args.runs))
                for sid in ids
            }  # fmt: skip
            roots.append(make_outcome_run(Path(tmp) / name, outcomes, modality=modality))
        t = time.perf_counter()
        compare(*roots)
        print(f"compare: {time.perf_counter() - t:.2f} s ({args.items} items x {args.runs} runs)")
        t = time.perf_counter()
        explain(*roots, against_protocol="denominator=answered,rule=lenient")
        print(f"explain: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
