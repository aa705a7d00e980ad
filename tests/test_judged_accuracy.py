"""Judged accuracy (the paper's † figures): a loopback answer-extraction judge names the option
each output chose; the figure is written beside the official headline, labelled with its judge,
and tables print it in the † rows' place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.judge.answer import read_verdict
from cafe.records import Prediction, Sample
from cafe.steps.cli import judge_accuracy_command
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

CHOICES = ["dog barking", "cat meowing", "bird song"]
# sample id -> (model output, judge reply, judged choice right?)
CASES = {
    "s1": ("It is (A), the dog.", "A", True),
    "s2": ("Probably the cat, so B.", "<think>The model says B, maybe A…</think>B", False),
    "s3": ("I cannot tell.", "NONE", False),
    "s4": ("bird, i.e. C", "(C) bird song", False),
    "s5": ("dog", "no idea", False),  # unparseable, after the reminder too
}


def _run(root: Path) -> RunStore:
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "Tiny", "group": "LALM"}, "runs": 1,
                          "bench": {"name": "mmar", "version": "v1"}})  # fmt: skip
    samples = [Sample(k, "mmar", "v1", f"Which source [{k}]?", CHOICES, "dog barking", [],
                      meta={"modality": "sound" if k in ("s1", "s2") else "speech"})
               for k in CASES]  # fmt: skip
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    with store.writer("predictions.jsonl") as w:
        w.write_many(Prediction(k, 0, "Tiny", "lalm", "h", out, answer_text=out)
                     for k, (out, _, _) in CASES.items())  # fmt: skip
    # the official headline as the runner would have written it (all five wrong: prose answers)
    store.update_metrics("accuracy", {"total": {"correct": 0, "total": 5, "acc": 0.0},
                                      "breakdowns": {}})  # fmt: skip
    return store


def _judge(run: Path, url: str, tmp_path: Path, model: str = "j"):
    """`judge-accuracy` on ``run`` with the loopback judge at ``url`` (its cache in tmp_path)."""
    return CliRunner().invoke(judge_accuracy_command, [
        str(run), "--judge", "openai-compatible", "--judge-model", model,
        "--judge-endpoint", url, "--cache", str(tmp_path / "c.sqlite")])  # fmt: skip


def test_read_verdict():
    assert read_verdict("<think>A or B</think> B", CHOICES) == ("cat meowing", "ok")
    assert read_verdict("none.", CHOICES) == (None, "none")
    assert read_verdict("<think>only thinking", CHOICES) == (None, "unparseable")


def test_judge_accuracy_end_to_end_and_in_the_tables(tmp_path):
    store = _run(tmp_path / "run")

    def reply(body):
        prompt = body["messages"][0]["content"]
        assert "(A) dog barking\n(B) cat meowing\n(C) bird song" in prompt
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        key = next(k for k in CASES if f"[{k}]" in prompt)
        return CASES[key][1]

    with OpenAILoopback(reply=reply) as srv:
        res = _judge(store.root, srv.url, tmp_path, "gpt-5")
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 6  # s5 asked twice (the retry adds a reminder)
    sec = json.loads(store.path("metrics.json").read_text())["judged_accuracy"]
    # by hand: only s1's named option (A = dog barking) is the answer -> 1 of 5
    assert sec["total"] == {"correct": 1, "total": 5, "acc": 20.0}
    assert sec["verdicts"] == {"ok": 3, "none": 1, "unparseable": 1, "failed": 0}
    assert sec["judge"]["judge"] == "openai-compatible:gpt-5" and "†" in sec["label"]
    assert sec["breakdowns"]["modality"]["sound"]["acc"] == 50.0

    from cafe.reports.leaderboard import load_leaderboard, row_from_run
    from cafe.reports.tables import render_table

    row = row_from_run(store.root)
    assert row.metrics["acc"] == 20.0 and row.markers == ["†"]
    board = load_leaderboard(str(Path(__file__).resolve().parents[1] / "leaderboard.yaml"))
    text = render_table(2, board, "md", extra=[row])
    assert "| Tiny † |" in text
    assert "accuracy judged by openai-compatible:gpt-5 (official rule: 0.00)" in text


@pytest.mark.parametrize("reply", ["", "<think>thinking only"])
def test_mostly_unusable_verdicts_warn(tmp_path, reply):
    store = _run(tmp_path / "run")
    with OpenAILoopback(reply=lambda body: "A" if "[s1]" in str(body) else reply) as srv:
        res = _judge(store.root, srv.url, tmp_path)
    assert res.exit_code == 0, res.output
    assert "warning: 4 of 5 answer-judge replies unusable" in res.output
    sec = json.loads(store.path("metrics.json").read_text())["judged_accuracy"]
    assert sec["outcome"] == {"status": "partial", "total": 5, "usable": 1,
                             "reason": "4 of 5 answer-judge replies unusable"}  # fmt: skip


@pytest.mark.parametrize("reply", ["", "<think>thinking only"])
def test_every_reply_unusable_exits_non_zero_and_writes_no_section(tmp_path, reply):
    store = _run(tmp_path / "run")
    with OpenAILoopback(reply=lambda body: reply) as srv:
        res = _judge(store.root, srv.url, tmp_path)
    assert res.exit_code == 1, res.output
    assert res.output.strip().splitlines()[-1] == (
        f"Error: cafe judge-accuracy on {store.root} produced nothing usable: all 5 "
        "answer-judge replies unusable; its section was not written"
    )
    assert "judged_accuracy" not in json.loads(store.path("metrics.json").read_text())


def test_no_item_with_an_answer_is_no_figure(tmp_path):
    """0 of 0 is absent (acc None), printed so, never 0.00 nor a formatting crash."""
    store = RunStore(tmp_path / "run").create()
    store.write_manifest({"model": {"name": "Tiny", "group": "LALM"}, "runs": 1,
                          "bench": {"name": "mmar", "version": "v1"}})  # fmt: skip
    sample = Sample("s1", "mmar", "v1", "Which source [s1]?", CHOICES, None, [])
    store.path("samples.jsonl").write_text(sample.to_json() + "\n")
    with store.writer("predictions.jsonl") as w:
        w.write_many([Prediction("s1", 0, "Tiny", "lalm", "h", "dog", answer_text="dog")])
    with OpenAILoopback(reply=lambda body: "A") as srv:
        res = _judge(store.root, srv.url, tmp_path)
    assert res.exit_code == 0, res.output
    assert "total absent (no item with an answer) (0/0)" in res.output
    sec = json.loads(store.path("metrics.json").read_text())["judged_accuracy"]
    assert sec["total"] == {"correct": 0, "total": 0, "acc": None}


def test_cache_keys_are_those_of_earlier_releases(tmp_path):
    """A cache filled before judge-accuracy ran on the step engine still hits: the keys of the
    six calls (s5 asked twice) are pinned as the code before the move made them."""
    import sqlite3

    from cafe.steps.judged import judge_accuracy_run

    store = _run(tmp_path / "run")
    replies = {k: r for k, (_, r, _) in CASES.items()}
    with OpenAILoopback(reply=lambda b: next(r for k, r in replies.items()
                                             if f"[{k}]" in str(b))) as srv:  # fmt: skip
        judge_accuracy_run(store.root, "openai-compatible", "gpt-5", [srv.url],
                           cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 6
        with sqlite3.connect(tmp_path / "c.sqlite") as db:
            keys = sorted(k[:16] for (k,) in db.execute("SELECT key FROM calls"))
        assert keys == PINNED_KEYS
        # a second invocation is all cache hits: no request, the same figure
        sec = judge_accuracy_run(store.root, "openai-compatible", "gpt-5", [srv.url],
                                 cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 6 and sec["calls"]["cache_hits"] == 6
        assert sec["total"] == {"correct": 1, "total": 5, "acc": 20.0}


# made by the code before the move (main at the merge, cache schema 2 of issue 30)
PINNED_KEYS = ["2293b9e858669380", "4ce8ea23e4c8c3d5", "51b02f8a241459dd", "77472e3c63384e1f",
               "7de092703c8e2b22", "e647c6698ff769a1"]  # fmt: skip
