"""Cue recall: the documented offline matcher on hand cases, and the CAFE judge with the cue list
as its required events, through a loopback OpenAI-compatible judge; recall, agreement and the
cues-vs-required-events overlap equal hand counts."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cafe.metrics.cues import cue_mentioned
from cafe.records import Judgement, Prediction, Sample
from cafe.steps.cli import cues_command
from cafe.steps.cues import cues_run
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback


@pytest.mark.parametrize(
    ("cue", "text", "hit"),
    [
        ("Throat Singing", "I can hear throat singing over a drone.", True),
        ("Long Song", "The singer holds a long note.", False),  # 'song' absent
        ("dog barks", "Two dogs barking in the distance.", True),  # stems: dog, bark
        ("Tone of voice", "Her tone is sarcastic.", False),  # 'voice' absent
        ("[door closes]", "Then the door closes behind him.", True),
        # 5 content words (400 rmb set person total cost 1 600 -> 8): two thirds = 6 needed
        ("400 RMB per set; one set per person, total cost 1,600 RMB.",
         "Each set costs 400 RMB, one per person, so the total cost is 1,600 RMB.", True),
        ("400 RMB per set; one set per person, total cost 1,600 RMB.",
         "It costs 400 RMB.", False),
        ("老师", "说话的人是一位老师。", True),  # no spaces between words: substring
        ("老师", "说话的人是学生。", False),
    ],
)  # fmt: skip
def test_offline_matcher_hand_cases(cue, text, hit):
    assert cue_mentioned(cue, text) is hit


CUES = {"a": ["bell rings", "dog barks"], "b": ["thunder"], "c": []}


def build_run(root):
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}, "bench": {"name": "mmar", "version": "v2"}})
    samples = [
        Sample(k, "mmar", "v2", f"Question [{k}]?", ["x", "y"], "x", [],
               meta={"cue": c, "modality": "sound" if k != "b" else "speech"})
        for k, c in CUES.items()
    ]  # fmt: skip
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    outputs = {
        "a": "x. Reasoning: a bell rings twice, then silence.",  # offline: bell yes, dog no
        "b": "x. Reasoning: I hear thunder [b].",  # offline: yes
        "c": "x. Reasoning: nothing [c].",
    }
    preds = [
        Prediction(k, 0, "m", "lalm", "h", o, sections={"reasoning": o.split(": ", 1)[1]},
                   answer="x", correct=True)
        for k, o in outputs.items()
    ]  # fmt: skip
    preds.append(Prediction("b", 1, "m", "lalm", "h", None, error="timeout"))  # offline: 0 of 1
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    # the run's own CAFE judgements (caption-based): required events to compare with the cues
    with store.writer("judgements.jsonl") as w:
        w.write_many([
            Judgement("a", 0, "j", "t", None, required_events=["the bell ringing", "car horn"]),
            Judgement("b", 0, "j", "t", None, required_events=["thunder"]),
        ])  # fmt: skip
    return store


def lists(matched, missed, required):
    return json.dumps({
        "required_events": required, "all_caption_events": required,
        "all_reasoning_events": matched, "matched_events": matched, "error_matched": [],
        "error_use": [], "neutral_events": [], "missed_events": missed,
    })  # fmt: skip


def test_offline_recall_and_required_event_agreement(tmp_path):
    store = build_run(tmp_path / "run")
    res = CliRunner().invoke(cues_command, [str(store.root), "--json"])
    assert res.exit_code == 0, res.output
    sec = json.loads(store.path("metrics.json").read_text())["cues"]
    off = sec["offline"]
    # (a,0): 1 of 2; (b,0): 1 of 1; (b,1) failed: 0 of 1; (c,0) has no cues
    assert off["recall"] == pytest.approx(100 * 2 / 4)
    assert off["recall_macro"] == pytest.approx(100 * (0.5 + 1 + 0) / 3)
    assert (off["cues"], off["items"], off["no_cues"]) == (4, 3, 1)
    assert off["breakdowns"]["modality"]["speech"]["recall"] == 50.0
    rq = sec["cues_vs_required_events"]
    # a: 'bell rings' ~ 'the bell ringing'? normalised 'bell rings' vs 'bell ringing': Jaccard
    # 1/3 -> no pair; 'dog barks' none. b: 'thunder' = 'thunder' -> 1 pair of 3 cues, 3 required
    assert (rq["pairs"], rq["cues"], rq["required_events"]) == (1, 3, 3)
    assert rq["precision"] == pytest.approx(100 / 3, abs=0.01)
    assert "judge" not in sec


def test_cue_judge_recall_through_loopback(tmp_path):
    store = build_run(tmp_path / "run")

    def reply(body):
        prompt = body["messages"][0]["content"]
        assert "- bell rings\n- dog barks" in prompt or "- thunder" in prompt
        if "[a]" in prompt:  # the judge finds both cues in a's reasoning (disagrees on dog)
            return lists(["bell rings", "dog barks"], [], ["bell rings", "dog barks"])
        return lists([], ["thunder"], ["thunder"])

    with OpenAILoopback(reply=reply) as srv:
        sec = cues_run(store.root, "openai-compatible", "jm", [srv.url], 2, progress=False,
                       cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 2  # (a,0) and (b,0); failed (b,1) and cue-less c not sent
        again = cues_run(store.root, "openai-compatible", "jm", [srv.url], 2, progress=False,
                         cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 2  # resumed: nothing left
    j = sec["judge"]
    assert j["recall"] == pytest.approx(100 * 2 / 3, abs=0.01)  # a 2 of 2, b 0 of 1
    assert j["judgements"] == {"ok": 2, "invalid": 0, "failed": 0, "total": 2}
    assert j["judge"]["judge"] == "openai-compatible:jm"
    # per cue: a bell (1,1) dog (0,1) b thunder (1,0) -> agree on 1 of 3
    assert sec["offline_vs_judge"]["agreement"] == pytest.approx(100 / 3, abs=0.01)
    assert again["judge"]["recall"] == j["recall"]
    assert (store.root / "cues.judgements.openai-compatible-jm.jsonl").exists()
