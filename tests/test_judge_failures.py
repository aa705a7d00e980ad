"""A judge that fails is loud and destroys nothing: reasons with counts, exit 1, the run's
earlier judgements.jsonl and CAFE metrics left as they were, no server the user did not name,
and `leaderboard add` refuses CAFE numbers from a judge that mostly failed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_judge_pipeline import VOCAB, build_run

from cafe.cli import main
from cafe.clients.breaker import ServerUnreachable
from cafe.steps.cafe_judge import judge_run
from cafe.testing.loopback import OpenAILoopback


@pytest.fixture(autouse=True)
def fixed_vocabulary(monkeypatch, tmp_path):
    monkeypatch.setattr("cafe.judge.rule.default_vocabulary", lambda: dict(VOCAB))
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    for k in ("OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "CAFE_ENDPOINT_API_KEY"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def judged(tmp_path):
    """A run judged by the rule judge, with a captions file for LLM judges."""
    store = build_run(tmp_path / "run")
    r = CliRunner().invoke(main, ["judge", str(store.root), "--judge", "rule", "--no-progress"])
    assert r.exit_code == 0, r.output
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": f"s{i}", "caption": "a dog barks"}) + "\n"
                            for i in range(4)))  # fmt: skip
    before = {n: store.path(n).read_bytes() for n in ("metrics.json", "judgements.jsonl")}
    return store, caps, before


def _unchanged(store, before):
    return all(store.path(n).read_bytes() == b for n, b in before.items())


def test_refused_judge_exits_1_with_counted_reasons_and_keeps_the_good_results(judged):
    store, caps, before = judged
    with OpenAILoopback(require_key="the-right-key") as srv:
        r = CliRunner().invoke(
            main,
            ["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
             "--judge-endpoint", srv.url, "--captions", str(caps), "--no-progress"],
        )  # fmt: skip
    assert r.exit_code == 1
    # 5 predictions: 4 refused by the server (one reason), 1 whose prediction had failed
    assert "5 of 5 judgements failed (2 distinct reason(s)):" in r.output
    assert "4 x " in r.output and "CAFE_ENDPOINT_API_KEY is not set" in r.output
    assert "left as they were" in r.output and "Traceback" not in r.output
    assert _unchanged(store, before)
    assert json.loads(store.path("metrics.json").read_text())["cafe"]["judge"]["judge"] == "rule-v2"


def test_judge_with_a_dead_server_fails_without_replacing_anything(judged):
    # issue 21: a server that never answers stops the judge at once (its circuit breaker),
    # named with its option, instead of failing every item after its retries
    store, caps, before = judged
    with pytest.raises(ServerUnreachable, match=r"no reply from http://127.0.0.1:9/v1") as e:
        judge_run(store.root, judge="openai-compatible", judge_model="j",
                  endpoints=["http://127.0.0.1:9/v1"], captions=caps, progress=False,
                  max_attempts=2, base_delay=0.01, max_delay=0.02)  # fmt: skip
    assert "ConnectError" in str(e.value) and "--judge-endpoint" in str(e.value)
    assert _unchanged(store, before)


@pytest.mark.parametrize(
    "args,says",
    [
        (["--judge", "openai-compatible", "--judge-model", "j"], "--judge-endpoint"),  # no default
        (["--judge", "gemini", "--judge-model", "gemini-3-pro"], "GEMINI_API_KEY"),
    ],
)
def test_a_judge_without_server_or_key_is_one_line(judged, args, says):
    store, caps, before = judged
    r = CliRunner().invoke(
        main, ["judge", str(store.root), *args, "--captions", str(caps), "--no-progress"]
    )
    assert r.exit_code == 1 and says in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert _unchanged(store, before)


def test_inline_judge_without_endpoint_calls_nothing_and_exits_1(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("socket.socket.connect", lambda *a, **k: calls.append(a))
    r = CliRunner().invoke(
        main,
        ["run", "--bench", "synth", "--version", "n4-seed0", "--out", str(tmp_path / "r"),
         "--quiet", "--judge", "openai-compatible", "--judge-model", "j"],
    )  # fmt: skip
    assert r.exit_code == 1 and calls == []
    assert "judge openai-compatible not run" in r.output and "--judge-endpoint" in r.output
    assert "acc_per None" not in r.output
    assert "cafe" not in json.loads((tmp_path / "r" / "metrics.json").read_text())


def test_rule_judge_on_a_benchmark_without_events_is_one_line(tmp_path):
    from cafe.records import Prediction, Sample
    from cafe.store import RunStore

    store = RunStore(tmp_path / "run").create()
    store.write_manifest({"model": {"name": "m"}, "bench": {"name": "mmar"}})
    store.path("samples.jsonl").write_text(
        Sample("a", "mmar", "v2", "q", ["x", "y"], "x", []).to_json() + "\n"
    )
    with store.writer("predictions.jsonl") as w:
        w.write_many([Prediction("a", 0, "m", "lalm", "h", "x")])
    r = CliRunner().invoke(main, ["judge", str(store.root), "--judge", "rule", "--no-progress"])
    assert r.exit_code == 1 and "needs ground-truth events" in r.output
    assert not store.path("metrics.json").exists()


def test_leaderboard_refuses_cafe_numbers_from_a_mostly_failed_judge(judged, tmp_path):
    store, _, _ = judged
    metrics = json.loads(store.path("metrics.json").read_text())
    metrics["cafe"]["judgements"] = {"ok": 1, "invalid": 0, "failed": 4, "total": 5}
    store.path("metrics.json").write_text(json.dumps(metrics))
    store.write_manifest({"model": {"name": "m", "group": "Open-source"},
                          "bench": {"name": "synth", "version": "1"}})  # fmt: skip
    board = tmp_path / "lb.yaml"
    r = CliRunner().invoke(
        main, ["leaderboard", "add", str(store.root), "--leaderboard", str(board)]
    )
    assert r.exit_code == 1 and "4 of 5 CAFE judgements failed" in r.output
    assert not board.exists()


def test_a_judge_whose_every_reply_is_unusable_exits_1_and_keeps_the_good_results(judged):
    """4 of 4 judgeable outputs get a reply that is no judgement (the fifth prediction had
    failed): nothing usable, so exit 1 with the reason and the rule judge's results kept."""
    store, caps, before = judged
    with OpenAILoopback(reply=lambda body: "I would rather not say.") as srv:
        r = CliRunner().invoke(
            main,
            ["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
             "--judge-endpoint", srv.url, "--captions", str(caps), "--no-progress"],
        )  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "judge openai-compatible:j produced nothing usable: none of 4 judgements" in r.output
    assert "Traceback" not in r.output
    assert _unchanged(store, before)
