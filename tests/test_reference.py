"""The reference listener and the random baseline on the synth benchmark. Requests are built here
by a helper that mirrors the prompt contract (a text part holding the question then the choices
one per line, and an audio part {"type": "audio", "path": ...})."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cafe import synth_vocabulary as V
from cafe.adapters import ADAPTERS
from cafe.adapters.cards import load_cards
from cafe.adapters.reference import read_question_and_choices
from cafe.audio import write_wav
from cafe.benchmarks.synth import load_folder
from cafe.benchmarks.synth.generator import generate
from cafe.records import Request

N = 60  # four items per (dimension, difficulty) cell
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
MPAR2 = re.compile(
    r"^<thinking><perception>(?P<perception>(?:\d+\. \[\d+\.\d\d, \d+\.\d\d\]: [^\n]+\n?)+)"
    r"</perception>\s*<reasoning>(?P<reasoning>(?:\d+\. Sub-question: [^\n]+ Answer: [^\n]+\n?)+)"
    r"</reasoning>\s*<review>1\. Evidence check: .+ 2\. Logic check: .+</review></thinking>"
    r"<answer>(?P<answer>[^<]+)</answer>$",
    re.S,
)


def make_request(sample, audio: str | None = None, seed: int = 0, style: str = "mpar2") -> Request:
    audio = audio or sample.audio[0]
    text = f"{sample.question}\nSelect one option from the provided choices:\n" + "\n".join(
        sample.choices
    )
    return Request(
        sample_id=sample.id,
        run_index=0,
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {
                "role": "user",
                "content": [{"type": "audio", "path": audio}, {"type": "text", "text": text}],
            },
        ],
        audio=[audio],
        generation={},
        seed=seed,
        prompt_style=style,
        template_hash="test",
    )


def adapter(name: str):
    card = load_cards()[name]
    return ADAPTERS.get(card.adapter)(card)


def answers(completions) -> list[str | None]:
    return [(m.group(1) if (m := ANSWER.search(c.text or "")) else None) for c in completions]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    generate(out, n=N, seed=11)
    return load_folder(out).samples


@pytest.fixture(scope="module")
def reference_outputs(samples):
    return adapter("reference").generate([make_request(s) for s in samples])


def _acc(samples, predicted, keep=lambda s: True) -> float:
    pairs = [(s, p) for s, p in zip(samples, predicted, strict=True) if keep(s)]
    return 100.0 * sum(p == s.answer for s, p in pairs) / len(pairs)


def test_cards_and_registry():
    cards = load_cards()
    assert cards["reference"].adapter == "reference" and cards["reference"].engine == "cpu"
    assert cards["reference"].prompt_style == "mpar2" and cards["reference"].group == "Baseline"
    assert cards["random"].adapter == "random" and cards["random"].group == "Baseline"
    assert "reference" in ADAPTERS.names() and "random" in ADAPTERS.names()


def test_reference_listens_well_above_chance(samples, reference_outputs):
    predicted = answers(reference_outputs)
    assert all(c.error is None for c in reference_outputs)
    easy = _acc(samples, predicted, lambda s: s.meta["difficulty"] == "easy")
    overall = _acc(samples, predicted)
    assert easy >= 90.0, easy
    assert overall >= 70.0, overall
    for dim in V.DIMENSIONS:  # every dimension is solved by listening, not by one trick
        assert _acc(samples, predicted, lambda s, d=dim: s.meta["dimension"] == d) >= 60.0, dim


def test_shuffled_audio_drops_the_reference_to_chance(samples, reference_outputs):
    # each item gets the next item's clip (a different dimension: cells cycle), same question
    shuffled = [make_request(s, audio=samples[(i + 1) % N].audio[0]) for i, s in enumerate(samples)]
    shuffled_acc = _acc(samples, answers(adapter("reference").generate(shuffled)))
    real_acc = _acc(samples, answers(reference_outputs))
    assert shuffled_acc <= 42.0, shuffled_acc  # chance is 25 %; 60 items give +-6 points
    assert real_acc - shuffled_acc >= 40.0, (real_acc, shuffled_acc)


def test_output_is_strict_mpar2_with_vocabulary_labels(samples, reference_outputs):
    labels = "|".join(re.escape(lab) for lab in V.LABELS)
    for s, c in zip(samples, reference_outputs, strict=True):
        m = MPAR2.match(c.text)
        assert m, c.text
        assert m.group("answer") in s.choices
        for line in m.group("perception").strip().splitlines():
            assert re.match(rf"\d+\. \[[\d.]+, [\d.]+\]: ({labels}) \(", line), line
        assert c.output_tokens and c.output_tokens > 20
        assert c.backend["engine"] == "cpu"


def test_perceived_times_match_the_events_on_easy_items(samples, reference_outputs):
    checked = 0
    for s, c in zip(samples, reference_outputs, strict=True):
        if s.meta["difficulty"] != "easy" or s.meta["dimension"] == "rhythm":
            continue
        heard = re.findall(r"\[(\d+\.\d+), (\d+\.\d+)\]: ([a-z ]+) \(", c.text)
        truth = sorted(s.events, key=lambda e: e.onset)
        assert [h[2] for h in heard] == [e.label for e in truth], s.id
        for (on, off, _), e in zip(heard, truth, strict=True):
            assert abs(float(on) - e.onset) < 0.05 and abs(float(off) - e.offset) < 0.06, s.id
        checked += 1
    assert checked == 16


def test_bad_audio_is_a_failed_completion_not_a_lost_batch(samples, tmp_path):
    silent = tmp_path / "silent.wav"
    write_wav(silent, np.zeros(16000, dtype=np.float32))
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF not really a wav")
    reqs = [
        make_request(samples[0], audio=str(tmp_path / "missing.wav")),
        make_request(samples[1], audio=str(broken)),
        make_request(samples[2], audio=str(silent)),
        make_request(samples[3]),
    ]
    out = adapter("reference").generate(reqs)
    assert [c.sample_id for c in out] == [s.id for s in samples[:4]]
    assert out[0].text is None and "missing.wav" in out[0].error and "not found" in out[0].error
    assert out[1].text is None and "broken.wav" in out[1].error and samples[1].id in out[1].error
    assert MPAR2.match(out[2].text) and "no sound event" in out[2].text
    assert out[3].error is None and MPAR2.match(out[3].text)


@pytest.mark.parametrize(
    "text,question,choices",
    [
        (
            "How many?\nSelect one option from the provided choices:\n2\n3\n4\n5",
            "How many?",
            ["2", "3", "4", "5"],
        ),
        (
            "Which sound is first? Select one option.\n(A) tone\n(B) buzz\n(C) chirp\n"
            "(D) click train",
            "Which sound is first? Select one option.",
            ["tone", "buzz", "chirp", "click train"],
        ),
        (
            "Which comes last?\nA. tone\nB. buzz\nPut your final answer inside <ANSWER></ANSWER>.",
            "Which comes last?",
            ["tone", "buzz"],
        ),
        (
            "Rhythm?\nOutput the selected option first, then a line starting with Reasoning: "
            "that explains it.\nslow and regular\nfast and irregular",
            "Rhythm?",
            ["slow and regular", "fast and irregular"],
        ),
    ],
)
def test_reads_questions_and_choices_from_any_prompt_style(text, question, choices):
    assert read_question_and_choices(text) == (question, choices)


def test_lettered_prompt_gives_the_same_answer(samples, reference_outputs):
    s = next(x for x in samples if x.meta["dimension"] == "counting")
    req = make_request(s)
    lettered = "\n".join(f"({chr(65 + i)}) {c}" for i, c in enumerate(s.choices))
    req.messages[1]["content"][1]["text"] = f"{s.question}\n{lettered}\nAnswer with the option."
    out = adapter("reference").generate([req])[0]
    assert answers([out]) == answers([reference_outputs[samples.index(s)]])


def test_random_is_seeded_chance(tmp_path):
    from cafe.records import Sample

    items = [
        Sample(
            f"q{i}",
            "synth",
            "v",
            f"Question {i}?",
            ["a one", "b two", "c three", "d four"],
            ["a one", "b two", "c three", "d four"][i % 4],
            [str(tmp_path / "x.wav")],
        )
        for i in range(800)
    ]
    rnd = adapter("random")
    first = rnd.generate([make_request(s, seed=5) for s in items])
    again = rnd.generate([make_request(s, seed=5) for s in items])
    other = rnd.generate([make_request(s, seed=6) for s in items])
    picked = answers(first)
    assert picked == answers(again)
    assert picked != answers(other)
    assert all(re.fullmatch(r"<answer>[^<]+</answer>", c.text) for c in first)
    assert all(p in s.choices for p, s in zip(picked, items, strict=True))
    acc = _acc(items, picked)
    assert 20.0 <= acc <= 30.0, acc  # 800 draws at p = 0.25: sd 1.5 points
    assert min(Counter(picked).values()) > 150  # every option gets picked


def test_reference_is_deterministic(samples, reference_outputs):
    again = adapter("reference").generate([make_request(s) for s in samples[:10]])
    assert [c.text for c in again] == [c.text for c in reference_outputs[:10]]
    assert Path(samples[0].audio[0]).exists()
