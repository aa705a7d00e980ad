"""How MMSU's and AIR-Bench's official scripts read a predictions FILE, line by line (read from
dingdongwang/MMSU mmsu_evaluation.py at 217d1d3 and OFA-Sys/AIR-Bench score_foundation.py at
9832476): neither reads the metadata, ids or cafe's parsing of the file, so `cafe score` reads
the file here as they do and scores each row from its own fields.

MMSU: each line is stripped and parsed; a line that does not parse (a byte-order mark at the
start of the file, a broken line) is skipped with a message; a line that is not an object stops
the script; every field is read with a default ("" for category, sub-category, answer_gt and
the options), so a row without an id counts, and one without answer_gt is compared as "".
AIR-Bench: a line that does not parse (blank, a BOM, broken) stops the script, as does a row
without task_name or dataset_name, a task_name or dataset_name that is not text (a null
task_name skips the row), and, once a letter is read, a row without answer_gt or choice_a (or
choice_b where answer_gt is not choice_a). A row without an id counts in both.

A JSON list (not the scripts' input) is read item by item with the same per-row rules."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.benchmarks.letters import CHOICE_FIELDS, MISSING, LetterRule, letter_of
from cafe.benchmarks.official import row_id
from cafe.records import Sample

BOM = "\ufeff"
#: the named cases where the script's reading of a file differs from cafe's by item
NO_ID = "rows without an id (counted by the script)"
NO_ANSWER = "rows whose answer_gt is missing or not text (compared as the script compares it)"
#: MMSU's defaults make such a row right for any letter A-D: '' equals ''
NO_LAYOUT = (
    "rows without answer_gt or any option (not the official layout: the script "
    "compares '' with '', so any letter A-D is right)"
)
UNKNOWN_ID = "rows for ids absent from the metadata (scored from the row)"
OTHER_ANSWER = "rows whose answer_gt differs from the metadata's (the row's is used)"
BOM_SKIPPED = "line 1 begins with a byte-order mark (the script cannot parse it: skipped)"
BROKEN_SKIPPED = "lines that are not JSON (skipped by the script)"
NULL_TASK = "rows with task_name null (skipped by the script)"


@dataclass
class FileReading:
    """A file as the script reads it: the rows it scores (an item built from each row, and the
    value under the response key or MISSING), where it stops and why, the named cases."""

    pairs: list[tuple[Sample, Any]] = field(default_factory=list)
    stops: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    cases: Counter = field(default_factory=Counter)


def _entries(path: Path) -> list[tuple[str, Any]]:
    """(where, parsed object or the JSONDecodeError) for each line the script reads (a JSON
    list: each item). Lines split as a text-mode file splits them."""
    with open(path, encoding="utf-8") as f:  # the scripts open it so; a BOM stays in line 1
        text = f.read()
    if text.lstrip(BOM + " \t\r\n").startswith("["):
        try:
            items = json.loads(text.lstrip(BOM))
        except json.JSONDecodeError as e:
            return [("the file", e)]
        return [(f"item {i}", x) for i, x in enumerate(items, 1)] if isinstance(items, list) else []
    out: list[tuple[str, Any]] = []
    for i, line in enumerate(text.splitlines(keepends=True), 1):
        try:
            out.append((f"line {i}", json.loads(line)))
        except json.JSONDecodeError as e:
            out.append((f"line {i}", e))
    return out


def read_file(
    bench: Any, path: str | Path, samples: list[Sample], keys: tuple[str, ...]
) -> FileReading:
    """``path`` read as ``bench``'s script reads it (its ``letter_rule``); ``keys``: where a row
    holds its reply (the first present), ``samples``: the metadata's items (for the named cases
    only)."""
    rule: LetterRule = bench.letter_rule
    by_id = {s.id: s for s in samples}
    got = FileReading()
    for where, row in _entries(Path(path)):
        if isinstance(row, json.JSONDecodeError):
            blank = not row.doc.strip()
            if rule.strict_lines:  # json.loads of each line, unguarded
                what = "blank line" if blank else f"not JSON ({row.msg})"
                got.stops.append((where, f"{what}: the script stops (JSONDecodeError)"))
            elif where == "line 1" and row.doc.startswith(BOM):
                got.cases[BOM_SKIPPED] += 1
            elif not blank:  # a blank line is skipped by cafe's reading too
                got.cases[BROKEN_SKIPPED] += 1
            continue
        if not isinstance(row, dict):
            got.stops.append((where, "not a JSON object: the script stops (it reads fields)"))
            continue
        item = _row_item(bench, where, row, keys, got)
        if item is None:
            continue
        s, value = item
        known = by_id.get(s.id)
        if row_id(row, bench.prediction_id_keys) is None:
            got.cases[NO_ID] += 1
        elif known is None:
            got.cases[UNKNOWN_ID] += 1
        elif not any(f in row for f in ("answer_gt", *CHOICE_FIELDS)):
            got.cases[NO_LAYOUT] += 1
        elif not isinstance(row.get("answer_gt"), str):
            got.cases[NO_ANSWER] += 1
        elif known.answer is not None and row["answer_gt"] != known.answer:
            got.cases[OTHER_ANSWER] += 1
        got.pairs.append((s, value))
    return got


def _row_item(
    bench: Any, where: str, row: dict[str, Any], keys: tuple[str, ...], got: FileReading
) -> tuple[Sample, Any] | None:
    """The item one row is scored as and its reply; None where the script skips or stops on
    it (recorded in ``got``)."""
    rule: LetterRule = bench.letter_rule
    k = next((k for k in keys if k in row), None)
    value = MISSING if k is None else row[k]
    sid = row_id(row, bench.prediction_id_keys) or where
    label = f"{sid} ({where})" if sid != where else where
    if rule.strict_lines:  # score_foundation.py: line['task_name'], line['dataset_name']
        missing = [f for f in ("task_name", "dataset_name") if f not in row]
        if missing:
            got.stops.append((label, f"no {missing[0]}: the script stops (KeyError)"))
            return None
        if row["task_name"] is None:
            got.cases[NULL_TASK] += 1
            return None
        if not (isinstance(row["task_name"], str) and isinstance(row["dataset_name"], str)):
            got.stops.append((label, "task_name or dataset_name not text: the script stops "
                                     "(TypeError)"))  # fmt: skip
            return None
        letter = letter_of(value) if isinstance(value, str) else None
        if letter:  # the gold letter is looked up only once a letter is read
            need = ["answer_gt", "choice_a"]
            if row.get("answer_gt") != row.get("choice_a"):
                need.append("choice_b")
            lacking = [f for f in need if f not in row]
            if lacking:
                got.stops.append((label, f"no {lacking[0]}: the script stops (KeyError)"))
                return None
        choices = [row.get(f) for f in CHOICE_FIELDS]
        answer = row.get("answer_gt")
        meta = dict(row)
    else:  # mmsu_evaluation.py: record.get(field, '') for every field
        cat, sub = row.get("category", ""), row.get("sub-category", "")
        try:
            hash((cat, sub))
        except TypeError:
            got.stops.append((label, "category or sub-category not text: the script stops "
                                     "(TypeError)"))  # fmt: skip
            return None
        choices = [row.get(f, "") for f in CHOICE_FIELDS]
        answer = row.get("answer_gt", "")
        meta = {**row, "category": cat, "sub-category": sub}
    s = Sample(id=sid, bench=bench.name, version="", question=str(row.get("question") or ""),
               choices=choices, answer=answer, audio=[], meta=meta)  # fmt: skip
    return s, value
