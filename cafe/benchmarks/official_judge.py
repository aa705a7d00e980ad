"""What a benchmark says about its official LLM judge (SAKURA, MMAU-Pro's open items): the
request the official script sends, how it reads a reply, and the verdict read (Judged).
Declared by the benchmark (``Benchmark.official_judge``), run by cafe.judge.verdict; here,
beside the benchmarks that declare it, so a benchmark imports nothing from the judges."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.clients.thinking import final_answer
from cafe.records import Sample, Verdict

MAX_TOKENS = 512  # an explanation, then the judgement line
_JUDGEMENT = re.compile(r"judge?ment\s*[:：]\s*\**\s*(correct|incorrect|wrong|right)\b", re.I)


@dataclass(frozen=True)
class VerdictSpec:
    """What a benchmark says about its official LLM judge."""

    name: str  # cache task name
    template: Path  # {question} (with its options), {answer}, {output}
    model: str  # the judge model the official script uses (the default; "": none, yours)
    temperature: float = 0.0
    top_p: float | None = None
    #: the reply budget sent (None: none sent, the server's default, as SAKURA's script)
    max_tokens: int | None = MAX_TOKENS
    #: a system message sent before the prompt (None: the prompt alone)
    system: str | None = None
    #: the text judged in place of a null or failed output (None: no call, the item's verdict
    #: fails; MMAU-Pro's script judges "" where the output is missing)
    null_output: str | None = None
    #: a sample -> the template's question / answer text (the benchmark's own form)
    fields: Callable[[Sample], dict[str, str]] = field(default=lambda s: {})
    #: a reply -> its value (SAKURA: True / False), None when it does not parse
    reader: Callable[[str | None], Any] = field(default=lambda text: read_judgement(text))
    #: which items the judge sees (the others get no call)
    applies: Callable[[Sample], bool] = field(default=lambda s: True)
    #: (sample, the model's output) -> the output as the official prompt builder puts it in
    output_form: Callable[[Sample, str], str] = field(default=lambda s, out: out)
    #: asks again after a reply the reader cannot read, each time with ``reminder`` appended
    #: (each attempt its own cache key); still unread after them: the verdict is unparseable
    retries: int = 0
    reminder: str = ""
    #: further templates by name, for the items ``template_for`` names (None: ``template``);
    #: every template's text is part of the judge's identity (VoiceBench: "qa")
    templates: tuple[tuple[str, Path], ...] = ()
    template_for: Callable[[Sample], str | None] = field(default=lambda s: None)
    #: replies drawn per item, each its own call (keyed by its number): the verdict's value is
    #: their texts, read by the benchmark's scorer (VoiceBench: three); None: one reply, read
    #: by ``reader`` (asked again ``retries`` times)
    samples: int | None = None


@dataclass
class Judged(Verdict):
    """A verdict with the value the benchmark's reader gave the reply."""

    value: Any = None
    attempts: int = 1  # replies asked for (VerdictSpec.retries)


def read_judgement(text: str | None) -> bool | None:
    """True / False from a reply's last "Judgement: ..." line; None when none parses."""
    reply = final_answer(text)
    found = _JUDGEMENT.findall(reply or "")
    if not found:
        return None
    return found[-1].lower() in ("correct", "right")
