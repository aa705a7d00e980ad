"""SIGKILL at any moment, then the same command again: every (item, run) exactly once and the
same metrics as an uninterrupted run. The model is a slow listening adapter that a subprocess
finds through an entry point of a temporary installed distribution."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from runner_helpers import CLI, HIGH, LOW, register, subprocess_env, write_dist, write_tone_bench

from cafe.runner.main import run_with

register()


def _keys(path: Path) -> list[tuple[str, int]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line left by the kill
        out.append((d["sample_id"], d["run_index"]))
    return out


def test_sigkill_then_same_command_finishes_exactly_once(tmp_path: Path) -> None:
    labels = [HIGH, LOW, LOW, HIGH, HIGH, LOW, HIGH, LOW, LOW, LOW]
    meta = write_tone_bench(tmp_path / "b", labels, dims=["x", "y"] * 5)
    # corrupt one clip so a failed item is part of the picture too
    (tmp_path / "b" / "t4.wav").write_bytes(b"RIFF....garbage")
    reference = run_with("tone", "tone", data=str(meta), out=tmp_path / "ref", runs=2,
                    progress=False, cache=False)  # fmt: skip

    env = subprocess_env(write_dist(tmp_path / "site"), tmp_path / "cache")
    out = tmp_path / "killed"
    cmd = [*CLI, "run", "--model", "tone", "--bench", "tone", "--data", str(meta), "--out",
           str(out), "--runs", "2", "--batch-size", "1", "--no-cache",
           "-o", "delay=0.04"]  # fmt: skip
    preds = out / "predictions.jsonl"
    for kill_after, stall_after in ((3, 7), (9, 6)):  # kill twice at different points
        # the kill lands wherever the run is (mid-write too), but never after its end: the
        # process stalls a few items past the kill point (at most 7 + 6 of 20 items)
        stall = {**env, "TONE_STALL_AFTER": str(stall_after)}
        proc = subprocess.Popen(cmd, env=stall, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if preds.exists() and len(_keys(preds)) >= kill_after:
                break
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode())  # type: ignore[union-attr]
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert len(_keys(preds)) < 20
    with preds.open("a") as f:  # a kill in the middle of a write leaves a torn line
        f.write('{"sample_id": "t9", "run_in')
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    keys = _keys(preds)
    assert len(keys) == len(set(keys)) == 20
    assert (
        json.loads((out / "metrics.json").read_text())["accuracy"]
        == (reference.metrics["accuracy"])
    )
    # run 0 and run 1 each: 9 of 10 right (t4 failed)
    assert reference.metrics["accuracy"]["total"] == {"correct": 18, "total": 20, "acc": 90.0}
    # the counters cover every line, those a kill left between a batch and its manifest too:
    # 20 replies, 18 calls (t4's unreadable clip never reached the model, in either run)
    lines = preds.read_text().splitlines()
    c = json.loads((out / "manifest.json").read_text())["counters"]["total"]
    assert sum(c["replies"].values()) == len(lines) == 20 and c["calls"] == 18
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert "0 new predictions (nothing left to run, no model loaded)" in again.stdout
