"""The official MMAU / MMAR answer rule (both benchmarks use the same one), below the Benchmark
class, the official scorers and the accuracy section that apply it (cafe.benchmarks.scoring).

The rule (SPEC §9): lowercase, tokens = the set of ``\\w+`` words. A prediction is correct when it
has at least one token, every answer token is in it, and it shares no token with the other
choices' tokens minus the answer's tokens (a choice whose token set equals the answer's adds
nothing)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from cafe.records import Prediction

_WORD = re.compile(r"\b\w+\b")


def tokens(text: str) -> set[str]:
    """Lowercased set of ``\\w+`` words (Unicode aware, as in the official scripts)."""
    return set(_tokens(text))


@lru_cache(maxsize=1 << 16)
def _tokens(text: str) -> frozenset[str]:
    # choices and answers repeat across items and runs; caching them halves scoring time
    return frozenset(_WORD.findall(text.lower()))


def is_correct(prediction: str | None, answer: str, choices: Iterable[str]) -> bool:
    """The official string match. ``None`` (no prediction) is wrong."""
    if prediction is None:
        return False
    pred = set(_WORD.findall(prediction.lower()))  # not cached: outputs can be long and unique
    if not pred:
        return False
    ans = _tokens(answer)
    if not ans <= pred:
        return False
    distractors: set[str] = set()
    for choice in choices:
        ct = _tokens(choice)
        if ct != ans:
            distractors |= ct - ans
    return pred.isdisjoint(distractors)


def answer_text_of(output: str | None) -> str | None:
    """The answer section of a model output as the official script sees it (cafe.parsing)."""
    from cafe.parsing import parse_sections

    return parse_sections(output).answer


def output_is_correct(output: str | None, answer: str, choices: Iterable[str]) -> bool:
    """The one rule on a whole output: the official match on its answer text. The difficulty
    filter and the GRPO accuracy reward call this; the runner applies the same rule through the
    benchmark (`Benchmark.is_correct`)."""
    return is_correct(answer_text_of(output), answer, choices)


def official_text(p: Prediction) -> str | None:
    """What the rule reads: the answer text (records from before it was kept: the answer)."""
    return p.answer_text if p.answer_text is not None else p.answer
