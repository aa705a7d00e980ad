"""The one read model of a run folder: ``View``, what steps (cafe.steps), plugin metrics
(cafe.metrics.METRICS) and reports compute from, read through the store (cafe.store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.records import Judgement, Prediction, Sample
from cafe.store import RunStore, numbered_jsonl


@dataclass(frozen=True)
class View:
    """A run folder as steps and metrics read it (one read, under the lock): they compute from
    these records and never open the folder themselves."""

    root: Path
    manifest: dict[str, Any]
    samples: list[Sample]
    predictions: list[Prediction]
    judgements: list[Judgement]
    metrics: dict[str, Any] = field(default_factory=dict)
    #: the rows of the folder's JSONL files the step ``reads`` (absent: none)
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def items(self) -> list[tuple[Sample, Prediction]]:
        """(sample, prediction) of every prediction with an output to read."""
        by_id = {s.id: s for s in self.samples}
        return [
            (by_id[p.sample_id], p)
            for p in self.predictions
            if p.sample_id in by_id and p.error is None and p.raw_output is not None
        ]


def read_view(run: RunStore | str | Path, reads: tuple[str, ...] = ()) -> View:
    """The folder as steps and metrics read it (samples, predictions, the run's judgements,
    metrics, and the rows of a step's own files ``reads``)."""
    store = run if isinstance(run, RunStore) else RunStore(run)
    files = {}
    for name in reads:  # a damaged line: one line naming the file and line, not a traceback
        path = store.path(name)
        if path.exists():
            files[name] = [value for _, value in numbered_jsonl(path)]
    return View(
        root=store.root,
        manifest=store.read_manifest() if store.has_manifest() else {},
        samples=store.samples() if store.has_samples() else [],  # a step needing them says so
        predictions=store.predictions(),
        judgements=store.judgements(),
        metrics=store.read_metrics(),
        files=files,
    )
