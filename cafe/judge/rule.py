"""Deterministic rule judge for the synth benchmark (the offline default).

Synth clips contain only sounds from a closed vocabulary and every sample carries its exact
events (label, onset, offset, required), so CAFE's categories can be decided by rule:

- mentions: the MPAR² ``perception_events`` lines when the prediction has them (each with its
  [start, end]), plus every sentence of the reasoning that names a vocabulary label or synonym;
- a mention binds to a ground-truth event with the same label (perception lines: the unused event
  whose span overlaps theirs, within ``TOLERANCE_S``); a mention that binds to nothing is
  hallucinated (the audio has no such sound, or not then);
- a bound required event is matched; a bound non-required event is misused when a reasoning
  sentence leans on it (a conclusion cue such as "so", "therefore", "answer", and no set-aside cue
  such as "background" or "irrelevant"), otherwise neutral (scene description);
- a required event that is not matched is missed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cafe.judge.base import Judge, JudgeItem
from cafe.prompts import sha256_text
from cafe.records import Event, Judgement
from cafe.synth_vocabulary import SOURCES

RULE_VERSION = "rule-v2"  # v2: the answer section alone is never a perception statement
NO_SOUND = "no_sound"  # Sample.meta flag: the clip the model got holds no sound event
TOLERANCE_S = 0.5  # a perceived span may miss the true one by this much and still overlap
_CONCLUSION = re.compile(
    r"\b(so|therefore|thus|hence|because|since|answer|indicates?|suggests?|means|must|"
    r"implies|shows?|conclude|which is why)\b",
    re.I,
)
_SET_ASIDE = re.compile(
    r"\b(background|irrelevant|not relevant|unrelated|ignore|ignoring|aside|regardless|"
    r"does not matter|doesn't matter|not needed)\b",
    re.I,
)
# a perception line that reports silence, or the absence of any event, names no event
_NOT_EVENTS = re.compile(
    r"^\W*(?:(silence|silent|pause|quiet|nothing|no sound)\W*$|no (?:sound|audible)? ?events?\b)",
    re.I,
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.I | re.S)


def default_vocabulary() -> dict[str, list[str]]:
    """label -> synonyms from the synth benchmark's closed vocabulary."""
    return {label: list(src.synonyms) for label, src in SOURCES.items()}


@dataclass
class _Mention:
    text: str
    label: str | None
    start: float | None = None
    end: float | None = None
    uses: bool = False  # a reasoning sentence leans on it for a conclusion


def _event_name(e: Event) -> str:
    return f"{e.label} [{e.onset:.2f}-{e.offset:.2f}]"


class RuleJudge(Judge):
    needs_caption = False
    needs_events = True  # ground-truth events: only synth carries them
    uses_cache = False  # deterministic and fast: nothing worth caching

    def __init__(
        self, kind: str = "rule", vocabulary: Mapping[str, Sequence[str]] | None = None,
        tolerance_s: float = TOLERANCE_S, **_ignored: Any,
    ):  # fmt: skip
        self.vocabulary = dict(vocabulary) if vocabulary is not None else default_vocabulary()
        self.tolerance_s = tolerance_s
        self.identity = RULE_VERSION
        rules = {"version": RULE_VERSION, "tolerance_s": tolerance_s, "vocabulary": self.vocabulary,
                 "not_events": _NOT_EVENTS.pattern}  # fmt: skip
        self.template_hash = sha256_text(json.dumps(rules, sort_keys=True))

    def _patterns(self, events: Sequence[Event]) -> list[tuple[re.Pattern[str], str]]:
        """(pattern, label) for every synonym and label, longest first ("church bell" wins)."""
        names: dict[str, str] = {}
        for label, syns in [*self.vocabulary.items(), *((e.label, ()) for e in events)]:
            for s in [label, label.replace("_", " "), *syns]:
                names.setdefault(s.lower(), label)
        ordered = sorted(names, key=len, reverse=True)
        return [(re.compile(r"\b" + re.escape(n) + r"s?\b", re.I), names[n]) for n in ordered]

    @staticmethod
    def _labels_in(text: str, patterns: list[tuple[re.Pattern[str], str]]) -> list[str]:
        found: dict[str, None] = {}  # an ordered set
        taken: list[tuple[int, int]] = []
        for pat, label in patterns:
            for m in pat.finditer(text):
                if any(m.start() < b and a < m.end() for a, b in taken):
                    continue  # inside a longer synonym already found
                taken.append(m.span())
                found[label] = None
        return list(found)

    def _mentions(self, item: JudgeItem, patterns: list) -> list[_Mention]:
        sec = item.prediction.sections or {}
        out: list[_Mention] = []
        for pe in sec.get("perception_events") or []:
            text = str(pe.get("text", "")).strip()
            if not text or _NOT_EVENTS.match(text):
                continue
            for label in self._labels_in(text, patterns) or [None]:
                out.append(_Mention(text, label, pe.get("start"), pe.get("end")))
        reasoning = self._reasoning_text(item.prediction.raw_output or "", sec, bool(out))
        for sentence in _SENTENCES.split(reasoning):
            uses = bool(_CONCLUSION.search(sentence)) and not _SET_ASIDE.search(sentence)
            for label in self._labels_in(sentence, patterns):
                out.append(_Mention(sentence.strip(), label, uses=uses))
        return out

    @staticmethod
    def _reasoning_text(raw: str, sec: dict[str, Any], structured: bool) -> str:
        """Where perception statements are read besides perception lines: the reasoning, review
        and thinking sections; without any, the output less its answer. Never the answer alone:
        it is the conclusion, not a statement of what was heard."""
        parts = [None if structured else sec.get("think"), sec.get("reasoning"), sec.get("review")]
        text = "\n".join(p for p in parts if p)
        if text or structured:
            return text
        rest = _ANSWER_BLOCK.sub("\n", raw).strip()
        answer = (sec.get("answer") or "").strip()
        if rest == answer and len([x for x in _SENTENCES.split(rest) if x.strip()]) <= 1:
            return ""  # a plain one-sentence answer: no reasoning to read
        return rest

    def _bind(self, m: _Mention, events: Sequence[Event], used: set[int]) -> list[int]:
        """Indices of the ground-truth events this mention refers to ([] = hallucinated)."""
        same = [i for i, e in enumerate(events) if e.label == m.label]
        if m.start is None or m.end is None:
            return same  # a sentence names the sound, not one occurrence of it
        start, end = m.start, m.end

        def overlap(i: int, tol: float = 0.0) -> float:
            return min(end, events[i].offset + tol) - max(start, events[i].onset - tol)

        hits = [i for i in same if overlap(i, self.tolerance_s) > 0]
        fresh = [i for i in hits if i not in used] or hits  # fresh ones first
        return [max(fresh, key=overlap)] if hits else []

    async def ajudge(self, item: JudgeItem) -> Judgement:
        return self.judge(item)

    def judge(self, item: JudgeItem) -> Judgement:
        pred, events = item.prediction, item.sample.events
        if pred.raw_output is None or pred.error:
            return self.failed(item, f"prediction failed: {pred.error or 'no output'}")
        # a listening control's silent clip (meta "no_sound") has no event by construction:
        # then every mention is a hallucination; otherwise no events means none were recorded
        if not events and not item.sample.meta.get(NO_SOUND):
            return self.failed(
                item, "rule judge needs structured events (synth benchmark); use an LLM judge"
            )
        events = events or []
        used: set[int] = set()
        leaned: set[int] = set()
        hallucinated: list[str] = []
        reasoning_events: list[str] = []
        for m in self._mentions(item, self._patterns(events)):
            bound = self._bind(m, events, used) if m.label is not None else []
            if not bound:
                name = m.text if m.start is not None else (m.label or m.text)
                if name not in hallucinated:
                    hallucinated.append(name)
                    reasoning_events.append(name)
                continue
            for i in bound:
                if i not in used:
                    used.add(i)
                    reasoning_events.append(_event_name(events[i]))
                if m.uses:
                    leaned.add(i)
        matched, misused, neutral, missed = [], [], [], []
        for i, e in enumerate(events):
            name = _event_name(e)
            if i in used:
                (matched if e.required else misused if i in leaned else neutral).append(name)
            elif e.required:
                missed.append(name)
        return self.judgement(
            item,
            raw_reply=None,
            required_events=[_event_name(e) for e in events if e.required],
            all_caption_events=[_event_name(e) for e in events],
            all_reasoning_events=reasoning_events,
            matched_events=matched,
            error_matched=hallucinated,
            error_use=misused,
            neutral_events=neutral,
            missed_events=missed,
        )
