"""The synth rule judge on hand-labelled outputs, and Cohen's kappa / event alignment."""

from __future__ import annotations

import pytest

from cafe.judge.base import JudgeItem
from cafe.judge.rule import RuleJudge
from cafe.metrics.agreement import agreement, align, cohen_kappa, normalise
from cafe.records import Event, Judgement, Prediction, Sample

VOCAB = {
    "dog_bark": ["dog barking", "dog barks", "bark"],
    "car_horn": ["horn", "honk"],
    "bell": ["church bell", "bell ringing"],
    "rain": ["rainfall"],
    "siren": ["siren wailing"],
}


def sample(events: list[Event]) -> Sample:
    return Sample("s1", "synth", "1", "How many barks?", ["one", "two"], "two", [], events=events)


def test_mpar2_perception_events_by_hand():
    events = [
        Event(0.0, 1.0, "dog_bark", required=True),
        Event(2.0, 3.0, "dog_bark", required=True),
        Event(4.0, 5.0, "car_horn"),
        Event(0.0, 6.0, "rain"),
        Event(5.0, 6.0, "bell", required=True),
    ]
    sections = {
        "perception_events": [
            {"start": 0.0, "end": 1.1, "text": "a dog barks"},
            {"start": 2.1, "end": 2.9, "text": "the dog barks again"},
            {"start": 4.0, "end": 5.0, "text": "a car horn honks"},
            {"start": 0.0, "end": 6.0, "text": "steady rainfall"},
            {"start": 7.0, "end": 8.0, "text": "a third bark"},  # no dog then: hallucinated
            {"start": 3.0, "end": 4.0, "text": "a glass shatters"},  # not a synth sound
            {"start": 6.0, "end": 7.0, "text": "silence"},  # not an event
        ],
        "reasoning": "1. Sub-question: how many barks? Answer: two barks, so the answer is two.\n"
        "2. Sub-question: where? Answer: the horn suggests a street.\n"
        "The rainfall is in the background.",
        "answer": "two",
    }
    p = Prediction("s1", 0, "m", "mpar2", "h", "<thinking>…</thinking>", sections=sections)
    j = RuleJudge(vocabulary=VOCAB).judge(JudgeItem(sample(events), p, None))
    assert j.status == "ok"
    assert j.matched_events == ["dog_bark [0.00-1.00]", "dog_bark [2.00-3.00]"]
    assert j.missed_events == ["bell [5.00-6.00]"]
    assert j.error_use == ["car_horn [4.00-5.00]"]  # leaned on: "suggests"
    assert j.neutral_events == ["rain [0.00-6.00]"]  # set aside: "background"
    assert j.error_matched == ["a third bark", "a glass shatters"]
    assert j.required_events == [
        "dog_bark [0.00-1.00]", "dog_bark [2.00-3.00]", "bell [5.00-6.00]"
    ]  # fmt: skip
    assert len(j.all_reasoning_events) == 6  # 4 real events + 2 hallucinated


def test_sentence_level_output_by_hand():
    events = [Event(0, 1, "dog_bark", required=True), Event(1, 2, "bell"), Event(2, 3, "car_horn")]
    raw = (
        "B\nReasoning: I hear a dog barking and a church bell, so the answer is two. "
        "There is also a honk in the background. A siren wailing is there too."
    )
    p = Prediction("s1", 0, "m", "lalm", "h", raw)
    j = RuleJudge(vocabulary=VOCAB).judge(JudgeItem(sample(events), p, None))
    assert j.matched_events == ["dog_bark [0.00-1.00]"]
    assert j.error_use == ["bell [1.00-2.00]"]
    assert j.neutral_events == ["car_horn [2.00-3.00]"]
    assert j.error_matched == ["siren"]
    assert j.missed_events == []


def test_failures_are_judgements_not_exceptions():
    judge = RuleJudge(vocabulary=VOCAB)
    bad = Prediction("s1", 0, "m", "lalm", "h", None, error="timeout")
    assert judge.judge(JudgeItem(sample([Event(0, 1, "rain")]), bad, None)).status == "failed"
    no_events = judge.judge(JudgeItem(sample([]), Prediction("s1", 0, "m", "l", "h", "x"), None))
    assert no_events.status == "failed" and "structured events" in no_events.reason
    # identity and rule hash are stable; another vocabulary is another rule set
    assert judge.template_hash == RuleJudge(vocabulary=VOCAB).template_hash
    assert judge.template_hash != RuleJudge(vocabulary={"rain": []}).template_hash


def test_cohen_kappa_by_hand():
    x = ["a", "a", "b", "b", "a", "b"]
    y = ["a", "b", "b", "b", "a", "a"]
    # p_o = 4/6; p_e = (3/6)(3/6) + (3/6)(3/6) = 1/2 -> kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert cohen_kappa(x, y) == pytest.approx(1 / 3)
    assert cohen_kappa(["a"], ["a"]) is None and cohen_kappa([], []) is None


def test_alignment_and_agreement():
    assert normalise("dog_bark [0.00-1.00]") == "dog bark"
    a = Judgement("s", 0, "A", "h", None, matched_events=["dog_bark [0.00-1.00]"],
                  error_use=["car horn"], missed_events=["bell"])  # fmt: skip
    b = Judgement("s", 0, "B", "h", None, matched_events=["Dog bark"],
                  neutral_events=["car horn honking"], error_matched=["siren"])  # fmt: skip
    pairs = sorted(align(a, b))
    assert pairs == sorted(
        [("matched", "matched"), ("misused", "neutral"), ("missed", "absent"),
         ("absent", "hallucinated")]
    )  # fmt: skip
    res = agreement([a], [b])
    assert res["events_aligned"] == 4 and res["raw_agreement"] == 0.25
    # B: mat 1, N_pred 3 -> 33.33; A: mat 1, N_pred 2 -> 50
    assert res["delta_b_minus_a"]["acc_per"] == pytest.approx(100 / 3 - 50)
