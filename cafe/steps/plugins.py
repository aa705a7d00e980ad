"""Plugin metrics (cafe.metrics.METRICS) over a run folder, read once (its View)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.folder.view import read_view
from cafe.locking import folder_lock
from cafe.metrics import METRICS, metric_sections
from cafe.store import RunStore


def compute_metrics(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Run every registered metric on the run folder and write each result as its own
    metrics.json section (stamped with its inputs) -> {section: value}."""
    if not METRICS.names():
        return {}
    store = RunStore(run_dir)
    with folder_lock(store.root, "cafe metrics"):
        if not store.has_samples():
            store.samples()  # the one-line error: no samples.jsonl, and how to get it
        out = metric_sections(read_view(store))
        for name, value in out.items():
            store.update_metrics(name, dict(value))  # the written copy carries the stamp
    return out
