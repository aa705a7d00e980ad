"""Instruction-following checks for MMAU-Pro's instruction-following items: a regex or count check
per ``task_identifier`` with its ``kwargs``, written from IFEval's definitions of the same
identifiers (MMAU-Pro's items use IFEval-style ids). An identifier cafe does not know gives None
(unchecked), never a pass or a fail: the figure then says how many went unchecked."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[str, dict[str, Any]], bool]


def _compare(value: int, kw: dict[str, Any], key: str) -> bool:
    want = int(kw[key])
    relation = str(kw.get("relation", "at least")).lower()
    return value < want if relation.startswith("less") else value >= want


def _words(text: str) -> int:
    return len(re.findall(r"\b\w+\b", text))


def _sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s])


def _json(text: str, kw: dict[str, Any]) -> bool:
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip(), flags=re.I)
    try:
        json.loads(body)
    except json.JSONDecodeError:
        return False
    return True


def _keywords(kw: dict[str, Any]) -> list[str]:
    return [str(k) for k in kw.get("keywords") or kw.get("forbidden_words") or []]


CHECKS: dict[str, Check] = {
    "change_case:english_lowercase": lambda t, kw: t == t.lower() and any(c.isalpha() for c in t),
    "change_case:english_capital": lambda t, kw: t == t.upper() and any(c.isalpha() for c in t),
    "length_constraints:number_words": lambda t, kw: _compare(_words(t), kw, "num_words"),
    "length_constraints:number_sentences": lambda t, kw: _compare(
        _sentences(t), kw, "num_sentences"
    ),
    "length_constraints:number_paragraphs": lambda t, kw: (
        len([p for p in re.split(r"\s*\*\*\*\s*", t.strip()) if p]) == int(kw["num_paragraphs"])
    ),
    "detectable_format:json_format": _json,
    "detectable_format:number_bullet_lists": lambda t, kw: (
        len(re.findall(r"^\s*[*-]\s", t, flags=re.M)) == int(kw["num_bullets"])
    ),
    "detectable_format:title": lambda t, kw: re.search(r"<<[^\n]+>>", t) is not None,
    "keywords:existence": lambda t, kw: all(
        re.search(re.escape(k), t, flags=re.I) for k in _keywords(kw)
    ),
    "keywords:forbidden_words": lambda t, kw: not any(
        re.search(r"\b" + re.escape(k) + r"\b", t, flags=re.I) for k in _keywords(kw)
    ),
    "keywords:frequency": lambda t, kw: _compare(
        len(re.findall(re.escape(str(kw["keyword"])), t, flags=re.I)), kw, "frequency"
    ),
    "punctuation:no_comma": lambda t, kw: "," not in t,
    "startend:end_checker": lambda t, kw: t.strip().lower().endswith(
        str(kw["end_phrase"]).strip().lower()
    ),
    "startend:quotation": lambda t, kw: len(t.strip()) > 1 and t.strip()[0] == t.strip()[-1] == '"',
    "detectable_content:postscript": lambda t, kw: re.search(
        r"^\s*" + re.escape(str(kw.get("postscript_marker", "P.S."))), t, flags=re.M | re.I
    ) is not None,
    "detectable_content:number_placeholders": lambda t, kw: (
        len(re.findall(r"\[[^\]]*\]", t)) >= int(kw["num_placeholders"])
    ),
}  # fmt: skip


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return [value]
        value = parsed
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def follows(response: str | None, identifier: Any, kwargs: Any) -> bool | None:
    """Whether ``response`` follows every instruction the item names (``identifier``: one id or
    a list; ``kwargs``: a dict, a list of dicts, or either as JSON); None when an id is unknown
    or its kwargs are unusable (unchecked)."""
    ids = [str(i) for i in _as_list(identifier)]
    args = _as_list(kwargs)
    if not ids:
        return None
    text = response or ""
    result = True
    for i, ident in enumerate(ids):
        check = CHECKS.get(ident)
        kw = args[i] if i < len(args) else (args[0] if len(args) == 1 else {})
        if check is None or not isinstance(kw, dict):
            return None
        kw = {k: v for k, v in kw.items() if v is not None}
        try:
            result = check(text, kw) and result
        except (KeyError, ValueError, TypeError):
            return None
    return result
