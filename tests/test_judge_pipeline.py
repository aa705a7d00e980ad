"""`cafe judge` end to end with the rule judge on a run folder built with RunStore: metrics by
hand, resumable writes (no duplicates, torn line), decay section, agreement command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cafe.judge.cli import agreement_command
from cafe.records import Event, Prediction, Sample
from cafe.steps.cli import judge_command
from cafe.store import RunStore

VOCAB = {"dog_bark": ["dog barks", "bark"], "bell": ["church bell"], "rain": ["rainfall"]}


def build_run(root, n=4):
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}, "bench": {"name": "synth"}})
    samples, preds = [], []
    for i in range(n):
        ev = [Event(0, 1, "dog_bark", required=True), Event(1, 2, "rain")]
        samples.append(Sample(f"s{i}", "synth", "1", "q", ["a", "b"], "a", [], events=ev,
                              meta={"dimension": "counting" if i % 2 else "timbre"}))  # fmt: skip
        # even items hear the dog (matched) and lean on the rain (misused);
        # odd items hear a bell that is not there (hallucinated) and miss the dog
        text = ("A dog barks, and the rainfall means it is outdoors, so a." if i % 2 == 0
                else "A church bell rings.")  # fmt: skip
        preds.append(Prediction(f"s{i}", 0, "m", "lalm", "h", text, correct=i % 2 == 0,
                                reasoning_tokens=10 + i))  # fmt: skip
    preds.append(Prediction("s0", 1, "m", "lalm", "h", None, error="timeout"))
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    return store


@pytest.fixture(autouse=True)
def fixed_vocabulary(monkeypatch):
    monkeypatch.setattr("cafe.judge.rule.default_vocabulary", lambda: dict(VOCAB))


def test_rule_judge_end_to_end_and_resume(tmp_path):
    store = build_run(tmp_path / "run")
    cli = CliRunner()
    res = cli.invoke(judge_command, [str(store.root), "--judge", "rule", "--no-progress",
                                     "--cache", str(tmp_path / "c.sqlite")])  # fmt: skip
    assert res.exit_code == 0, res.output
    m = json.loads(store.path("metrics.json").read_text())
    cafe = m["cafe"]
    # evens (s0, s2): mat 1, misuse 1; odds (s1, s3): hal 1, miss 1 -> N_pred 6, N_tgt 4
    assert cafe["mode"] == "micro"
    assert cafe["acc_per"] == pytest.approx(100 * 2 / 6)
    assert cafe["err_per"] == pytest.approx(100 * 2 / 6)
    assert cafe["err_use"] == pytest.approx(100 * 2 / 6)
    assert cafe["err_omit"] == pytest.approx(100 * 2 / 4)
    assert cafe["judgements"] == {"ok": 4, "invalid": 0, "failed": 1, "total": 5}
    assert cafe["judge"]["judge"] == "rule-v2" and len(cafe["template_hash"]) == 64
    assert cafe["breakdowns"]["dimension"]["timbre"]["acc_per"] == 50.0
    assert cafe["runs"]["n"] == 2
    assert m["decay"]["n"] == 4 and "pearson" in m["decay"]
    assert "Acc_per" in res.output

    # torn tail from a kill, then resume: nothing duplicated, failed item retried
    path = store.path("judgements.rule-v2.jsonl")
    with path.open("a") as f:
        f.write('{"sample_id": "s9", "run_')
    res = cli.invoke(judge_command, [str(store.root), "--no-progress", "--macro",
                                     "--cache", str(tmp_path / "c.sqlite")])  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 5 and len({(d["sample_id"], d["run_index"]) for d in lines}) == 5
    assert store.path("judgements.jsonl").read_text() == path.read_text()
    macro = json.loads(store.path("metrics.json").read_text())["cafe"]
    assert macro["mode"] == "macro" and macro["acc_per"] == pytest.approx(
        100 * (0.5 + 0.5 + 0 + 0) / 4
    )

    # agreement of the rule judge with itself (by name and by file): perfect
    res = cli.invoke(agreement_command, [str(store.root), "--judges", "rule", str(path), "--json"])
    assert res.exit_code == 0, res.output
    agree = json.loads(res.output)
    assert agree["kappa"] == pytest.approx(1.0) and agree["delta_b_minus_a"]["acc_per"] == 0
    res = cli.invoke(agreement_command, [str(store.root), "--judges", "rule", "nope"])
    assert res.exit_code != 0 and "known: rule-v2" in res.output


def test_llm_judge_without_captions_says_how_to_add_them(tmp_path):
    store = build_run(tmp_path / "run")
    res = CliRunner().invoke(judge_command, [str(store.root), "--judge", "openai-compatible",
                                             "--judge-model", "x", "--no-progress"])  # fmt: skip
    assert res.exit_code != 0 and "cafe caption" in res.output
    res = CliRunner().invoke(judge_command, [str(store.root), "--judge", "opneai"])
    assert res.exit_code != 0 and "unknown judge" in res.output
