"""The Python API delegates to the owning modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe import api

register()


def test_api_run_is_the_runner(tmp_path: Path) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW])
    res = api.run("tone", "tone", data=str(meta), out=tmp_path / "r", progress=False, cache=False)
    assert res.metrics["accuracy"]["total"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert (res.run_dir / "manifest.json").exists()


def test_api_score_uses_the_official_scorer(tmp_path: Path, monkeypatch) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH])
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        '{"id": "t0", "model_output": "high tone"}\n{"id": "t1", "model_output": "high tone"}\n'
    )
    # the tone benchmark declares no prediction keys: the Benchmark default, model_output
    section, _ = api.score("tone", str(meta), str(preds))
    # t0 right, t1 wrong, t2 without a prediction: wrong and unanswered
    assert section["total"] == {"correct": 1, "total": 3, "acc": 33.33}
    assert section["unanswered"] == 1


def test_missing_part_names_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(api.TARGETS, "train", "cafe.no_such_module:train")
    with pytest.raises(ImportError, match="cafe.no_such_module:train"):
        api.train()
