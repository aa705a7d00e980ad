"""Rule-based stand-ins for the LLM stages, for the offline pipeline on the synth benchmark.

Labelled as such everywhere they run (stage backend "rule"): deterministic functions of the
ground-truth events, never an LLM. They write the same records the LLM stages write, so the rest
of the pipeline, SFT and GRPO run unchanged. Events are dicts: label, onset, offset, attributes,
required."""

from __future__ import annotations

import hashlib
import random
import statistics
from collections import Counter
from typing import Any

DIMENSIONS = {
    "counting": "event counting: how many times a sound occurs",
    "pitch": "pitch contour: how the pitch of a sound moves",
    "rhythm": "rhythmic structure: whether repetitions are regular",
    "temporal": "temporal logic: the order and overlap of events",
    "timbre": "timbre: which sources make the sounds",
}
#: the four aspects of the paper's main text (section 4.1), the data pipeline's default; event
#: counting, the fifth in the appendix's question prompt (E.2), is opt-in (`data.dimensions`)
DEFAULT_DIMENSIONS = ("pitch", "rhythm", "temporal", "timbre")
FALLBACK_LABELS = ["dog_bark", "car_horn", "bell", "bird_chirp", "siren", "whistle", "drum"]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def words(label: str) -> str:
    return label.replace("_", " ")


def _number(n: int) -> str:
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else str(n)


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return random.Random(int(digest[:12], 16))


def caption_from_events(events: list[dict[str, Any]]) -> str:
    """A chronological narrative of the events (the rule captioner)."""
    parts = []
    for e in sorted(events, key=lambda e: e["onset"]):
        attrs = ", ".join(f"{k} {v}" for k, v in sorted((e.get("attributes") or {}).items()))
        extra = f" ({attrs})" if attrs else ""
        parts.append(f"a {words(e['label'])}{extra} from {e['onset']:.2f} s to {e['offset']:.2f} s")
    return ("The clip has " + "; then ".join(parts) + ".") if parts else "The clip is silent."


def _choices(answer: str, pool: list[str], rng: random.Random) -> tuple[list[str], str]:
    others = [p for p in dict.fromkeys(pool) if p != answer]
    rng.shuffle(others)
    choices = [answer, *others[:3]]
    rng.shuffle(choices)
    return choices, "ABCD"[choices.index(answer)]


def write_question(
    clip: dict[str, Any], dimension: str, label_pool: list[str]
) -> dict[str, Any] | None:
    """One 4-option question for the dimension, or None ("not suitable")."""
    events = sorted(clip.get("events") or [], key=lambda e: e["onset"])
    if not events:
        return None
    rng = _rng(clip["id"], dimension)
    counts = Counter(e["label"] for e in events)
    pool = [words(x) for x in label_pool] + [words(x) for x in FALLBACK_LABELS]
    if dimension == "counting":
        label, n = counts.most_common(1)[0]
        nums = [_number(k) for k in range(max(1, n - 3), n + 4) if k != n]
        choices, letter = _choices(_number(n), nums, rng)
        q = f"How many times is the {words(label)} heard?"
    elif dimension == "temporal":
        if len(counts) < 2:
            return None
        choices, letter = _choices(words(events[0]["label"]), pool, rng)
        q = "Which sound is heard first?"
    elif dimension == "timbre":
        present = {words(e["label"]) for e in events}
        absent = [p for p in pool if p not in present]
        target = words(max(events, key=lambda e: e["offset"] - e["onset"])["label"])
        choices, letter = _choices(target, absent, rng)
        q = "Which of these sound sources makes the longest sound in the clip?"
    elif dimension == "pitch":
        pitched = [e for e in events if (e.get("attributes") or {}).get("pitch")]
        if not pitched:
            return None
        e = pitched[0]
        contour = str(e["attributes"]["pitch"]).replace("flat", "steady")
        options = ["rising", "falling", "steady", "rising then falling", contour]
        choices, letter = _choices(contour, options, rng)
        q = f"How does the pitch of the {words(e['label'])} move?"
    elif dimension == "rhythm":
        label, n = counts.most_common(1)[0]
        if n < 3:
            return None
        onsets = [e["onset"] for e in events if e["label"] == label]
        gaps = [b - a for a, b in zip(onsets, onsets[1:], strict=False)]
        regular = statistics.pstdev(gaps) < 0.1 * max(statistics.mean(gaps), 1e-6)
        answer = "regular" if regular else "irregular"
        choices, letter = _choices(answer, ["regular", "irregular", "accelerating", "slowing"], rng)
        q = f"Is the rhythm of the repeated {words(label)} regular or irregular?"
    else:
        raise ValueError(f"unknown dimension {dimension!r}")
    return {"question": q, "choices": choices, "answer": letter}


def score_question(clip: dict[str, Any], question: dict[str, Any]) -> dict[str, Any]:
    """Reasoning depth 1-5 with the filter's JSON keys: 2, +1 when the dimension combines
    several events (counting, rhythm, temporal), +1 with at least two distinct sources to tell
    apart, +1 with at least three events (distractors to set aside)."""
    events = clip.get("events") or []
    score = 2
    reasons = []
    if question["dimension"] in ("counting", "rhythm", "temporal"):
        score += 1
        reasons.append("combines several events")
    if len({e["label"] for e in events}) >= 2:
        score += 1
        reasons.append("distinct sources to tell apart")
    if len(events) >= 3:
        score += 1
        reasons.append("distractor events")
    return {
        "analysis": "; ".join(reasons) or "a single salient event",
        "score": min(score, 5),
        "decision": "keep" if score >= 4 else "drop",
    }


COT_STYLES = ("full", "concise")


def write_cot(clip: dict[str, Any], question: dict[str, Any], style: str = "full") -> str:
    """An MPAR²-format chain built from the events (the rule CoT writer). "full": every event
    with 2-decimal times and three sub-questions; "concise" (the CPU smoke: a target a tiny model
    learns in a few dozen steps): each sound source once (its first occurrence) with 1-decimal
    times, one grounded sub-question and a one-line review."""
    if style not in COT_STYLES:
        raise ValueError(f"CoT style {style!r}: use one of {', '.join(COT_STYLES)}")
    events = sorted(clip.get("events") or [], key=lambda e: e["onset"])
    places = 2 if style == "full" else 1
    if style == "concise":  # each source once, at its first occurrence
        firsts: dict[str, dict[str, Any]] = {}
        for e in events:
            firsts.setdefault(e["label"], e)
        events = list(firsts.values())
    lines = [
        f"{i}. [{e['onset']:.{places}f}, {e['offset']:.{places}f}]: a {words(e['label'])}"
        for i, e in enumerate(events, 1)
    ]
    answer = question["answer_text"]
    labels = list(dict.fromkeys(words(e["label"]) for e in events))
    if style == "concise":
        heard = labels[0] if labels else "clip"
        steps = [f"Sub-question: which option fits the {heard}? Answer: {answer}"]
        review = (
            f"1. Evidence check: the {heard} was heard. 2. Logic check: the steps lead to {answer}."
        )
    else:
        steps = [
            f"Sub-question: which sounds are present? Answer: {', '.join(labels)}",
            f"Sub-question: what does the question ask about them? Answer: {question['dimension']}",
            f"Sub-question: which option fits the perceived events? Answer: {answer}",
        ]
        review = (
            f"1. Evidence check: the {labels[0] if labels else 'clip'} and the other events were "
            f"heard at the listed times. 2. Logic check: the steps lead to {answer}."
        )
    reasoning = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return (
        f"<thinking><perception>{chr(10).join(lines)}</perception>\n<reasoning>{reasoning}"
        f"</reasoning>\n<review>{review}</review></thinking><answer>{answer}</answer>"
    )
