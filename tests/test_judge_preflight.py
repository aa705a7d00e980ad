"""No silent zeros: every judging command checks its key (and that a server is named) before the
first item and fails in one line naming the variable to set, writing nothing; a judge that
could not rate writes no score (absent, not 0.0)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cafe.cli import main


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY",
              "CAFE_ENDPOINT_API_KEY"):  # fmt: skip
        monkeypatch.delenv(k, raising=False)


def _rubric_run(root):
    from test_rubric import build_run

    return build_run(root).root, ["rubric"], ["--no-progress"]


def _cues_run(root):
    from test_cues import build_run

    args = ["--judge", "openai", "--judge-model", "gpt-4o", "--no-progress"]
    return build_run(root).root, ["cues"], args


def _judge_run(root):
    from test_judge_pipeline import build_run

    caps = root.parent / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": f"s{i}", "caption": "a dog barks"}) + "\n"
                            for i in range(4)))  # fmt: skip
    args = ["--judge", "openai", "--judge-model", "gpt-4o", "--captions", str(caps)]
    return build_run(root).root, ["judge"], [*args, "--no-progress"]


def _accuracy_run(root):
    from test_judged_accuracy import _run

    return _run(root).root, ["judge-accuracy"], ["--judge", "openai", "--judge-model", "gpt-5"]


@pytest.mark.parametrize("make", [_rubric_run, _cues_run, _judge_run, _accuracy_run])
def test_judge_commands_without_a_key_fail_in_one_line_and_write_nothing(make, tmp_path):
    run_dir, cmd, extra = make(tmp_path / "run")
    metrics = run_dir / "metrics.json"
    before = metrics.read_bytes() if metrics.exists() else None
    from cafe.locking import LOCK_NAME  # the writer lock (no data): taken before the check

    def names() -> list[str]:
        return sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_NAME)

    files = names()
    r = CliRunner().invoke(main, [*cmd, str(run_dir), *extra])
    assert r.exit_code == 1, r.output
    assert "OPENAI_API_KEY" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert (metrics.read_bytes() if metrics.exists() else None) == before
    assert names() == files  # no record file, no section


def test_caption_without_a_key_fails_in_one_line(tmp_path):
    out = tmp_path / "caps.jsonl"
    r = CliRunner().invoke(main, ["caption", "--bench", "synth", "--version", "n4-seed0",
                                  "--captioner", "openai", "--model", "gpt-4o-audio-preview",
                                  "--out", str(out)])  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "OPENAI_API_KEY" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not out.exists() or out.read_text() == ""


def test_rubric_whose_judge_calls_all_failed_writes_no_score_and_exits_1(tmp_path):
    from test_rubric import build_run, scripted

    from cafe.testing.loopback import OpenAILoopback

    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted(), faults=lambda i, body: "500") as srv:
        r = CliRunner().invoke(main, [
            "rubric", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
            "--judge-endpoint", srv.url, "--no-progress", "--cache", str(tmp_path / "j.sqlite"),
        ])  # fmt: skip
    # a judge answering 500 to everything is a dead server (issue 30): the breaker stops the
    # command, naming it; no score is written (never 0.00 for calls that all failed)
    assert r.exit_code == 1 and "no good reply from" in r.output, r.output
    assert "(set by --judge-endpoint)" in r.output and "score=0.00" not in r.output
    metrics = store.path("metrics.json")
    section = json.loads(metrics.read_text()).get("rubric") if metrics.exists() else None
    assert section is None or section["score"] is None


def test_judge_accuracy_whose_calls_failed_writes_no_figure(tmp_path):
    from test_judged_accuracy import _run

    from cafe.clients import make_client
    from cafe.errors import CafeError
    from cafe.steps.judged import judge_accuracy_run
    from cafe.testing.loopback import OpenAILoopback

    store = _run(tmp_path / "run")
    with OpenAILoopback(faults=lambda i, body: "500") as srv:
        client = make_client("openai-compatible", "j", [srv.url], max_attempts=1)
        with pytest.raises(CafeError, match=r"5 of 5 answer-judge calls failed.*HTTP 500"):
            judge_accuracy_run(store.root, "openai-compatible", "j", client=client,
                               cache=tmp_path / "j.sqlite")  # fmt: skip
    assert "judged_accuracy" not in json.loads(store.path("metrics.json").read_text())
