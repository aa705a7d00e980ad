"""run(request) (issue 34): the runner takes one frozen RunRequest; `cafe run` builds it from its
flags, cafe.api.run's keywords are its fields, and both reach the same run identity."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe import api
from cafe.runner import main
from cafe.runner.cli import run_command
from cafe.runner.plan import plan_run
from cafe.runner.spec import RunRequest

register()

#: run()'s 26 keywords on d0a70f8 and their defaults: each is a RunRequest field, same default
OLD_RUN_KEYWORDS = {
    "model": "reference", "bench": "synth", "checkpoint": None, "data": None, "version": None,
    "runs": 1, "limit": None, "batch_size": None, "concurrency": None, "seed": 0, "out": None,
    "prompt_style": None, "prompt_template": None, "max_new_tokens": None, "judge": None,
    "judge_options": None, "strict": False, "progress": True, "cache": True, "cards": None,
    "options": None, "audio_root": None, "retry_failed": False, "control": None,
    "control_seed": 0, "control_of": None,
}  # fmt: skip
#: added since (issue 37: caption-only controls, choice orderings, --ids), each off by default
NEW_RUN_KEYWORDS = {"control_captions": None, "permutation": None, "ids": None}


def test_run_and_plan_take_the_request() -> None:
    for fn in (main.run, plan_run):
        params = inspect.signature(fn).parameters
        assert list(params) == ["request"], fn.__name__
        assert params["request"].annotation in ("RunRequest", RunRequest)


def test_every_old_run_keyword_is_a_request_field_with_its_default() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(RunRequest)}
    assert set(fields) == set(OLD_RUN_KEYWORDS) | set(NEW_RUN_KEYWORDS)
    assert fields == {**OLD_RUN_KEYWORDS, **NEW_RUN_KEYWORDS}
    assert set(RunRequest.SPEC_INPUTS) | set(RunRequest.EXECUTION) <= set(fields)


def test_an_unknown_api_keyword_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="no_such_option"):
        api.run("reference", "synth", no_such_option=1)


def test_every_run_flag_reaches_the_request(tmp_path: Path, monkeypatch) -> None:
    """Every flag given a value other than its default: the request run() gets is this one."""
    got: list[RunRequest] = []

    class Stop(Exception):
        pass

    def capture(request: RunRequest):
        got.append(request)
        raise Stop

    monkeypatch.setattr(main, "run", capture)
    template = tmp_path / "t.txt"
    template.write_text("{question}\n{choices}\n")
    captions = tmp_path / "captions.jsonl"
    captions.write_text("")
    (tmp_path / "audio").mkdir()
    args = [
        "--model", "reference", "--checkpoint", "ckpt", "-o", "letters=true",
        "--endpoint", "http://127.0.0.1:9", "--bench", "tone", "--data", "meta.json",
        "--version", "v9", "--runs", "3", "--limit", "5", "--batch-size", "2",
        "--concurrency", "4", "--seed", "7", "--out", str(tmp_path / "o"),
        "--prompt-style", "plain", "--prompt-template", str(template), "--max-new-tokens", "9",
        "--judge", "rule", "--judge-model", "jm", "--judge-endpoint", "http://127.0.0.1:8",
        "--judge-concurrency", "3", "--audio-root", str(tmp_path / "audio"), "--retry-failed",
        "--captions", str(captions), "--strict", "--no-cache", "--no-progress",
    ]  # fmt: skip
    res = CliRunner().invoke(run_command, args)
    assert isinstance(res.exception, Stop), res.output
    assert got == [
        RunRequest(
            model="reference", bench="tone", checkpoint="ckpt", data="meta.json", version="v9",
            runs=3, limit=5, seed=7, prompt_style="plain", prompt_template=str(template),
            max_new_tokens=9, options={"letters": True, "endpoints": ["http://127.0.0.1:9"]},
            cards=[], audio_root=str(tmp_path / "audio"), out=str(tmp_path / "o"),
            batch_size=2, concurrency=4, cache=False, strict=True, progress=False,
            retry_failed=True, judge="rule",
            judge_options={"judge_model": "jm", "endpoints": ("http://127.0.0.1:8",),
                           "concurrency": 3, "captions": str(captions)},
        )
    ]  # fmt: skip


def test_api_and_cli_runs_share_one_identity(tmp_path: Path) -> None:
    """A folder the API made is the CLI's same run: resumed with nothing to do."""
    bench = write_tone_bench(tmp_path / "bench", [HIGH, LOW, HIGH])
    out = tmp_path / "r"
    first = api.run("tone", "tone", data=str(bench), out=out, progress=False, cache=False,
                    judge="none", seed=3, options={"letters": True})  # fmt: skip
    assert first.new_predictions == 3 and first.model_loaded
    res = CliRunner().invoke(run_command, [
        "--model", "tone", "--bench", "tone", "--data", str(bench), "--out", str(out),
        "--seed", "3", "-o", "letters=true", "--judge", "none", "--no-cache", "--no-progress",
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "0 new predictions (nothing left to run, no model loaded)" in res.output
