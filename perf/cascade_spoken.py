"""The real cascade on the spoken benchmark, with its listening controls: prints accuracy, the
silence and question-only (text-only) controls with their paired bootstrap 95% intervals
(`cafe listen`), and seconds per item (wall clock of `cafe run` over the items, and the front's
and back's shares from the predictions).

    python perf/cascade_spoken.py                       # whisper-tiny-smollm2, 40 items
    python perf/cascade_spoken.py --items 100 --model whisper-tiny-smollm2 -o n_threads=1

Needs the cascade extra and espeak-ng (`make cascade-deps`). Runs in a fresh cache, so every
transcription and every option score is paid for once."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def _preds(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--model", default="whisper-tiny-smollm2")
    ap.add_argument("-o", dest="options", action="append", default=[], help="adapter option")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cafe-cascade-perf-"))
    os.environ["CAFE_CACHE"] = str(root / "cache")  # before cafe reads it
    from click.testing import CliRunner

    from cafe.cli import main as cafe

    def run(*argv: str) -> str:
        res = CliRunner().invoke(cafe, list(argv), catch_exceptions=False)
        if res.exit_code != 0:
            raise SystemExit(res.output)
        return res.output

    # the benchmark first, so its speaking is not timed as the model's
    run("bench", "spoken", "--out", str(root / "spoken"), "--limit", str(args.items))
    out = root / "real"
    opts = [x for o in args.options for x in ("-o", o)]
    start = time.perf_counter()
    run("run", "--model", args.model, "--bench", "spoken", "--data", str(root / "spoken"),
        "--out", str(out), "--no-progress", *opts)  # fmt: skip
    wall = time.perf_counter() - start
    start = time.perf_counter()
    run("listen", str(out), "--controls", "silence,text-only", "--no-progress")
    listen_wall = time.perf_counter() - start
    preds = _preds(out)
    n = len(preds)
    front = sum(p["front"]["latency_s"] for p in preds) / n
    total = sum(p["latency_s"] for p in preds) / n
    section = json.loads((out / "metrics.json").read_text())["listening"]
    acc = json.loads((out / "metrics.json").read_text())["accuracy"]["total"]["acc"]
    print(
        f"{args.model} on spoken ({n} items, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    print(f"accuracy (real audio)   {acc:6.2f}%   chance {section['chance']:.2f}%")
    for name, label in (("silence", "silence"), ("text-only", "question only")):
        c = section["controls"][name]
        lo, hi = c["ci95"]
        gap = f"gap {c['gap']:+6.2f} pts  (95% CI {lo:+.2f} .. {hi:+.2f})"
        print(f"{label:<22}  {c['acc']:6.2f}%   {gap}")
    print(f"seconds per item        {wall / n:.3f} s  (cafe run wall clock, model load included)")
    print(
        f"  of which per call     {total:.3f} s  (front {front:.3f} s, back {total - front:.3f} s)"
    )
    print(f"controls (2 x {n} items) {listen_wall / (2 * n):.3f} s per item")
    print(f"run folders under {root}")


if __name__ == "__main__":
    main()
