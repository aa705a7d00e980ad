"""`cafe judge` against a loopback OpenAI-compatible judge that replies with scripted JSON per
sample: the metrics equal hand counting of those replies, invalid and failed items are counted,
and re-judging makes no HTTP call."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cafe.records import Prediction, Sample
from cafe.steps.cli import judge_command
from cafe.store import RunStore
from cafe.testing.loopback import Fault, OpenAILoopback


def lists(mat=(), hal=(), mis=(), neu=(), miss=()) -> dict:
    return {
        "required_events": [*mat, *miss],
        "all_caption_events": [*mat, *mis, *neu, *miss],
        "all_reasoning_events": [*mat, *hal, *mis, *neu],
        "matched_events": list(mat),
        "error_matched": list(hal),
        "error_use": list(mis),
        "neutral_events": list(neu),
        "missed_events": list(miss),
    }


# per sample: the judge's successive replies (the last one repeats)
SCRIPT = {
    # plain JSON: mat 2, hal 1, neu 1, miss 1
    "q-a": [json.dumps(lists(["dog", "cat"], ["horn"], [], ["rain"], ["bell"]))],
    # fenced with chatter around it: hal 1, mis 1, miss 2
    "q-b": [
        "Sure!\n```json\n"
        + json.dumps(lists([], ["gun"], ["wind"], [], ["bird", "car"]))
        + "\n```\nLet me know."
    ],  # fmt: skip
    # first partial (missing keys), then valid on the retry: mat 1, mis 1
    "q-c": [json.dumps({"matched_events": ["x"]}), json.dumps(lists(["x"], [], ["y"]))],
    # refuses every time: invalid after 3 attempts
    "q-d": ["I cannot help with that."],
}


def scripted():
    seen: dict[str, int] = {}

    def reply(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        assert isinstance(prompt, str) and body["temperature"] == 0
        key = next(k for k in SCRIPT if f"[{k}]" in prompt)
        n = seen.get(key, 0)
        seen[key] = n + 1
        return SCRIPT[key][min(n, len(SCRIPT[key]) - 1)]

    return reply


def build_run(root):
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}})
    samples = [
        Sample(k, "mmar", "1", f"Question [{k}]?", ["yes", "no"], "yes", [], caption=f"Cap {k}.",
               meta={"modality": "sound" if k in ("q-a", "q-b") else "speech"})
        for k in SCRIPT
    ]  # fmt: skip
    store.write_samples(samples)
    preds = [Prediction(s.id, 0, "m", "lalm", "h", f"yes. Reasoning: {s.id}", correct=True,
                        reasoning_tokens=5) for s in samples]  # fmt: skip
    preds.append(Prediction("q-a", 1, "m", "lalm", "h", None, error="model timed out"))
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    return store


def judge_args(store, url, cache):
    return [str(store.root), "--judge", "openai-compatible", "--judge-model", "judge-m",
            "--judge-endpoint", url, "--cache", str(cache), "--no-progress",
            "--judge-concurrency", "4"]  # fmt: skip


def test_llm_judge_metrics_equal_hand_counts_and_rejudge_is_free(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "judge.sqlite"
    with OpenAILoopback(reply=scripted()) as srv:
        res = CliRunner().invoke(judge_command, judge_args(store, srv.url, cache))
        assert res.exit_code == 0, res.output
        # q-a 1, q-b 1, q-c 2 (partial then valid), q-d 3 (refusals); the failed prediction 0
        assert len(srv.requests) == 7
        cafe = json.loads(store.path("metrics.json").read_text())["cafe"]
        # ok: q-a, q-b, q-c -> mat 3, hal 2, mis 2, neu 1, miss 3; N_pred 8, N_tgt 6
        assert cafe["acc_per"] == pytest.approx(100 * 3 / 8)
        assert cafe["err_per"] == pytest.approx(100 * 2 / 8)
        assert cafe["err_use"] == pytest.approx(100 * 2 / 8)
        assert cafe["err_omit"] == pytest.approx(100 * 3 / 6)
        assert cafe["judgements"] == {"ok": 3, "invalid": 1, "failed": 1, "total": 5}
        assert cafe["breakdowns"]["modality"]["speech"]["acc_per"] == 50.0  # q-c: 1 of 2
        assert cafe["judge"] == {"judge": "openai-compatible:judge-m", "temperature": 0.0,
                                 "template_hash": cafe["template_hash"], "retries": 2,
                                 "max_tokens": 2048, "thinking": False}  # fmt: skip
        all_rows = [json.loads(x) for x in store.path("judgements.jsonl").open()]
        rows = {j["sample_id"]: j for j in all_rows if j["run_index"] == 0}
        failed = [j for j in all_rows if j["status"] == "failed"]
        assert [(j["sample_id"], j["run_index"]) for j in failed] == [("q-a", 1)]
        assert failed[0]["reason"] == "prediction failed: model timed out"
        assert rows["q-d"]["status"] == "invalid" and "no JSON object" in rows["q-d"]["reason"]
        assert rows["q-d"]["raw_reply"].count("I cannot help") == 3  # every raw reply kept
        assert rows["q-b"]["raw_reply"].startswith("Sure!")
        assert rows["q-c"]["raw_reply"].count("matched_events") == 2  # partial, then valid
        assert rows["q-c"]["reason"] == "valid on attempt 2"

        # re-judge: nothing left to do; then from scratch: every reply comes from the cache
        assert CliRunner().invoke(judge_command, judge_args(store, srv.url, cache)).exit_code == 0
        for p in store.root.glob("judgements*.jsonl"):
            p.unlink()
        res = CliRunner().invoke(judge_command, judge_args(store, srv.url, cache))
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 7
        again = json.loads(store.path("metrics.json").read_text())["cafe"]
        assert again["acc_per"] == cafe["acc_per"] and again["judgements"] == cafe["judgements"]
        assert again["calls"]["sent"] == 0


def test_failed_calls_are_reported_and_retried_on_the_next_run(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "judge.sqlite"
    args = judge_args(store, "", cache)
    with OpenAILoopback(reply=scripted(), faults=lambda i, body: Fault("500")) as srv:
        args[args.index("--judge-endpoint") + 1] = srv.url
        from cafe.judge.pipeline import JudgeFailedError
        from cafe.steps.cafe_judge import judge_run

        # every call fails: reported with its reason, and no CAFE section is written from it
        with pytest.raises(JudgeFailedError, match=r"5 of 5 judgements failed") as e:
            judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                      progress=False, cache=cache, max_attempts=1)  # fmt: skip
        assert "4 x " in str(e.value) and "HTTP 500" in str(e.value)
        assert "cafe" not in store.read_metrics()
        own = store.path("judgements.openai-compatible-judge-m.jsonl").read_text().splitlines()
        assert [json.loads(x)["status"] for x in own] == ["failed"] * 5
    with OpenAILoopback(reply=scripted()) as srv:
        args[args.index("--judge-endpoint") + 1] = srv.url
        res = CliRunner().invoke(judge_command, args)
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 7  # the failed ones were not cached: judged again
    cafe = json.loads(store.path("metrics.json").read_text())["cafe"]
    assert cafe["judgements"]["ok"] == 3


def test_gemini_judge_speaks_generate_content(tmp_path, monkeypatch):
    from cafe.steps.cafe_judge import judge_run
    from cafe.testing.loopback import GeminiLoopback

    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "test-key")
    store = build_run(tmp_path / "run")
    reply_for = scripted()

    def reply(body):
        text = "".join(p.get("text", "") for p in body["contents"][0]["parts"])
        assert body["_model"] == "gemini-3-pro"
        return reply_for({"messages": [{"content": text}], "temperature": 0})

    with GeminiLoopback(reply=reply) as srv:
        sec = judge_run(store.root, "gemini", "gemini-3-pro", [srv.url], 4, progress=False,
                        cache=tmp_path / "c.sqlite")  # fmt: skip
    assert sec["judgements"] == {"ok": 3, "invalid": 1, "failed": 1, "total": 5}
    assert sec["acc_per"] == pytest.approx(100 * 3 / 8)
    assert sec["judge"]["judge"] == "gemini:gemini-3-pro"
    assert store.path("judgements.gemini-gemini-3-pro.jsonl").exists()


def test_two_endpoints_share_the_load_and_a_killed_run_resumes(tmp_path):
    from cafe.steps.cafe_judge import judge_run

    store = build_run(tmp_path / "run")
    shared = scripted()  # one script across both servers: a retry may land on either
    with (
        OpenAILoopback(reply=shared, latency_s=0.05) as a,
        OpenAILoopback(reply=shared, latency_s=0.05) as b,
    ):
        sec = judge_run(store.root, "openai-compatible", "judge-m", [a.url, b.url], 4,
                        progress=False, cache=tmp_path / "c1.sqlite")  # fmt: skip
        assert len(a.requests) > 0 and len(b.requests) > 0
        assert len(a.requests) + len(b.requests) == 7
    assert sec["judgements"]["ok"] == 3

    # a kill after two judgements were written (plus a torn third); fresh cache, so every
    # call the resume makes is visible: only the items not yet judged are asked
    path = store.path("judgements.openai-compatible-judge-m.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    kept = [x for x in lines if json.loads(x)["sample_id"] in ("q-a", "q-b")]
    kept = [x for x in kept if json.loads(x)["status"] == "ok"]
    path.write_text("".join(kept) + lines[-1][:20])
    with OpenAILoopback(reply=scripted()) as srv:
        sec = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                        progress=False, cache=tmp_path / "c2.sqlite")  # fmt: skip
        prompts = [r["messages"][0]["content"] for r in srv.requests]
    assert not any("[q-a]" in p or "[q-b]" in p for p in prompts)
    assert len(prompts) == 5  # q-c twice, q-d three times
    assert sec["judgements"] == {"ok": 3, "invalid": 1, "failed": 1, "total": 5}
    assert sec["acc_per"] == pytest.approx(100 * 3 / 8)


def test_old_option_spellings_still_judge(tmp_path):
    """`cafe judge --endpoint/--concurrency` (before the judge server options were renamed)
    still work and say once what to use instead."""
    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted()) as srv:
        args = [str(store.root), "--judge", "openai-compatible", "--judge-model", "judge-m",
                "--endpoint", srv.url, "--cache", str(tmp_path / "c.sqlite"), "--no-progress",
                "--concurrency", "4"]  # fmt: skip
        res = CliRunner().invoke(judge_command, args)
    assert res.exit_code == 0, res.output
    assert len(srv.requests) == 7  # the same calls as with the new spellings
    assert res.output.count("note: --endpoint is deprecated, use --judge-endpoint\n") == 1
    assert res.output.count("note: --concurrency is deprecated, use --judge-concurrency\n") == 1
    cafe = json.loads(store.path("metrics.json").read_text())["cafe"]
    assert cafe["judgements"] == {"ok": 3, "invalid": 1, "failed": 1, "total": 5}


def test_judge_json_is_one_document_on_stdout_when_calls_were_paid(tmp_path):
    """`cafe judge --json | jq`: the cost lines that follow a judging that sent calls go to
    stderr beside --json (they followed the JSON on stdout, which no parser then read)."""
    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted()) as srv:
        res = CliRunner().invoke(
            judge_command, [*judge_args(store, srv.url, tmp_path / "c.sqlite"), "--json"]
        )
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 7  # calls were sent, so there is a cost to report
    section = json.loads(res.stdout)  # the whole of stdout is the section
    assert section["judgements"]["ok"] == 3
    assert "judge cost this run" in res.stderr and "judge cost" not in res.stdout
