"""A third-party adapter: a short Adapter subclass in another installed distribution, declared
under the ``cafe.adapters`` entry-point group, runs with `cafe run --model <its name>`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from runner_helpers import CLI, HIGH, LOW, subprocess_env, write_dist, write_tone_bench


def test_entry_point_adapter_runs_from_the_command_line(tmp_path: Path) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH])
    env = subprocess_env(write_dist(tmp_path / "site"), tmp_path / "cache")
    out = tmp_path / "r"
    done = subprocess.run(
        [*CLI, "run", "--model", "echo-first", "--bench", "tone", "--data", str(meta),
         "--out", str(out), "--quiet"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["answer"] for p in preds] == [HIGH, HIGH, HIGH]
    assert all(p["model"] == "echo-first" for p in preds)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["accuracy"]["total"] == {"correct": 2, "total": 3, "acc": 66.67}
    listed = subprocess.run(
        [*CLI, "adapters", "list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("echo-first"))
    assert "(adapter, no card)" in row
    shown = subprocess.run(
        [*CLI, "adapters", "show", "echo-first"], env=env, capture_output=True, text=True
    )
    assert "adapter: echo-first" in shown.stdout and "prompt_style: lalm" in shown.stdout
