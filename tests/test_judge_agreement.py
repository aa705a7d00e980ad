"""The rule judge against a scripted LLM-style judge on the same run: the scripted judge replies
(over the loopback) with the ground-truth categories of a generated run, in its own event names,
with every fifth event deliberately put in another category. The rule judge must recover the
ground truth exactly, so raw agreement is (N - flips) / N and kappa follows from it."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from cafe.judge.cli import agreement_command
from cafe.metrics.agreement import cohen_kappa
from cafe.records import Event, Prediction, Sample
from cafe.steps.cafe_judge import judge_run
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

LABELS = ["tone", "buzz", "noise burst", "click train", "chirp"]
VOCAB = {
    "tone": ["tone", "beep", "pure tone"],
    "buzz": ["buzz", "buzzer"],
    "noise burst": ["noise burst", "hiss"],
    "click train": ["click train", "rattle"],
    "chirp": ["chirp", "sweep"],
}
FLIP = {"matched": "hallucinated", "misused": "neutral", "neutral": "misused",
        "missed": "matched", "hallucinated": "neutral"}  # fmt: skip
KEY = {"matched": "matched_events", "hallucinated": "error_matched", "misused": "error_use",
       "neutral": "neutral_events", "missed": "missed_events"}  # fmt: skip


def generate(n: int, seed: int = 7):
    """Samples, MPAR²-style predictions and the true category of every event."""
    rng = random.Random(seed)
    samples, preds, truth = [], [], {}
    for i in range(n):
        labels = rng.sample(LABELS, 4)
        present, spare = labels[:3], labels[3]
        events = [Event(0.5 + 1.2 * k, 1.1 + 1.2 * k, lab, required=k < rng.choice([1, 2]))
                  for k, lab in enumerate(present)]  # fmt: skip
        lines, steps, cats = [], [], []
        for e in events:
            if rng.random() < 0.8:
                j = rng.uniform(-0.1, 0.1)
                lines.append({"start": e.onset + j, "end": e.offset + j, "text": f"a {e.label}"})
                if e.required:
                    steps.append(
                        f"Sub-question: is the {e.label} the target? Answer: yes, so it counts."
                    )  # noqa: E501
                    cats.append((e.label, "matched"))
                elif rng.random() < 0.5:
                    steps.append(
                        f"Sub-question: what else? Answer: the {e.label} suggests option B."
                    )  # noqa: E501
                    cats.append((e.label, "misused"))
                else:
                    cats.append((e.label, "neutral"))
            elif e.required:
                cats.append((e.label, "missed"))
        if rng.random() < 0.3:
            lines.append({"start": 4.5, "end": 5.0, "text": f"a {spare}"})
            cats.append((spare, "hallucinated"))
        perception = "\n".join(
            f"{k}. [{x['start']:.2f}, {x['end']:.2f}]: {x['text']}" for k, x in enumerate(lines, 1)
        )
        reasoning = "\n".join(f"{k}. {s}" for k, s in enumerate(steps, 1))
        raw = (f"<thinking><perception>{perception}</perception><reasoning>{reasoning}"
               "</reasoning><review>1. Evidence check: ok. 2. Logic check: ok.</review>"
               "</thinking><answer>B</answer>")  # fmt: skip
        sid = f"item-{i:03d}"
        samples.append(Sample(sid, "synth", "1", f"Which one? [{sid}]", ["A", "B"], "B", [],
                              caption=f"caption of {sid}", events=events))  # fmt: skip
        sections = {"perception_events": lines, "reasoning": reasoning, "answer": "B"}
        preds.append(Prediction(sid, 0, "m", "mpar2", "h", raw, sections=sections,
                                correct=True, reasoning_tokens=40))  # fmt: skip
        truth[sid] = cats
    return samples, preds, truth


def scripted_reply(truth, every=5):
    """LLM-style replies: own names ("the tone sound"), every ``every``-th event flipped."""
    replies, flips, n = {}, 0, 0
    for sid, cats in truth.items():
        out = {k: [] for k in ("required_events", "all_caption_events", "all_reasoning_events",
                               *KEY.values())}  # fmt: skip
        for label, cat in cats:
            n += 1
            if n % every == 0:
                cat, flips = FLIP[cat], flips + 1
            out[KEY[cat]].append(f"the {label} sound")
        replies[sid] = json.dumps(out)
    return replies, flips, n


def test_rule_judge_agrees_with_scripted_judge(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("cafe.judge.rule.default_vocabulary", lambda: dict(VOCAB))
    samples, preds, truth = generate(60)
    store = RunStore(tmp_path / "run").create()
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    replies, flips, n_events = scripted_reply(truth)

    def reply(body):
        prompt = body["messages"][0]["content"]
        return replies[prompt.split("[", 1)[1].split("]", 1)[0]]

    with OpenAILoopback(reply=reply) as srv:
        judge_run(store.root, "openai-compatible", "scripted", [srv.url], 8, progress=False,
                  cache=tmp_path / "c.sqlite")  # fmt: skip
    judge_run(store.root, "rule", progress=False)

    # the rule judge recovers the generated truth exactly
    rule = {json.loads(x)["sample_id"]: json.loads(x)
            for x in store.path("judgements.rule-v2.jsonl").open()}  # fmt: skip
    for sid, cats in truth.items():
        for cat, key in KEY.items():
            got = sorted(name.split(" [")[0].removeprefix("a ") for name in rule[sid][key])
            assert got == sorted(lab for lab, c in cats if c == cat), (sid, cat)

    res = CliRunner().invoke(
        agreement_command,
        [str(store.root), "--judges", "rule", "openai-compatible:scripted", "--json"],
    )
    assert res.exit_code == 0, res.output
    agree = json.loads(res.output)
    assert agree["items_compared"] == 60 and agree["events_aligned"] == n_events
    assert agree["raw_agreement"] == pytest.approx((n_events - flips) / n_events)
    # kappa by hand from the truth labels and the flipped labels
    a = [c for cats in truth.values() for _, c in cats]
    b = [FLIP[c] if (k + 1) % 5 == 0 else c for k, c in enumerate(a)]
    assert agree["kappa"] == pytest.approx(cohen_kappa(a, b))
    assert 0.6 < agree["kappa"] < 0.95
    with capsys.disabled():
        print(
            f"\nrule vs scripted judge: {n_events} events, {flips} flipped, kappa "
            f"{agree['kappa']:.3f}, per category "
            + ", ".join(f"{c} {k:.3f}" for c, k in agree["kappa_per_category"].items())
        )
