"""`cafe rubric RUN_DIR`: MMAR rubric scores for a run folder, resumably.

Reads samples.jsonl (MMAR v2 items carry ``rubric`` and ``thinking``) and predictions.jsonl,
rates what is not yet rated (at most ``concurrency`` judge calls in flight), appends records to
``rubric.<judge>.jsonl`` in small fsynced batches, compacts it (one record per (item, run)) and
writes the metrics.json "rubric" section with the judge named. Failed items (transport) are
tried again on the next run; invalid ones are kept (their replies replay from the cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.records import RubricScore
from cafe.store import RunStore, latest_records

SECTION = "rubric"


def rubric_file(store: RunStore, identity: str) -> Path:
    return store.judge_records("rubric", identity)


def read_scores(path: Path) -> list[RubricScore]:
    return latest_records(path, RubricScore)


def __getattr__(name: str) -> Any:
    # the orchestration runs on the step engine now (cafe.steps.rubric), the command lives in
    # the command-line layer (cafe.steps.cli); the names stay importable from here
    if name == "rubric_run":
        from cafe.steps.rubric import rubric_run

        return rubric_run
    if name == "rubric_command":
        from cafe.steps.cli import rubric_command

        return rubric_command
    raise AttributeError(name)
