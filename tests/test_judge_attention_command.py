"""`cafe attention` end to end on a tiny Qwen2-Audio checkpoint folder and two synth clips."""

from __future__ import annotations

import json

import pytest
import torch  # noqa: F401  (needed installed: fail, never skip)
import transformers  # noqa: F401  (needed installed: fail, never skip)


@pytest.mark.slow
def test_attention_command_writes_averaged_curve(tmp_path):
    from click.testing import CliRunner

    from cafe.benchmarks.synth.generator import generate
    from cafe.metrics.cli import attention_command
    from cafe.testing.tiny_models import build_tiny_qwen2_audio

    ckpt = build_tiny_qwen2_audio(tmp_path / "tiny")
    data = generate(tmp_path / "synth", n=2, seed=0)
    out = tmp_path / "attention.json"
    res = CliRunner().invoke(
        attention_command,
        ["--model", str(ckpt), "--bench", "synth", "--data", str(data), "--limit", "2",
         "--max-new-tokens", "4", "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())
    assert got["items"] == 2 and got["problems"] == []
    assert 1 <= len(got["index"]) <= 4
    assert got["count"] == sorted(got["count"], reverse=True) and got["count"][0] == 2
    assert all(0.0 <= m <= 1.0 for m in got["mean"])
