"""STAR-Bench's results file, infer_results.jsonl (one per task, in <work dir>/<model>/<alias>/,
as run.py writes it): one line per run with the run's item fields, ``prediction`` (the letter
read), ``is_correct``, ``model_response`` and ``unique_id`` (``<id>@<run>``). The script refuses
to score a file that lacks a run or holds one twice; so does cafe, naming the row."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from cafe.benchmarks.starbench.rule import read_letter
from cafe.benchmarks.starbench.runs import TASK_SETS, gold_letter
from cafe.records import InputError, Problem, Sample

RESULTS = "infer_results.jsonl"
#: the run's item fields in the order run.py writes them, before the reply's
ITEM_KEYS = ("id", "task", "category", "sub-category", "options", "answer", "answer_letter",
             "shuffled_seg_order", "rotate_id")  # fmt: skip


def result_row(s: Sample, reply: str) -> dict[str, Any]:
    """The line run.py writes for one run."""
    meta = s.meta
    own = {"id": meta.get("item_id"), "options": list(s.choices), "answer": s.answer,
           "answer_letter": gold_letter(s)}  # fmt: skip
    row = {k: own[k] if k in own else meta.get(k) for k in ITEM_KEYS
           if k != "shuffled_seg_order" or k in meta}  # fmt: skip
    said = read_letter(reply, s.choices)
    return {**row, "prediction": said, "is_correct": said == own["answer_letter"],
            "model_response": reply, "unique_id": s.id}  # fmt: skip


def write_results(
    triples: list[tuple[Sample, dict[str, Any], str | None]], out: Path
) -> list[Path]:
    """`cafe export`: ``out`` ending .jsonl gets every run; else the folder ``out`` gets
    <alias>/infer_results.jsonl per task, as run.py lays out a model's results. A run without
    a reply is written with an empty one (read as "Z": wrong)."""
    from cafe.safe_files import replace_file

    by_file: dict[Path, list[str]] = {}
    for s, _, reply in triples:
        if s.error is not None:
            continue
        target = out if out.suffix == ".jsonl" else out / str(s.meta.get("alias")) / RESULTS
        line = json.dumps(result_row(s, reply or ""), ensure_ascii=False)
        by_file.setdefault(target, []).append(line + "\n")
    for path, lines in by_file.items():
        replace_file(path, lambda f, lines=lines: f.writelines(lines))
    return sorted(by_file)


def result_files(path: Path) -> list[Path]:
    """A results file, or the files of a model's results folder (<alias>/infer_results.jsonl)."""
    if path.is_file():
        return [path]
    found = [path / a / RESULTS for a in TASK_SETS if (path / a / RESULTS).is_file()]
    found += [path / RESULTS] if (path / RESULTS).is_file() else []
    if not found:
        aliases = ", ".join(TASK_SETS)
        raise InputError(Problem(str(path), f"no STAR-Bench {RESULTS} here (expected "
                                 f"<alias>/{RESULTS}, alias one of {aliases})"))  # fmt: skip
    return found


def read_results(path: Path, samples: list[Sample]) -> list[dict[str, Any]]:
    """Every line of the results file(s), each with ``_where`` (file:line). Refused, naming the
    row: a line that is no JSON object, one naming no run of the data, a run twice, and a task
    present in the file with a run missing (the script gives no figure then)."""
    by_id = {s.id: s for s in samples if s.error is None}
    rows: list[dict[str, Any]] = []
    for f in result_files(path):
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(Problem(str(f), f"cannot read the results file ({e})")) from None
        for n, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as e:
                row = e
            if not isinstance(row, dict):
                raise InputError(Problem(f"{f}:{n}", "not a JSON object: the script reads no "
                                         "figure from the file"))  # fmt: skip
            uid = row.get("unique_id")
            if uid is None and row.get("id") is not None and row.get("rotate_id") is not None:
                uid = f"{row['id']}@{row['rotate_id']}"
            if uid not in by_id:
                raise InputError(Problem(f"{f}:{n}", "names no run of the data (its item or run "
                                         "number is not STAR-Bench's): the script refuses the "
                                         "file", str(uid), "unique_id"))  # fmt: skip
            rows.append({**row, "unique_id": uid, "_where": f"{f}:{n}"})
    _check_complete(rows, by_id, path)
    return rows


def _check_complete(rows: list[dict[str, Any]], by_id: dict[str, Sample], path: Path) -> None:
    count = Counter(r["unique_id"] for r in rows)
    twice = [r for r in rows if count[r["unique_id"]] > 1]
    if twice:
        where = ", ".join(r["_where"] for r in twice if r["unique_id"] == twice[0]["unique_id"])
        raise InputError(Problem(where, "this run is in the results twice: the script gives no "
                                 "figure for a file holding a run twice", twice[0]["unique_id"],
                                 "unique_id"))  # fmt: skip
    tasks = {by_id[r["unique_id"]].meta["alias"] for r in rows}
    missing = [sid for sid, s in by_id.items() if s.meta["alias"] in tasks and sid not in count]
    if missing:
        more = f" and {len(missing) - 1} more" if missing[1:] else ""
        raise InputError(Problem(str(path), f"run missing from the results{more}: the script "
                                 "gives no figure for a task with a run missing", missing[0],
                                 "unique_id"))  # fmt: skip
