"""Memory on oversized inputs: peak RSS of (1) the audio checks and decode on a two-hour clip
(refused from its header, so nothing is decoded) and (2) loading an MMAR-format metadata file of
M megabytes, each in a fresh process so the figure belongs to that input alone. A baseline
process (imports only) is printed beside them.

    PYTHONPATH=. python perf/bad_input_memory.py               # two-hour clip, 100 MB metadata
    PYTHONPATH=. python perf/bad_input_memory.py --mb 10       # on a loaded machine

Target (issue 11): bounded: the clip costs no more than the baseline (a decoded two-hour clip
would be ~0.5 GB of float32), the metadata a small multiple of its size."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import click

CHILD = r"""
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if kind == "clip":
    from cafe.audio import check_audio, load_audio
    from cafe.records import InputError
    msgs = []
    for fn in (check_audio, load_audio):
        try:
            fn(path, sample_id="long")
        except InputError as e:
            msgs.append(e.problem.message)
    out = {"refused": msgs}
elif kind == "meta":
    from cafe.benchmarks.mmar import MMAR
    lb = MMAR().load(path)
    out = {"samples": len(lb.samples), "problems": len(lb.problems)}
else:
    import cafe.audio, cafe.benchmarks.mmar  # noqa: F401  (the same imports, no input)
    out = {}
out["wall_s"] = round(time.perf_counter() - t0, 2)
out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(out))
"""


def two_hour_clip(path: Path, hours: float) -> None:
    """A real 16 kHz mono 16-bit WAV header over a sparse file: made in milliseconds."""
    n = int(hours * 3600 * 16000) * 2
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16)
    with path.open("wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + n) + b"WAVEfmt " + fmt + b"data")
        f.write(struct.pack("<I", n))
        f.truncate(44 + n)


def big_metadata(path: Path, mb: float) -> int:
    """MMAR-format JSONL of about ``mb`` megabytes (long questions, as real items can have)."""
    n = 0
    target = int(mb * 1_000_000)
    with path.open("w") as f:
        while f.tell() < target:
            item = {
                "id": f"item{n}", "audio_path": f"./audio/item{n}.wav",
                "question": f"Question {n}: " + "which sound comes first? " * 20,
                "choices": ["A dog", "A bell", "Rain", "A car"], "answer": "A bell",
                "modality": "sound", "category": "Perception Layer",
                "sub-category": "Temporal Analysis", "language": None, "source": "x",
                "url": "u", "timestamp": "0",
            }  # fmt: skip
            f.write(json.dumps(item) + "\n")
            n += 1
    return n


def child(kind: str, path: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, path], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


@click.command()
@click.option("--mb", default=100.0, show_default=True, help="Metadata file size (MB).")
@click.option("--hours", default=2.0, show_default=True, help="Clip length (hours).")
def main(mb: float, hours: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clip, meta = Path(tmp) / "long.wav", Path(tmp) / "MMAR-meta.jsonl"
        two_hour_clip(clip, hours)
        items = big_metadata(meta, mb)
        base = child("none", "")
        c = child("clip", str(clip))
        m = child("meta", str(meta))
        size = meta.stat().st_size / 1e6
        print(f"baseline (imports only): peak RSS {base['peak_rss_mb']} MB")
        print(
            f"{hours:g} h clip ({clip.stat().st_size / 1e6:.0f} MB on disk): peak RSS "
            f"{c['peak_rss_mb']} MB, {c['wall_s']} s; refused: {c['refused'][0]}"
        )
        print(
            f"{size:.0f} MB metadata ({items} items): peak RSS {m['peak_rss_mb']} MB "
            f"({m['peak_rss_mb'] / size:.1f} x file size), {m['wall_s']} s, "
            f"{m['samples']} samples, {m['problems']} problems"
        )


if __name__ == "__main__":
    main()
