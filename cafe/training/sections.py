"""TEMPORARY stand-in for `cafe.parsing.parse_sections` and `cafe.benchmarks.scoring.is_correct`
(owned by the core and bench helpers) so rewards can be tested before those branches land. The
one place training imports them from: once they are merged this module re-exports theirs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_STRICT = re.compile(
    r"^\s*<thinking>\s*<perception>(?P<perception>.*?)</perception>\s*"
    r"<reasoning>(?P<reasoning>.*?)</reasoning>\s*<review>(?P<review>.*?)</review>\s*"
    r"</thinking>\s*<answer>(?P<answer>.*?)</answer>\s*$",
    re.S,
)
_EVENT = re.compile(r"\[\s*([\d.]+)\s*,\s*([\d.]+)\s*\]\s*:\s*(.+)")


@dataclass
class Sections:
    perception: str | None = None
    perception_events: list[dict] = field(default_factory=list)
    reasoning: str | None = None
    steps: list[str] = field(default_factory=list)
    review: str | None = None
    think: str | None = None
    answer: str | None = None
    format_ok: bool = False


def _tag(text: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", text, re.S | re.I)
    return m.group(1).strip() if m else None


def parse_sections(text: str) -> Sections:
    text = text or ""
    s = Sections(
        perception=_tag(text, "perception"),
        reasoning=_tag(text, "reasoning"),
        review=_tag(text, "review"),
        think=_tag(text, "thinking"),
        answer=_tag(text, "answer"),
        format_ok=bool(_STRICT.match(text)),
    )
    if s.perception:
        for line in s.perception.splitlines():
            m = _EVENT.search(line)
            if m:
                s.perception_events.append(
                    {
                        "start": float(m.group(1)),
                        "end": float(m.group(2)),
                        "text": m.group(3).strip(),
                    }
                )
    if s.reasoning:
        parts = re.split(r"(?=Sub-question:)", s.reasoning)
        s.steps = [p.strip() for p in parts[1:] if p.strip()]
    return s


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", (text or "").lower()))


def is_correct(prediction: str | None, answer: str, choices: list[str]) -> bool:
    """SPEC §9 official rule (stand-in for `cafe.benchmarks.scoring.is_correct`)."""
    pred = _tokens(prediction or "")
    ans = _tokens(answer)
    if not pred or not ans <= pred:
        return False
    others = (
        set().union(*(_tokens(c) for c in choices if _tokens(c) != ans)) - ans if choices else set()
    )
    return not (pred & others)
