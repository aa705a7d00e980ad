"""`cafe train smoke` end to end at the smallest scale: tiny model, synth data through the offline
pipeline, one SFT step, one GRPO step, a merged checkpoint scored by `cafe run` before/after."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")


def test_smoke_end_to_end(tmp_path, monkeypatch):
    from cafe.training.grpo import load_policy
    from cafe.training.recipes import load_recipe
    from cafe.training.smoke import run_smoke

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    recipe = load_recipe("smoke")
    recipe["data"].update(synth_n=10, sft_size=2, difficulty_n=3)
    recipe["sft"]["max_steps"] = 1
    recipe["grpo"]["max_steps"] = 1
    recipe["eval_max_new_tokens"] = 16
    lines: list[str] = []
    out = run_smoke(tmp_path / "w", limit=2, recipe=recipe, echo=lines.append)

    text = "\n".join(lines)
    for stage in ("clips", "questions", "question_filter", "difficulty", "pools", "cot_filter"):
        assert f"[data] {stage}" in text
    assert "before acc" in text and "after  acc" in text
    for name in ("before", "after"):
        run_dir = tmp_path / "w" / "runs" / name
        preds = (run_dir / "predictions.jsonl").read_text().splitlines()
        assert len(preds) == 2  # every item accounted for
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["accuracy"]["total"]["total"] == 2
        assert out[name]["acc"] == metrics["accuracy"]["total"]["acc"]
    # the merged checkpoint loads like any checkpoint, and training changed its weights
    final, _ = load_policy(out["checkpoint"])
    base, _ = load_policy(tmp_path / "w" / "base")
    assert not any("lora" in n for n, _ in final.named_parameters())
    assert any(
        not torch.equal(a, b)
        for (_, a), (_, b) in zip(final.named_parameters(), base.named_parameters(), strict=True)
    )
    # `cafe run --model CHECKPOINT` resolved each folder to the Qwen2-Audio adapter
    for name, folder in (("before", tmp_path / "w" / "base"), ("after", out["checkpoint"])):
        manifest = json.loads((tmp_path / "w" / "runs" / name / "manifest.json").read_text())
        assert manifest["checkpoint"]["path"] == str(folder)
        assert manifest["model"]["adapter"] == "qwen2-audio"
