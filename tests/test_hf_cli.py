"""A tiny checkpoint folder through the user's commands: `cafe run --model <folder>` picks the
adapter from config.json's model_type, and `cafe doctor` passes a model that hears."""

from __future__ import annotations

import json

import pytest
import torch  # noqa: F401  (needed installed: fail, never skip)
import transformers  # noqa: F401  (needed installed: fail, never skip)

pytest.register_assert_rewrite("hf_tiny_fixtures")

from click.testing import CliRunner  # noqa: E402
from runner_helpers import HIGH, LOW, register, write_tone_bench  # noqa: E402

from cafe.adapters.cli import doctor_command  # noqa: E402
from cafe.runner.main import run_with  # noqa: E402

pytest_plugins = ["hf_tiny_fixtures"]
register()


def test_run_with_a_checkpoint_folder(tiny_checkpoints, tmp_path):
    meta = write_tone_bench(tmp_path / "bench", [HIGH, LOW])
    folder = tiny_checkpoints("qwen2.5-omni")
    res = run_with(
        folder,
        "tone",
        data=str(meta),
        out=tmp_path / "r",
        progress=False,
        judge="none",
        max_new_tokens=3,
    )
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["model"]["adapter"] == "qwen2.5-omni"
    assert manifest["model"]["checkpoint"] == folder
    preds = [json.loads(x) for x in (res.run_dir / "predictions.jsonl").read_text().splitlines()]
    assert [p["sample_id"] for p in preds] == ["t0", "t1"]
    assert all(p["error"] is None and p["raw_output"] is not None for p in preds)


def test_doctor_command_on_a_folder(tiny_checkpoints, tmp_path):
    meta = write_tone_bench(tmp_path / "bench", [HIGH, LOW])
    args = ["--model", tiny_checkpoints("qwen2-audio"), "--bench", "tone", "--data", str(meta)]
    result = CliRunner().invoke(
        doctor_command, [*args, "--limit", "2", "--max-new-tokens", "2", "--strict"]
    )
    assert result.exit_code == 0, result.output
    assert "t0: output" in result.output and "t1: output" in result.output
    assert result.output.strip().splitlines()[-1].startswith("ok")
