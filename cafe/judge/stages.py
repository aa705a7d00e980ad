"""The judge side in stages, shared by every judge of a run folder's (item, run)s (the CAFE judge,
the cue judge, the rubric judge), as the runner is: plan -> execute -> store. Each judge brings
only its calls (``ajudge`` / ``ascore``), its failed record and its metrics section.

- ``plan_judging``: what is pending, from the predictions and the records the judge's spec may
  keep (cafe.judge.spec.resume_records: another spec's records are redone); a prediction whose
  sample is gone becomes a failed record, never a crash.
- the calls themselves go through the one executor (cafe.execution.execute).
- ``merged``: the judge's records after this invocation, one per (item, run) with a prediction
  (what the caller compacts the file to)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from cafe.judge.spec import JudgeSpec, resume_records
from cafe.records import Prediction, Sample
from cafe.store import SAMPLES

R = TypeVar("R")


@dataclass
class JudgePlan(Generic[R]):
    path: Path  # the judge's own records file
    existing: list[R]  # records kept from earlier invocations (this spec's)
    todo: list[tuple[Sample, Prediction]]  # (item, run)s to judge now
    orphans: list[R]  # predictions whose sample is missing: failed records
    keys: set[tuple[str, int]] = field(default_factory=set)  # every (item, run) predicted

    @property
    def done(self) -> set[tuple[str, int]]:
        return {(r.sample_id, r.run_index) for r in self.existing if r.status != "failed"}  # type: ignore[attr-defined]


def plan_judging(
    path: Path,
    spec: JudgeSpec,
    preds: Sequence[Prediction],
    samples: Sequence[Sample],
    read: Callable[[Path], Sequence[R]],
    legacy_ok: Callable[[R], bool],
    orphan: Callable[[Prediction, str], R],
    *,
    write: bool = True,
) -> JudgePlan[R]:
    """The pending (item, run)s of ``preds``: not yet judged under ``spec`` (a failed record is
    judged again). ``orphan(pred, reason)``: the judge's failed record for a missing sample."""
    existing = resume_records(path, spec, read, legacy_ok, write=write)
    plan: JudgePlan[R] = JudgePlan(path, existing, [], [])
    plan.keys = {(p.sample_id, p.run_index) for p in preds}
    done, by_id = plan.done, {s.id: s for s in samples}
    for p in preds:
        if (p.sample_id, p.run_index) in done:
            continue
        s = by_id.get(p.sample_id)
        if s is None:
            plan.orphans.append(orphan(p, f"{SAMPLES}: sample {p.sample_id} not found"))
        else:
            plan.todo.append((s, p))
    return plan


def merged(plan: JudgePlan[R], *fresh: Sequence[R]) -> list[R]:
    """The records after this invocation: the later record of an (item, run) wins; only the
    (item, run)s that have a prediction."""
    out: dict[tuple[str, int], R] = {}
    for group in (plan.existing, plan.orphans, *fresh):
        for r in group:
            out[(r.sample_id, r.run_index)] = r  # type: ignore[attr-defined]
    return [r for k, r in out.items() if k in plan.keys]
