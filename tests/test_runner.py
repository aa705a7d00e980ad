"""The runner end to end, in process, on the tone benchmark with a listening adapter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.audio import write_wav
from cafe.runner import RunError
from cafe.runner.cli import run_command
from cafe.runner.main import run_with

register()


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    # item t3 claims "high" but its clip is a low tone: a listening model gets it wrong
    meta = write_tone_bench(tmp_path / "bench", [HIGH, LOW, HIGH, HIGH], dims=["a", "a", "b", "b"])
    t = np.arange(8000) / 16000
    write_wav(meta.parent / "t3.wav", 0.5 * np.sin(2 * np.pi * 220 * t))
    return meta


def test_run_writes_folder_and_hand_computed_metrics(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = run_with("tone", "tone", data=str(bench), out=out, progress=False, cache=False, seed=7)
    assert res.model_loaded and res.new_predictions == 4
    acc = res.metrics["accuracy"]
    assert acc["total"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert acc["breakdowns"]["dimension"]["a"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert acc["breakdowns"]["dimension"]["b"] == {"correct": 1, "total": 2, "acc": 50.0}
    assert acc["parse_rate"] == 100.0 and acc["failed"] == 0
    preds = {p["sample_id"]: p for p in _lines(out / "predictions.jsonl")}
    assert preds["t3"]["answer"] == LOW and preds["t3"]["correct"] is False
    assert preds["t0"]["answer"] == HIGH and preds["t0"]["correct"] is True
    assert preds["t0"]["sections"]["format_ok"] is True
    assert preds["t0"]["sections"]["perception_events"][0]["start"] == 0.0
    assert preds["t0"]["seed"] == 7 and preds["t0"]["prompt_style"] == "mpar2"
    assert preds["t0"]["reasoning_tokens"] > 10
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bench"]["sha256"] == "sha-meta.jsonl"
    assert manifest["prompt"]["style"] == "mpar2" and len(manifest["prompt"]["template_hash"]) == 64
    assert manifest["seeds"] == [7] and manifest["status"] == "complete"
    assert "numpy" in manifest["packages"]
    assert [s["id"] for s in _lines(out / "samples.jsonl")] == ["t0", "t1", "t2", "t3"]


def test_runs_have_distinct_recorded_seeds(bench: Path, tmp_path: Path) -> None:
    res = run_with("tone", "tone", data=str(bench), out=tmp_path / "r", runs=3, seed=5,
              progress=False, cache=False)  # fmt: skip
    preds = _lines(tmp_path / "r" / "predictions.jsonl")
    assert len(preds) == 12
    assert {(p["run_index"], p["seed"]) for p in preds} == {(0, 5), (1, 6), (2, 7)}
    assert res.manifest["seeds"] == [5, 6, 7]
    assert res.metrics["accuracy"]["runs"] == {
        "n": 3, "per_run": [75.0, 75.0, 75.0], "mean": 75.0, "std": 0.0
    }  # fmt: skip


def test_finished_run_rerun_loads_no_model(bench: Path, tmp_path: Path) -> None:
    log = tmp_path / "constructed.log"
    kw = dict(data=str(bench), out=tmp_path / "r", progress=False, cache=False,
              options={"construct_log": str(log)})  # fmt: skip
    first = run_with("tone", "tone", **kw)
    again = run_with("tone", "tone", **kw)
    assert log.read_text().count("constructed") == 1
    assert not again.model_loaded and again.new_predictions == 0
    assert again.metrics["accuracy"] == first.metrics["accuracy"]
    assert len(_lines(tmp_path / "r" / "predictions.jsonl")) == 4


def test_extending_runs_and_limit_only_runs_the_missing(bench: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    kw = dict(data=str(bench), out=tmp_path / "r", progress=False, cache=False,
              options={"log": str(log)})  # fmt: skip
    run_with("tone", "tone", limit=2, **kw)
    res = run_with("tone", "tone", runs=2, **kw)
    assert res.new_predictions == 6  # t2, t3 for run 0 and all four for run 1
    calls = [int(x) for x in log.read_text().split()]
    assert sum(calls) == 8 and max(calls) <= 2  # batch size 2 (adapter default)
    keys = [(p["sample_id"], p["run_index"]) for p in _lines(tmp_path / "r" / "predictions.jsonl")]
    assert len(keys) == len(set(keys)) == 8


def test_cache_hits_skip_the_model_and_failures_are_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH])
    rows = _lines(meta)
    rows[2]["id"] = "fail-me"  # ToneAdapter returns an error completion for it
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = np.arange(8000) / 16000  # a clip of its own, so no cache entry of another item fits it
    write_wav(meta.parent / "t2.wav", 0.3 * np.sin(2 * np.pi * 880 * t))
    log = tmp_path / "calls.log"
    first = run_with(
        "tone",
        "tone",
        data=str(meta),
        out=tmp_path / "r1",
        progress=False,
        options={"log": str(log)},
    )
    assert first.metrics["accuracy"]["failed"] == 1
    fail = [p for p in _lines(tmp_path / "r1" / "predictions.jsonl") if p["sample_id"] == "fail-me"]
    assert fail[0]["parse_status"] == "failed" and fail[0]["error"] == "backend exploded"
    n_first = sum(int(x) for x in log.read_text().split())
    assert n_first == 3
    # a new folder, same inputs: the two good answers come from the cache, the failure is retried
    second = run_with(
        "tone",
        "tone",
        data=str(meta),
        out=tmp_path / "r2",
        progress=False,
        options={"log": str(log)},
    )
    assert sum(int(x) for x in log.read_text().split()) == n_first + 1
    assert second.manifest["cache"] == {"hits": 2, "misses": 1}
    assert second.metrics["accuracy"]["total"] == first.metrics["accuracy"]["total"]
    # re-running the first folder retries only the model failure
    again = run_with(
        "tone",
        "tone",
        data=str(meta),
        out=tmp_path / "r1",
        progress=False,
        options={"log": str(log)},
    )
    assert again.new_predictions == 1 and again.model_loaded


def test_resume_refuses_a_folder_holding_another_run(bench: Path, tmp_path: Path) -> None:
    run_with("tone", "tone", data=str(bench), out=tmp_path / "r", progress=False, cache=False)
    with pytest.raises(RunError, match="prompt.style"):
        run_with("tone", "tone", data=str(bench), out=tmp_path / "r", progress=False, cache=False,
            prompt_style="larm")  # fmt: skip


def test_prompt_template_file_overrides_the_style(bench: Path, tmp_path: Path) -> None:
    tpl = tmp_path / "mine.txt"
    tpl.write_text("Q: {question}\nOptions:\n{choices}\n")
    res = run_with("tone", "tone", data=str(bench), out=tmp_path / "r", progress=False, cache=False,
              prompt_template=str(tpl))  # fmt: skip
    import hashlib

    assert res.manifest["prompt"]["template_hash"] == hashlib.sha256(tpl.read_bytes()).hexdigest()


def test_default_out_folder_is_stable(bench: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run_with("tone", "tone", data=str(bench), progress=False, cache=False, judge="none")
    assert res.run_dir == Path("runs") / "tone-tone-v1"
    assert (
        run_with("tone", "tone", data=str(bench), progress=False, cache=False).new_predictions == 0
    )


def test_cli_prints_summary_table(bench: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        run_command,
        ["--model", "tone", "--bench", "tone", "--data", str(bench), "--out",
         str(tmp_path / "r"), "--no-cache", "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "total" in result.output and "75.0" in result.output
    assert "dimension=b" in result.output and "parse rate 100.0%" in result.output


def test_unknown_model_says_did_you_mean(bench: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        run_command, ["--model", "tonee", "--bench", "tone", "--data", str(bench)]
    )
    assert result.exit_code != 0 and "did you mean tone" in result.output


def test_checkpoint_folder_picks_card_by_model_type(bench: Path, tmp_path: Path) -> None:
    cards = tmp_path / "cards.yaml"
    cards.write_text("tone-card:\n  adapter: tone\n  prompt_style: larm\n  group: LALM\n")
    ckpt = tmp_path / "my-ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "tone_model"}')
    (ckpt / "weights.bin").write_bytes(b"\0" * 100)
    res = run_with(str(ckpt), "tone", data=str(bench), out=tmp_path / "r", progress=False,
              cache=False, cards=[str(cards)])  # fmt: skip
    m = res.manifest
    assert m["model"]["name"] == "tone-card" and m["prompt"]["style"] == "larm"
    assert m["checkpoint"]["path"] == str(ckpt) and len(m["checkpoint"]["fingerprint"]) == 64
    (ckpt / "config.json").write_text('{"model_type": "tone_bare"}')  # names an adapter
    res = run_with(str(ckpt), "tone", data=str(bench), out=tmp_path / "r2", progress=False,
              cache=False, cards=[str(cards)])  # fmt: skip
    assert res.manifest["model"]["adapter"] == "tone"
    assert res.manifest["prompt"]["style"] == "mpar2"  # the adapter's own default
    (ckpt / "config.json").write_text('{"model_type": "nothing_known"}')
    with pytest.raises(RunError, match="field model_type"):
        run_with(str(ckpt), "tone", data=str(bench), progress=False, cards=[str(cards)])


def test_default_command_is_reference_on_synth(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(run_command, ["--version", "n10-seed0", "--quiet"])
    assert result.exit_code == 0, result.output
    run_dir = next((tmp_path / "runs").iterdir())
    assert run_dir.name.startswith("reference-synth-")
    preds = _lines(run_dir / "predictions.jsonl")
    assert len(preds) == 10 and all(p["sections"]["format_ok"] for p in preds)
    assert all(p["prompt_style"] == "mpar2" and p["parse_status"] == "ok" for p in preds)
    assert "parse rate 100.0%" in result.output and "dimension=" in result.output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["judge"]["name"] == "rule"  # synth is judged by the rule judge by default


def test_async_adapter_on_many_threads_gives_the_same_run(bench: Path, tmp_path: Path) -> None:
    from runner_helpers import ToneAdapter

    from cafe.adapters.base import ADAPTERS

    class AsyncTone(ToneAdapter):
        async def generate(self, requests):  # type: ignore[override]
            return ToneAdapter.generate(self, requests)

    if "async-tone" not in ADAPTERS.names():
        ADAPTERS.add("async-tone", AsyncTone)
    serial = run_with("tone", "tone", data=str(bench), out=tmp_path / "a", runs=2, batch_size=1,
                 concurrency=1, progress=False, cache=False)  # fmt: skip
    threaded = run_with("async-tone", "tone", data=str(bench), out=tmp_path / "b", runs=2,
                   batch_size=1, concurrency=4, progress=False, cache=False)  # fmt: skip
    assert threaded.metrics["accuracy"] == serial.metrics["accuracy"]
    # by hand: t3's clip is a low tone labelled high, so 3 of 4 right in each of the 2 runs
    assert threaded.metrics["accuracy"]["total"] == {"correct": 6, "total": 8, "acc": 75.0}
    assert threaded.metrics["accuracy"]["runs"]["per_run"] == [75.0, 75.0]
    keys = [(p["sample_id"], p["run_index"]) for p in _lines(tmp_path / "b" / "predictions.jsonl")]
    assert len(keys) == len(set(keys)) == 8


def test_summary_table_formats_hand_made_metrics() -> None:
    from cafe.reports.summary import summary_table

    cell = {"correct": 1, "total": 3, "acc": 33.33}
    metrics = {
        "accuracy": {
            "total": cell,
            "official_denominator": {"correct": 1, "total": 2, "acc": 50.0},
            "unanswered": 1,
            "failed": 0,
            "parse_rate": 66.67,
            "breakdowns": {"task": {"sound": cell}},
            "runs": {"n": 3, "per_run": [33.33] * 3, "mean": 33.33, "std": 0.0},
        },
        "cafe": {
            "acc_per": 77.505,
            "err_per": 1.0,
            "err_use": 0.5,
            "err_omit": 2.25,
            "mode": "micro",
        },
    }
    text = summary_table(metrics)
    assert "task=sound" in text and "33.33" in text
    assert "parse rate 66.67%   unanswered 1   failed 0   runs 3: mean 33.33 ± 0.0" in text
    assert "(answered only): 1/2 = 50.0" in text
    assert "CAFE acc_per 77.50  err_per 1.00  err_use 0.50  err_omit 2.25  (micro)" in text


def test_manifest_never_holds_a_secret(bench: Path, tmp_path: Path) -> None:
    res = run_with("tone", "tone", data=str(bench), out=tmp_path / "r", progress=False, cache=False,
              options={"api_key": "sk-very-secret"}, judge="none")  # fmt: skip
    text = (tmp_path / "r" / "manifest.json").read_text()
    assert "sk-very-secret" not in text and "api_key" not in text
    assert res.manifest["adapter_options"] == {}
