"""MMAU's and MMAR's official scripts (Sakshi113/MMAU evaluation.py, ddlBoJack/MMAR
code/evaluation.py) read a predictions file row by row: a row without the script's key is
skipped, every other row is scored from its own answer and choices and counted, duplicates and
ids the metadata lacks included. `cafe score` reads the file by item instead (one row per
metadata item, the last of duplicates). Where the two readings count different rows, the
official section's headline is the script's, its named cases counted beside it, and cafe's
reading stands beside it, labelled."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cafe.benchmarks.official import KNOWN_KEYS, ROWS_READING, cell, tally


@dataclass(frozen=True)
class RowScript:
    """What the script reads of a row: its prediction key and the groups it counts by, each
    with the values its fixed table holds (None: any value, as for sub-category)."""

    key: str
    #: group field -> the values the script's table has (another value stops it: KeyError)
    groups: dict[str, tuple[str, ...] | None]
    name: str  # the script, for the labels

    def row_verdict(self, row: dict[str, Any]) -> tuple[bool | None, str | None]:
        """(right, None) as the script scores the row; (None, why) where it would stop. In the
        script's order: answer, its fixed groups and choices read with [] (KeyError); a
        sub-category of any hashable value is a cell of its own; the prediction and the answer
        lowercased (not text: it stops); the choices iterated only when the prediction has a
        word (a string is its characters, a dict its keys; anything else, or an item that is
        not text, stops it); a fixed group's value outside its table stops it."""
        from cafe.benchmarks.string_match import _WORD, is_correct

        for f in ("answer", *[g for g, v in self.groups.items() if v is not None], "choices"):
            if f not in row:
                return None, f"no {f} (KeyError)"
        free = [g for g, v in self.groups.items() if v is None]
        for g in free:
            try:
                hash(row.get(g))
            except TypeError:
                return None, f"{g} of type {type(row[g]).__name__} (TypeError)"
        answer, choices, said = row["answer"], row["choices"], row[self.key]
        for name, v in ((self.key, said), ("answer", answer)):
            if not isinstance(v, str):
                return None, f"{name} is not text ({type(v).__name__}: AttributeError)"
        if not _WORD.findall(said.lower()):  # no word: wrong before the choices are read
            right = False
        else:
            try:
                items = list(choices)
            except TypeError:
                return None, f"choices of type {type(choices).__name__} (TypeError)"
            if not all(isinstance(c, str) for c in items):
                return None, "a choice that is not text (AttributeError)"
            right = is_correct(said, answer, items)
        for field, values in self.groups.items():
            v = row.get(field)
            if values is not None and (not isinstance(v, str) or v not in values):
                return None, f"{field} {v!r} is not in the script's table (KeyError)"
        return right, None


def official_rows(
    script: RowScript, samples: list[Any], predictions: list[Any], records: list[Any]
) -> dict[str, Any] | None:
    """The official section for a file's ``records`` read as ``script`` reads them; None where
    that counts the same rows as cafe's reading (no duplicate, unknown id, skipped row, row
    answer other than the metadata's, or row the script stops on)."""

    by_id = {s.id: s for s in samples}
    seen: set[str] = set()
    cases: dict[str, int] = defaultdict(int)
    stopped: dict[str, int] = defaultdict(int)
    stopped_items: list[str] = []
    correct = total = 0
    cells: dict[str, dict[str, list[int]]] = {g: defaultdict(lambda: [0, 0]) for g in script.groups}
    for i, row in enumerate(records, 1):
        if not isinstance(row, dict):  # named by read_records already
            continue
        sid = str(row.get("id"))
        if script.key not in row:  # the script's `continue`
            others = [k for k in KNOWN_KEYS if k != script.key and k in row]
            name = f"rows holding only {others[0]}" if others else f"rows without {script.key}"
            cases[f"{name} (skipped by the script)"] += 1
            continue
        right, why = script.row_verdict(row)
        if why is not None:
            stopped[why] += 1
            stopped_items.append(f"{sid} (row {i})")
            continue
        if sid in seen:
            cases["duplicate rows (each counted)"] += 1
        seen.add(sid)
        s = by_id.get(sid)
        if s is None:
            cases["rows for ids absent from the metadata (scored from the row)"] += 1
        else:
            for case in _differences(script, row, s):
                cases[case] += 1
        correct += bool(right)
        total += 1
        for g in script.groups:
            v = row.get(g)
            if v is not None:
                cells[g][str(v)][0] += bool(right)
                cells[g][str(v)][1] += 1
    if not cases and not stopped:
        return None
    label = (f"official: {script.name} row by row: every row holding {script.key!r} scored from "
             "its own answer and choices and counted (duplicates and ids absent from the "
             "metadata too); rows without it skipped")  # fmt: skip
    headline: dict[str, Any] = {
        "label": label,
        "total": cell(correct, total),
        "breakdowns": {g: {k: cell(*c[k]) for k in sorted(c)} for g, c in cells.items()},
        "row_cases": dict(cases),
    }
    variants: dict[str, Any] = {}
    if stopped:  # the script stops on the first of them: it prints no figure
        from cafe.benchmarks.official import without_stops

        headline["stopped"] = {"count": sum(stopped.values()), "items": stopped_items,
                               "reasons": dict(stopped)}  # fmt: skip
        variants.update(without_stops(headline))

    def by_item(s: Any, p: Any) -> bool:
        return p is not None and bool(p.correct)

    fields = {g: (lambda s, g=g: s.meta.get(g)) for g in script.groups}
    variant = {
        "label": "by item (cafe's reading): one row per metadata item, the last of duplicates; "
        "rows for ids the metadata lacks ignored; items without a row counted wrong; NOT the "
        "official figure",
        **tally(samples, predictions, by_item, fields),
    }

    return {"rule": label, "reading": ROWS_READING, "headline": headline,
            "variants": {**variants, "by_item": variant}}  # fmt: skip


def _differences(script: RowScript, row: dict[str, Any], s: Any) -> list[str]:
    """The named cases where a row the script scores from its own fields is not the metadata's
    item: another answer, other choices, another group value, no sub-category (no cell)."""
    out = []
    if s.answer is not None and row["answer"].strip() != s.answer.strip():
        out.append("rows whose answer differs from the metadata's (the row's is used)")
    if not isinstance(row["choices"], list) or row["choices"] != list(s.choices):
        out.append("rows whose choices differ from the metadata's (the row's are used)")
    for g, values in script.groups.items():
        if g not in row and values is None:
            out.append(f"rows without {g} (in no {g} cell, as the script counts them)")
        elif row.get(g) != s.meta.get(g):
            out.append(f"rows whose {g} differs from the metadata's (the row's is used)")
    return out
