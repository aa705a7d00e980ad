"""Output parsing, one parser for every prompt style: MPAR² sections (SPEC §7), <think>/<answer>
tags, the LALM "Reasoning:" style, and plain answers; then answer extraction that maps the
answer text to one of the choices, or says why it could not. Never a random fallback: an
unmappable answer is recorded as such and scored wrong. Also the first JSON value of a reply
(``first_json``: the judges' replies)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

_FLAGS = re.IGNORECASE | re.DOTALL
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def _tag(name: str) -> re.Pattern[str]:
    return re.compile(rf"<{name}>(.*?)</{name}>", _FLAGS)


_PERCEPTION, _REASONING, _REVIEW = _tag("perception"), _tag("reasoning"), _tag("review")
_THINKING = _tag("thinking")
_THINK = re.compile(r"<(think|thinking)>(.*?)</\1>", _FLAGS)  # <think>, <THINK>, <thinking>
_ANSWER = _tag("answer")  # the first one, like the authors' evaluation code
_AFTER_THINK = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)
_ANY_TAG = re.compile(r"</?[a-z]+>", re.IGNORECASE)
_REASONING_LINE = re.compile(r"^[ \t*#]*reasoning[ \t*]*:", re.IGNORECASE | re.MULTILINE)
_SUB_QUESTION = re.compile(r"sub-question\s*:", re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"\s*\d+\s*[.)]\s*$")
_EVENT_LINE = re.compile(
    r"^\s*(?:\d+\s*[.)]\s*)?\[\s*(\d+(?:\.\d*)?)\s*s?\s*[,\-–]\s*(\d+(?:\.\d*)?)\s*s?\s*\]\s*:?\s*(.*\S)",
    re.MULTILINE,
)


def _inside(name: str) -> str:
    """Content of one tag that holds no other <name> or </name> tag (strict format)."""
    return rf"(?:(?!</?{name}>).)*"


# SPEC §7: the whole completion is this tag order, whitespace allowed between tags only
_MPAR2_FORMAT = re.compile(
    r"\s*<thinking>\s*"
    rf"<perception>{_inside('perception')}</perception>\s*"
    rf"<reasoning>{_inside('reasoning')}</reasoning>\s*"
    rf"<review>{_inside('review')}</review>\s*"
    r"</thinking>\s*"
    rf"<answer>{_inside('answer')}</answer>\s*",
    re.DOTALL,
)


@dataclass
class Sections:
    perception: str | None = None
    perception_events: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None
    steps: list[str] = field(default_factory=list)
    review: str | None = None
    think: str | None = None
    answer: str | None = None
    format_ok: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first(pattern: re.Pattern[str], text: str, group: int = 1) -> str | None:
    m = pattern.search(text)
    return m.group(group).strip() if m else None


def perception_events(perception: str) -> list[dict[str, Any]]:
    """Numbered "[start, end]: event" lines as {"start", "end", "text"}."""
    return [
        {"start": float(m.group(1)), "end": float(m.group(2)), "text": m.group(3).strip()}
        for m in _EVENT_LINE.finditer(perception)
    ]


def split_steps(reasoning: str) -> list[str]:
    """One step per "Sub-question:", each from its "Sub-question:" to the next (the next
    step's list number is cut off the end)."""
    starts = [m.start() for m in _SUB_QUESTION.finditer(reasoning)]
    steps = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(reasoning)
        step = reasoning[start:end]
        if i + 1 < len(starts):
            step = _TRAILING_NUMBER.sub("", step)
        steps.append(step.strip())
    return steps


def parse_sections(text: str | None) -> Sections:
    s = Sections()
    if not text:
        return s
    s.format_ok = _MPAR2_FORMAT.fullmatch(text) is not None
    s.perception = _first(_PERCEPTION, text)
    if s.perception is not None:
        s.perception_events = perception_events(s.perception)
    s.reasoning = _first(_REASONING, text)
    if s.reasoning is not None:
        s.steps = split_steps(s.reasoning)
    s.review = _first(_REVIEW, text)
    s.think = _first(_THINKING, text) or _first(_THINK, text, group=2)
    s.answer = _first(_ANSWER, text)
    if s.answer is not None:
        return s
    closes = list(_AFTER_THINK.finditer(text))
    if closes:  # R1-style "<think>…</think> final answer" without answer tags
        s.answer = text[closes[-1].end() :].strip() or None
        return s
    m = _REASONING_LINE.search(text)
    if m:  # LALM style: the option first, then "Reasoning: …"
        s.answer = text[: m.start()].strip() or None
        if s.reasoning is None:
            s.reasoning = text[m.end() :].strip() or None
        return s
    if s.think is None and not _ANY_TAG.search(text):  # a plain answer
        s.answer = text.strip() or None
    return s


def reasoning_text(text: str | None, sections: Sections) -> str:
    """What reasoning-length counts measure: the thinking part (MPAR² <thinking>, <think>), the
    text after "Reasoning:", else the whole output less its answer section and its tags (the
    markup is no reasoning: ``<answer>2</answer>`` has none)."""
    if sections.think or sections.reasoning:
        return sections.think or sections.reasoning or ""
    if not text or not _ANY_TAG.search(text):
        return text or ""  # a plain answer: nothing tells its reasoning from its answer
    return _ANY_TAG.sub(" ", _ANSWER.sub(" ", text)).strip()


# answer extraction ------------------------------------------------------------------------
_LETTER = re.compile(r"^\(?\s*([A-Za-z])\s*[).:]?$")
_LETTER_THEN_TEXT = re.compile(r"^\(?\s*([A-Z])\s*[).:]\s+(.+)$", re.DOTALL)
_ANSWER_PREFIX = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]?\s*", re.I)


def _norm(text: str) -> str:
    text = " ".join(text.lower().split())
    return text.strip(" \t\"'`*.,;:!")


def _has_words(text: str, phrase: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def _named_choices(text: str, norms: Iterable[str]) -> list[str]:
    """The choices named in ``text`` as whole words, less those that are whole words of another
    named choice ("a dog" yields to "a dog barking", as under the official rule, where such a
    choice adds no distractor tokens). "2" is not a word of "12", nor "cat" of "bobcat"."""
    found = [n for n in norms if n and _has_words(text, n)]
    return [n for n in found if not any(n != o and _has_words(o, n) for o in found)]


def reply_letter(text: str | None) -> int | None:
    """The option position a reply names by its letter ("A", "(b)", "C.", "Answer: D", "B. dog"),
    counted from 0; None when it names none. What a position is read from where option texts
    cannot tell positions apart (choice-order figures)."""
    if text is None or not text.strip():
        return None
    raw = text.strip()
    m = _LETTER.match(raw) or _LETTER.match(_norm(_ANSWER_PREFIX.sub("", _norm(text))).upper())
    m = m or _LETTER_THEN_TEXT.match(raw)
    return ord(m.group(1).upper()) - ord("A") if m else None


def extract_answer(text: str | None, choices: list[str]) -> tuple[str | None, str]:
    """Map an answer to a choice: (choice, "ok"), or (None, "no_answer" | "unmapped").

    In order: the choice text itself (case- and space-insensitive); a letter "A", "(B)", "C."
    (optionally followed by the option text) mapped by position; the one choice whose text the
    answer contains (when several are found, a choice that is whole words of another found one
    yields to it; still several: ambiguous, unmapped)."""
    if text is None or not text.strip():
        return None, "no_answer"
    answer = _norm(text)
    stripped = _norm(_ANSWER_PREFIX.sub("", answer))
    by_norm: dict[str, str] = {}
    for c in choices:
        by_norm.setdefault(_norm(c), c)  # duplicate choice strings map to the first
    for candidate in (answer, stripped):
        if candidate in by_norm:
            return by_norm[candidate], "ok"
    raw = text.strip()
    m = _LETTER.match(raw) or _LETTER.match(stripped.upper())
    if m:
        idx = ord(m.group(1).upper()) - ord("A")
        if 0 <= idx < len(choices):
            return choices[idx], "ok"
        return None, "unmapped"
    m = _LETTER_THEN_TEXT.match(raw)
    if m:
        idx = ord(m.group(1)) - ord("A")
        rest = _norm(m.group(2))
        if rest in by_norm:
            return by_norm[rest], "ok"
        if 0 <= idx < len(choices) and _norm(choices[idx]) in rest:
            # the letter's option, unless the text also names another option (ambiguous)
            if not set(_named_choices(rest, by_norm)) - {_norm(choices[idx])}:
                return choices[idx], "ok"
    maximal = _named_choices(answer, by_norm)
    if len(maximal) == 1:
        return by_norm[maximal[0]], "ok"
    return None, "unmapped"


def split_options(instruction: str) -> tuple[str, list[str]] | None:
    """(question, options) of an instruction with inline "(a) ... (b) ..." options, or None.
    The markers must run (a), (b), ... in order, so a parenthesis inside an option's text is
    kept as text."""
    parts: list[int] = []
    start = 0
    for i in range(26):
        marker = f"({chr(ord('a') + i)})"
        at = instruction.find(marker, start)
        if at < 0:
            break
        parts.append(at)
        start = at + len(marker)
    if len(parts) < 2:
        return None
    ends = [*parts[1:], len(instruction)]
    options = [instruction[a + 3 : b].strip() for a, b in zip(parts, ends, strict=True)]
    return instruction[: parts[0]].strip(), options


def first_json(text: str, opener: str, accept: Callable[[Any], bool]) -> Any:
    """The first JSON value starting at ``opener`` that ``accept`` takes, from a code fence or
    else anywhere in ``text`` (prose before it, trailing text tolerated); None when none is."""
    decoder = json.JSONDecoder()
    for candidate in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        for m in re.finditer(re.escape(opener), candidate):
            try:
                obj, _ = decoder.raw_decode(candidate, m.start())  # stops at the value's end
            except json.JSONDecodeError:
                continue
            if accept(obj):
                return obj
    return None
