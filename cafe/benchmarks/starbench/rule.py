"""STAR-Bench's reading of a reply and its figures (ALMEval_code/datasets/starbench.py and
run.py @ 0daf8b0).

The reading: the letters are the first n capitals of an item with n options. First, a keyword
(answer, <answer>, solution, choice, option, "correct option is", "answer is", 答案是, 选项是),
optional colons, then a letter bracketed ((A), <A>, [A], {A}) or bare: case-insensitive, so
"the answer is a" reads "a", which is no letter and so wrong; the bracketed kind beats the
bare, the last of the best kind wins. Else anywhere: a bracketed capital beats an option's text
(matched whole, any case, only in a reply of more than two words), which beats a bare capital;
the last of the best kind. Else "Z" (wrong).

The figures: AA, the share of right runs; ACR, the share of items right in every run. Spatial
and temporal pool their runs (total, per category, per sub-category where the rows have them);
perception's figures per sub-category, its category and total the unweighted means of those
(each rounded to two decimals first, as the script reads its own printed percentages). The
summary: the mean of the three tasks' totals."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cafe.benchmarks.starbench.runs import LETTERS

NO_LETTER = "Z"
_KEYWORDS = r"answer|<answer>|solution|choice|option|correct option is|answer is|答案是|选项是"


@lru_cache(maxsize=32)
def _patterns(n: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(keyword pattern, anywhere pattern) for n options: group 1 a bracketed letter, group 2
    a bare one."""
    set_ = f"[{LETTERS[:n]}]"
    either = rf"[\(\<\[\{{]\s*({set_})\s*[\)\]\>\}}]|\b({set_})\b"
    return re.compile(rf"(?i)(?:{_KEYWORDS})\s*[:：]*\s*(?:{either})"), re.compile(either)


def _last_best(found: list[tuple[str, int, int]]) -> str | None:
    """The letter of the highest (rank, position); of equals, the one found last."""
    return sorted(found, key=lambda f: (f[2], f[1]))[-1][0] if found else None


def read_letter(reply: str, options: Sequence[str]) -> str:
    """The reply's answer as STAR-Bench reads it: "<X>" (X possibly lower-case) or "Z"."""
    keyed, anywhere = _patterns(len(options))
    found = []
    for m in keyed.finditer(reply):
        found.append((m.group(2), m.start(), 0) if m.group(2) else (m.group(1), m.start(), 1))
    best = _last_best(found)
    if best is not None:
        return f"<{best}>"
    found = []
    for m in anywhere.finditer(reply):
        found.append((m.group(1), m.start(), 2) if m.group(1) else (m.group(2), m.start(), 0))
    if len(reply.split()) > 2:
        for i, text in enumerate(options):
            pattern = re.compile(rf"(?<![A-Za-z]){re.escape(text)}(?![A-Za-z])", re.IGNORECASE)
            found += [(LETTERS[i], m.start(), 1) for m in pattern.finditer(reply)]
    best = _last_best(found)
    return NO_LETTER if best is None else f"<{best}>"


@dataclass(frozen=True)
class Run:
    """One scored row: its item, where it falls, whether it is right."""

    item: str
    category: Any
    sub_category: Any
    right: bool


def _mean(xs: Sequence[float]) -> float:
    import numpy as np  # the script's pandas means: numpy's summation, to the last bit

    return float(np.asarray(xs, dtype=float).mean())


def aa_acr(runs: Sequence[Run]) -> dict[str, Any]:
    """AA and ACR (percent, two decimals) with the counts they are over."""
    per_item: dict[str, bool] = {}
    for r in runs:
        per_item[r.item] = per_item.get(r.item, True) and r.right
    aa = round(sum(r.right for r in runs) / len(runs) * 100, 2) if runs else None
    acr = round(sum(per_item.values()) / len(per_item) * 100, 2) if per_item else None
    return {"AA": aa, "ACR": acr, "runs": len(runs), "items": len(per_item)}


def _groups(runs: Sequence[Run], key: str) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        v = getattr(r, key)
        if v is not None:  # the script's groupby leaves rows without a value out
            out[str(v)].append(r)
    return dict(sorted(out.items()))


def pooled(runs: Sequence[Run]) -> dict[str, Any]:
    """Spatial and temporal: every figure over the runs it covers."""
    out: dict[str, Any] = {"total": aa_acr(runs)}
    for name, key in (("category", "category"), ("sub-category", "sub_category")):
        groups = _groups(runs, key)
        if groups:
            out[name] = {k: aa_acr(g) for k, g in groups.items()}
    return out


def macro(runs: Sequence[Run]) -> dict[str, Any]:
    """Perception: per sub-category, then unweighted means of those (rounded) figures."""
    subs = {k: aa_acr(g) for k, g in _groups(runs, "sub_category").items()}
    cat_of = {k: g[0].category for k, g in _groups(runs, "sub_category").items()}
    cats: dict[str, list[str]] = defaultdict(list)
    for k in subs:
        if cat_of[k] is not None:
            cats[str(cat_of[k])].append(k)

    def mean_of(keys: list[str]) -> dict[str, Any]:
        return {
            "AA": round(_mean([subs[k]["AA"] for k in keys]), 2),
            "ACR": round(_mean([subs[k]["ACR"] for k in keys]), 2),
            "sub_categories": len(keys),
            "runs": sum(subs[k]["runs"] for k in keys),
        }

    total = mean_of(list(subs)) if subs else {"AA": None, "ACR": None}
    return {
        "total": {**total, "items": len({r.item for r in runs if r.sub_category is not None})},
        "category": {c: mean_of(ks) for c, ks in sorted(cats.items())},
        "sub-category": subs,
    }


def summary(totals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The three-task summary: the mean of the tasks' total AA and ACR (None unless all
    three are there)."""
    have = [t for t in ("pc", "sr", "tr") if t in totals and totals[t].get("AA") is not None]
    if len(have) < 3:
        return {"AA": None, "ACR": None, "tasks": have}
    return {
        "AA": _mean([totals[t]["AA"] for t in have]),
        "ACR": _mean([totals[t]["ACR"] for t in have]),
        "tasks": have,
    }
