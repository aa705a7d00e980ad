"""Plugin metrics (cafe.metrics.METRICS) over a run folder: the folder read once, every
registered metric computed from its records, each written as its own section under the lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.locking import folder_lock
from cafe.metrics import RunRecords, metric_sections
from cafe.store import RunStore


def read_run(run_dir: str | Path) -> RunRecords:
    """The records of a run folder for the metric functions."""
    store = RunStore(run_dir)
    return RunRecords(
        root=store.root,
        manifest=store.read_manifest() if store.has_manifest() else {},
        samples=store.samples(),
        predictions=store.predictions(),
        judgements=store.judgements(),
        metrics=store.read_metrics(),
    )


def compute_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Run every registered metric on the run folder and write each result as its own
    metrics.json section (stamped with its inputs) -> {section: value}."""
    from cafe.metrics import METRICS

    if not METRICS.names():
        return {}
    store = RunStore(run_dir)
    with folder_lock(store.root, "cafe metrics"):
        out = metric_sections(read_run(store.root))
        for name, value in out.items():
            store.update_metrics(name, dict(value))  # the written copy carries the stamp
    return out
