"""The judge side in stages, shared by every judge of a run folder's (item, run)s (the CAFE judge,
the cue judge, the rubric judge), as the runner is: plan -> execute -> store. Each judge brings
only its calls (``ajudge`` / ``ascore``), its failed record and its metrics section.

- ``plan_judging``: what is pending, from the predictions and the records the judge's spec may
  keep (cafe.judge.spec.resume_records: another spec's records are redone); a prediction whose
  sample is gone becomes a failed record, never a crash.
- ``execute``: at most ``concurrency`` calls in flight; each record appended as it finishes, in
  fsynced batches of FLUSH_EVERY (a kill loses at most one batch, which the call cache then
  replays for free); an exception in one item becomes that item's failed record.
- ``merged``: the judge's records after this invocation, one per (item, run) with a prediction
  (what the caller compacts the file to)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from cafe.judge.spec import JudgeSpec, resume_records
from cafe.records import Prediction, Sample
from cafe.store import SAMPLES

FLUSH_EVERY = 32
R = TypeVar("R")
T = TypeVar("T")


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


async def write_as_completed(
    coros: Sequence[Awaitable[Any]], writer: Any, desc: str, progress: bool
) -> list[Any]:
    """Await judge calls as they finish; append their records in fsynced batches of FLUSH_EVERY
    (a kill loses at most one batch, which the next run judges again). A judge server that
    stops answering (ServerUnreachable) ends it: what finished is written, the error says so."""
    from cafe.clients.breaker import ServerUnreachable

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(coros), desc=desc, unit="item")
    done: list[Any] = []
    buffer: list[Any] = []
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        for fut in asyncio.as_completed(tasks):
            record = await fut
            done.append(record)
            buffer.append(record)
            if len(buffer) >= FLUSH_EVERY:
                writer.write_many(buffer)
                buffer = []
            if bar is not None:
                bar.update(1)
        writer.write_many(buffer)
    except ServerUnreachable as e:
        writer.write_many(buffer)
        for t in tasks:  # the others would only fail the same way
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise e.stopped(f"{len(done)} records of this run kept") from None
    finally:
        if bar is not None:
            bar.close()
    return done


async def execute(
    items: Sequence[T],
    call: Callable[[T], Awaitable[R]],
    failed: Callable[[T, str], R],
    writer: Any,
    *,
    concurrency: int,
    desc: str,
    progress: bool,
    aclose: Callable[[], Awaitable[None]] | None = None,
) -> list[R]:
    """``call`` on every item, at most ``concurrency`` in flight, records written as they come;
    an exception in one item is its ``failed(item, reason)`` record. ``aclose`` (the judge's
    client) runs at the end whatever happens."""
    sem = asyncio.Semaphore(max(1, concurrency))

    from cafe.clients.breaker import ServerUnreachable

    async def one(item: T) -> R:
        async with sem:
            try:
                return await call(item)
            except ServerUnreachable:  # a dead server stops the command (write_as_completed)
                raise
            except Exception as e:  # a bug in one item must not lose the rest
                return failed(item, f"{type(e).__name__}: {e}")

    try:
        return await write_as_completed([one(i) for i in items], writer, desc, progress)
    finally:
        if aclose is not None:
            await aclose()


def merged(plan: JudgePlan[R], *fresh: Sequence[R]) -> list[R]:
    """The records after this invocation: the later record of an (item, run) wins; only the
    (item, run)s that have a prediction."""
    out: dict[tuple[str, int], R] = {}
    for group in (plan.existing, plan.orphans, *fresh):
        for r in group:
            out[(r.sample_id, r.run_index)] = r  # type: ignore[attr-defined]
    return [r for k, r in out.items() if k in plan.keys]
