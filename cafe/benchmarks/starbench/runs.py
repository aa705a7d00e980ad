"""STAR-Bench's items and their runs (InternLM/StarBench, ALMEval_code/datasets/starbench.py @
0daf8b0). The data root holds meta_info/<task file>.json (a JSON list per task) and the clips,
whose paths the rows give relative to that root. The runs are part of the benchmark: each item is
asked several times, and each (item, run) is one cafe item whose id is the official unique_id,
``<id>@<run>``.

- perception (pc) and spatial (sr): the options shifted right by the run number r (option i
  shown at (i + r) mod n), one run per option for perception, r = 0, 1, 2 for spatial; the clips
  first, then the text;
- temporal (tr): the options kept, the three clips (stored in their true order) shown in one of
  the six orders of (1, 2, 3), picked from r, the id's subtask and its number; the gold option is
  "clip a -> clip b -> clip c", naming where the true first, second and third segments were
  shown; the text first, then each clip after "clip N:".

A row's ``global_caption`` (temporal rows carry one) is the item's caption, the ground truth the
CAFE judge reads."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import LoadedBenchmark
from cafe.records import InputError, Problem, Sample

BENCH = "starbench"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class TaskSet:
    """One of the benchmark's three JSON files and how its items are run."""

    alias: str  # the official dataset alias: its results folder's name
    file: str  # relative to the data root
    title: str
    runs: Callable[[dict[str, Any]], int]  # the item's number of runs
    shuffles_clips: bool  # temporal: the clips reordered per run, not the options


TASK_SETS = {
    t.alias: t
    for t in (
        TaskSet("pc", "meta_info/foundation_perception.json", "perception",
                lambda row: len(row["options"]), False),
        TaskSet("sr", "meta_info/holistic_reasoning_spatial.json", "spatial", lambda row: 3, False),
        TaskSet("tr", "meta_info/holistic_reasoning_temporal.json", "temporal",
                lambda row: 3, True),
    )
}  # fmt: skip

#: the six orders of the three clips, in the benchmark's order, and its temporal subtasks
CLIP_ORDERS = list(itertools.permutations((1, 2, 3)))
SUBTASKS = ("OSM", "ISSE", "TAO", "DSS", "ETC")


def rotated(items: list[Any], r: int) -> list[Any]:
    """Shifted right by r: the last r first (r = 0 leaves them as they are)."""
    return items[-r:] + items[:-r]


def clip_order(item_id: str, r: int) -> tuple[int, ...]:
    """Temporal: the true segment shown at each position in run r, from an id ending in
    ``_<subtask>_<number>``; ValueError for an id of another form."""
    parts = item_id.split("_")
    if len(parts) < 3 or parts[-2] not in SUBTASKS or not parts[-1].isdigit():
        raise ValueError(f"a temporal id ends in _<{'|'.join(SUBTASKS)}>_<number>")
    shift = (r % 6 + SUBTASKS.index(parts[-2])) % 6
    return CLIP_ORDERS[(int(parts[-1]) + shift) % 6]


def order_answer(order: tuple[int, ...]) -> str:
    """The gold option of a shown order: where the true 1st, 2nd and 3rd segments are."""
    return " -> ".join(f"clip {order.index(seg) + 1}" for seg in (1, 2, 3))


def letter(i: int) -> str:
    """The official answer letter of option i, "<A>"."""
    return f"<{LETTERS[i]}>"


def gold_letter(s: Sample) -> str:
    """The run's answer letter as shown (its choices as shown: cafe's --permute-choices
    reorders them again, keeping the answer's text)."""
    return letter(s.choices.index(s.answer)) if s.answer in s.choices else "<?>"


def raw_option(s: Sample, shown: int) -> int:
    """The item's own option (its index in the metadata row) shown at position ``shown``."""
    from cafe.benchmarks.choice_order import ORDER_KEY

    again = s.meta.get(ORDER_KEY) or list(range(len(s.choices)))
    return int(s.meta["option_order"][again[shown]])


def task_files(data: Path) -> list[tuple[TaskSet, Path]]:
    """The task files under a data root (or the one file given)."""
    if data.is_file():
        found = [t for t in TASK_SETS.values() if Path(t.file).name == data.name]
        if not found:
            names = ", ".join(Path(t.file).name for t in TASK_SETS.values())
            raise InputError(Problem(str(data), f"not a STAR-Bench meta_info file ({names})"))
        return [(found[0], data)]
    pairs = [(t, data / t.file) for t in TASK_SETS.values() if (data / t.file).is_file()]
    if not pairs:
        raise InputError(Problem(str(data), "no STAR-Bench meta_info/*.json under this "
                                 "folder (the dataset root: meta_info/ and the clips beside "
                                 "it)"))  # fmt: skip
    return pairs


def _root(data: Path) -> Path:
    """The dataset root the clips are relative to: the folder above meta_info/."""
    if data.is_file():
        return data.parent.parent if data.parent.name == "meta_info" else data.parent
    return data


def load(data: str | Path, version: str | None, audio_root: str | None) -> LoadedBenchmark:
    from cafe.benchmarks.metadata import (
        check_signature,
        fingerprint_version,
        read_rows,
        unknown_release,
    )

    source = Path(data).expanduser()
    if not source.exists():
        raise InputError(Problem(str(source), "STAR-Bench data not found"))
    root = Path(audio_root).expanduser() if audio_root else _root(source)
    problems: list[Problem] = []
    per_file = []
    for task, path in task_files(source):
        rows, bad = read_rows(path)
        check_signature(BENCH, [r for _, r in rows], str(path))
        problems += bad
        per_file.append((task, path, rows))
    every = [r for _, _, rows in per_file for _, r in rows]
    ver = version or fingerprint_version(every, ("audio_paths",))
    if not version:
        problems.append(unknown_release(str(source), ver))
    samples: list[Sample] = []
    seen: set[str] = set()
    for task, path, rows in per_file:
        for pos, row in rows:
            samples += _item_runs(task, path, pos, row, root, ver, seen, problems)
    return LoadedBenchmark(samples, ver, str(source), None, problems)


def _item_runs(task: TaskSet, path: Path, pos: int, row: Any, root: Path, ver: str,
               seen: set[str], problems: list[Problem]) -> list[Sample]:  # fmt: skip
    """One row's runs; a bad row is one failed item (``<id>@0``) and a Problem per field."""
    from cafe.audio import contained_audio

    if not isinstance(row, dict) or row.get("id") in (None, ""):
        problems.append(Problem(str(path), f"item {pos} has no id", field="id"))
        return []
    iid = str(row["id"])
    errors: list[tuple[str, str]] = []
    if iid in seen:
        errors.append(("id", f"duplicate id (item {pos}): its runs would be counted twice"))
        iid = f"{iid}#dup{pos}"
    seen.add(iid)
    options = row.get("options")
    if (
        not isinstance(options, list)
        or len(options) < 2
        or not all(isinstance(o, str) for o in options)
    ):
        errors.append(("options", "a list of at least two option texts expected"))
        options = []
    question = row.get("question")
    if not isinstance(question, str):
        errors.append(("question", "missing field"))
        question = ""
    clips = row.get("audio_paths")
    if not isinstance(clips, list) or not clips:
        errors.append(("audio_paths", "a list of clip paths expected"))
        clips = []
    elif task.shuffles_clips and len(clips) != 3:
        errors.append(("audio_paths", f"a temporal item has 3 clips, not {len(clips)}"))
    audio = []
    for rel in clips:
        full, outside = contained_audio(rel, [root], file=str(path), sample_id=iid,
                                        field="audio_paths")  # fmt: skip
        if outside is not None:
            errors.append(("audio_paths", outside.message))
        else:
            audio.append(full)
    if not task.shuffles_clips and options and row.get("answer") not in options:
        errors.append(("answer", "the answer is not one of the options"))
    if task.shuffles_clips:
        try:
            clip_order(iid, 0)
        except ValueError as e:
            errors.append(("id", str(e)))
    meta = {
        "item_id": iid, "task": row.get("task"), "category": row.get("category"),
        "sub-category": row.get("sub-category"), "alias": task.alias,
    }  # fmt: skip
    if errors:
        for f, m in errors:
            problems.append(Problem(str(path), m, iid, f))
        error = "; ".join(f"{f}: {m}" for f, m in errors)
        return [Sample(id=f"{iid}@0", bench=BENCH, version=ver, question=question,
                       choices=list(options), answer=None, audio=[], meta=meta,
                       error=error)]  # fmt: skip
    # the uncut scene's caption (temporal rows carry one): ground truth for the CAFE judge
    caption = row.get("global_caption") if isinstance(row.get("global_caption"), str) else None
    out = []
    for r in range(task.runs(row)):
        shown, order, clip_list = list(options), list(range(len(options))), list(audio)
        extra: dict[str, Any] = {}
        if task.shuffles_clips:
            segs = clip_order(iid, r)
            answer = order_answer(segs)
            clip_list = [audio[s - 1] for s in segs]
            extra = {"shuffled_seg_order": "-".join(map(str, segs)), "prompt_form": "temporal"}
            if answer not in shown:
                problems.append(Problem(str(path), f"run {r}: the derived answer {answer!r} is "
                                        "not one of the options", iid, "options"))  # fmt: skip
                continue
        else:
            shown, order, answer = rotated(shown, r), rotated(order, r), row["answer"]
        out.append(Sample(
            id=f"{iid}@{r}", bench=BENCH, version=ver, question=question, choices=shown,
            answer=answer, audio=clip_list, caption=caption,
            meta={**meta, "rotate_id": r, "option_order": order, **extra},
        ))  # fmt: skip
    return out
