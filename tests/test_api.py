"""The Python API delegates to the owning modules."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe import api
from cafe.errors import CafeUsageError

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
    monkeypatch.setitem(api.TARGETS, "train_sft", "cafe.no_such_module:train")
    with pytest.raises(ImportError, match="cafe.no_such_module:train") as e:
        api.train_sft("smoke")
    assert "install" not in str(e.value)  # a missing cafe module is a bug, not a missing extra
    monkeypatch.setitem(api.TARGETS, "train_sft", "cafe.training.api:no_such_function")
    with pytest.raises(ImportError, match="does not exist"):
        api.train_sft("smoke")


def test_every_api_target_resolves_to_a_callable() -> None:
    for name, target in api.TARGETS.items():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), name


#: every command of the command line -> the cafe.api functions that do what it does
COMMAND_FUNCTIONS = {
    "run": ["run", "permute_choices"],  # --permute-choices runs after the run
    "score": ["score"],
    "export": ["export"],
    "bench": ["bench"],
    "adapters": ["adapters"],
    "doctor": ["doctor"],
    "caption": ["caption"],
    "judge": ["judge"],
    "judge-agreement": ["judge_agreement"],
    "judge-accuracy": ["judge_accuracy"],
    "judge-official": ["judge_official"],
    "rubric": ["rubric"],
    "cues": ["cues"],
    "listen": ["listen"],
    "decay": ["decay"],
    "attention": ["attention"],
    "report": ["report", "table", "figure", "compare_row"],
    "compare": ["compare"],
    "explain": ["explain"],
    "leaderboard": ["leaderboard", "leaderboard_add", "leaderboard_html", "leaderboard_verify"],
    "train": ["train_data", "train_sft", "train_grpo", "train_smoke", "train_recipes"],
    "serve": ["serve"],
    "necessity": ["necessity"],
    "sweep": ["sweep"],
}


def test_every_command_is_a_documented_function() -> None:
    from cafe.cli import COMMANDS

    assert set(COMMAND_FUNCTIONS) == set(COMMANDS)
    listed = [f for fs in COMMAND_FUNCTIONS.values() for f in fs]
    assert sorted(listed) == sorted(api.FUNCTIONS)
    for name in api.FUNCTIONS:
        fn = getattr(api, name)
        assert callable(fn) and name in api.__all__, name
        assert fn.__doc__ and len(fn.__doc__.split()) >= 5, f"cafe.api.{name} has no docstring"
        assert f"{name}" in api.__doc__, f"cafe.api's table lacks {name}"


def test_api_pipeline_on_a_synth_run(tmp_path: Path) -> None:
    """run -> judge -> decay -> export -> report -> table -> leaderboard_add, all as functions."""
    import json

    data = api.bench(tmp_path / "synth", limit=6, seed=3)
    assert data.name == "synth.jsonl" and len(data.read_text().splitlines()) == 6
    res = api.run(
        "reference", "synth", data=str(data), out=tmp_path / "r", progress=False, judge="none"
    )
    cafe = api.judge(res.run_dir, progress=False)
    assert cafe["judgements"]["total"] == 6
    section = api.decay(res.run_dir, bins=2, min_count=1)
    assert sum(b["n"] for b in section["bins"]) == 6
    metrics = json.loads((res.run_dir / "metrics.json").read_text())
    assert metrics["decay"] == section and metrics["cafe"]["acc_per"] == cafe["acc_per"]
    with pytest.raises(CafeUsageError, match="--bench mmar or --bench mmau"):
        api.export(res.run_dir, tmp_path / "x.json")  # synth has no official scorer
    folder = api.report(res.run_dir, draw=False)
    assert (folder / "summary.md").exists()
    text = api.table(1, [res.run_dir], fmt="csv")  # Table 1 is MMAR: the paper's rows only
    assert text.splitlines()[0] == "group,model,markers,Acc_per,Err_per,Err_use,Err_omit,MMAR acc"
    assert "LALM,Qwen2.5-Omni-7B,,31.74,29.61,28.69,57.37,55.20" in text.splitlines()
    row, path = api.leaderboard_add(res.run_dir, path=tmp_path / "lb.yaml", name="ref-test")
    board = api.leaderboard(tmp_path / "lb.yaml")
    assert row.model == "ref-test" and board.rows[-1].model == "ref-test"
    assert path == tmp_path / "lb.yaml"
    page = api.leaderboard_html(tmp_path / "lb.html", path=tmp_path / "lb.yaml")
    assert page == tmp_path / "lb.html" and "ref-test" in page.read_text()
    rows = api.adapters()
    assert any(r["name"] == "reference" and r["adapter"] == "reference" for r in rows)
    assert api.adapters("reference")["prompt_style"] == "mpar2"
    assert "smoke" in api.train_recipes()
