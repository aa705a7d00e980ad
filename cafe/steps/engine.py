"""The one engine every step runs on: lock -> view (one read of the folder) -> resume (the
records kept under this spec) -> plan what is missing -> execute through the call cache, records
appended as they finish -> compact -> status by counts (nothing usable raises, nothing
written) -> the section, stamped with its inputs, with the counters -> invalidate what it fed.

Promises kept as the runner's: a kill anywhere loses at most the records in flight (the cache
replays the calls that finished); one writer (the folder lock); every cache key derives from
the step's frozen spec plus the call's inputs; records made under another spec are redone."""

from __future__ import annotations

import asyncio
import inspect
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.counters import add, by_status, judge_counters, on_disk_counters, with_share
from cafe.execution import (
    CallCache,
    Selection,
    execute,
    resume,
    run_sync,
    share_records,
    write_costs,
)
from cafe.folder.sections import SectionInfo, register_section
from cafe.folder.status import StepStatus, require_usable
from cafe.folder.view import View, read_view
from cafe.jsontext import strict_dumps
from cafe.locking import folder_lock
from cafe.records import RecordError
from cafe.reporting import note
from cafe.steps.base import Invocation, Step, StepRecord
from cafe.store import RunStore, latest_records, replace_file, rewrite_jsonl


@dataclass
class StepResult:
    section: dict[str, Any]
    status: StepStatus
    records: list[StepRecord] = field(default_factory=list)


def write_sections(store: RunStore, sections: dict[str, dict[str, Any]]) -> None:
    """Write sections computed from the folder's records, each stamped with its inputs (under
    the folder lock the caller holds; cafe.folder.sections finds what they feed)."""
    for name, section in sections.items():
        store.update_metrics(name, section)


def register_step_section(step: Step) -> None:
    """The step's section in the section registry (a built-in name is refused for a plugin)."""
    from cafe.commands import TABLE  # the one table (cafe.steps.TABLE is made from it)

    ours = any((c.name, c.section) == (step.name, step.section_name) for c in TABLE if c.step)
    if not ours:  # a plugin's: refused when the name is one of cafe's own sections
        register_section(
            SectionInfo(step.section_name, f"cafe {step.name}", tuple(step.derives_from),
                        tuple(step.higher_is_better), tuple(step.lower_is_better),
                        builtin=False)
        )  # fmt: skip


def run_step(
    step: Step,
    run_dir: str | Path,
    *,
    cache: Cache | str | Path | None = None,
    concurrency: int = 8,
    progress: bool = False,
    limit: int | None = None,
    **options: Any,
) -> StepResult:
    """Run ``step`` on a run folder with ``options`` (its declared ones) -> its section, also
    written to metrics.json. ``cache``: the call cache every call of the step goes through (a
    Cache, its path, or None: $CAFE_CACHE/steps.sqlite, judge.sqlite for ``caches = "calls"``).
    Raises NothingUsable (nothing written) when it produced nothing usable; re-running
    resumes (and replays finished calls from the cache). ``limit``: only the first N (item,
    run)s of its plan (try a judge on a few first); the section says it is partial."""
    register_step_section(step)
    store = RunStore(run_dir)
    # a dry run writes nothing: it does not take the lock
    lock = nullcontext() if step.dry_run else folder_lock(store.root, f"cafe {step.name}")
    with lock:
        view = read_view(store, step.reads)
        if step.needs_samples and not view.samples:
            store.samples()  # the one-line error: no samples.jsonl, and how to get it
        step.check(view)  # what the folder lacks is said first, then what the options lack
        # the call cache: opened here only, the step's calls (or its judge's) go through it
        name = "judge.sqlite" if step.caches == "calls" else "steps.sqlite"
        step.call_cache = CallCache(cache, name)
        step.bind(view)
        spec = step.spec(**options)
        records: list[StepRecord] = []
        calls: dict[str, Any] = {}
        planned_all = 0
        records_file = step.records_file(spec)
        makes_calls = bool(records_file) or step.records_in_section
        if step.dry_run:  # plan and count: nothing sent, nothing written
            return _plan_only(step, store, view, spec, records_file, concurrency, limit)
        if makes_calls:
            records, calls, planned_all = _execute(step, store, view, spec, records_file,
                                                   concurrency, progress, limit)  # fmt: skip
        if step.call_plan is not None:  # what the calls cost, whatever comes next
            step.costs = write_costs(store, step.call_plan, step.call_cache.hits)
        pending = step.pending()
        if pending:  # no results yet: the section as it would be, not written
            return _held(step, view, records, spec, calls, pending)
        whole = step.status(view, records)
        status = _limited(whole, planned_all, limit)
        require_usable(step.who(), status, str(store.root))  # nothing written then
        step.commit(store, records)
        view = replace(view, metrics=store.read_metrics())  # as its commit left them
        section = _section(step, view, records, spec, calls if makes_calls else None, status)
        if status is not whole:  # cut by --limit: said in every section, whatever its shape
            section["outcome"] = status.to_dict()
        for name, rows in step.files(view, records).items():
            _write_rows(store, name, rows)
        write_sections(store, {step.section_name: section, **step.more_sections(view, records)})
        gone = store.invalidate()  # a section derived from this one goes (cafe.folder.sections)
        if gone:  # said, as `cafe run` says it: another step's section is never lost silently
            from cafe.folder.sections import removed_notes

            for line in removed_notes(store, gone):
                note(line)
        step.written(store)
    return StepResult(section, status, records)


def _limited(status: StepStatus, planned: int, limit: int | None) -> StepStatus:
    """A step run with --limit over fewer (item, run)s than its plan: partial, saying so."""
    if limit is None or status.status == "failed" or planned <= limit:
        return status
    why = f"--limit {limit}: {limit} of {planned} (item, run)s"
    return StepStatus("partial", status.total, status.usable,
                      f"{status.reason}; {why}" if status.reason else why)  # fmt: skip


def _plan_only(
    step: Step, store: RunStore, view: View, spec: dict[str, Any], records_file: str | None,
    concurrency: int, limit: int | None = None,
) -> StepResult:  # fmt: skip
    """A dry run: what is left under this spec, its calls made through the step's call plan
    (which sends nothing and counts) -> the step's report; no file is written."""
    path = store.path(records_file) if records_file else None
    kept = _resume(step, path, spec, write=False) if path else []
    planned, sel, done, _ = _planned(step, view, spec, kept, limit)
    call, counts = _cached_call(step, spec)
    if step.call_plan is not None:
        concurrency = step.call_plan.item_concurrency(concurrency)
    run_sync(execute(sel.todo, call, step.failed, _Discard(), concurrency=concurrency,
                        desc=f"cafe {step.name}", progress=False, aclose=step.aclose))  # fmt: skip
    counts.update(planned=len(sel.todo), done_before=done)
    step.this_invocation = Invocation(counts, planned, sel, [], done)
    status = StepStatus("partial", len(sel.todo), 0, "dry run: nothing sent")
    return StepResult(step.dry_report(counts), status, [])


def _write_rows(store: RunStore, name: str, rows: list[dict[str, Any]]) -> None:
    """One transaction (cafe.store.replace_file): a kill or a full disk never tears it."""
    from cafe.redaction import scrub_text

    text = "".join(strict_dumps(r, ensure_ascii=False) + "\n" for r in rows)
    replace_file(store.path(name), lambda f: f.write(scrub_text(text)))


def _held(
    step: Step, view: View, records: list[Any], spec: dict[str, Any], calls: dict[str, Any],
    pending: int,
) -> StepResult:  # fmt: skip
    note(
        f"{pending} {step.noun} still pending in a batch (or cancelled there): "
        f"{step.section_name} left as it was; run the same command again to collect"
    )
    section = _section(step, view, records, spec, calls)
    held = StepStatus("partial", len(records), 0, f"{pending} {step.noun} pending")
    return StepResult({**section, "pending": pending}, held, records)


def _section(
    step: Step, view: View, records: list[Any], spec: dict[str, Any],
    calls: dict[str, Any] | None, status: StepStatus | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The step's section with its outcome, and, for a step making calls, its spec and the
    counters over every invocation under that spec."""
    section = dict(step.section(view, records, spec))
    if status is not None and step.outcome_in_section:
        section["outcome"] = status.to_dict()
    if calls is not None:
        section["spec"] = spec
        previous, now = view.metrics.get(step.section_name), step.counters(calls)
        if step.records_file(spec):  # the totals: those of the records on disk, kill or not
            disk = step.disk_counters(records)
            section["counters"] = on_disk_counters(previous, spec, now, disk)
        else:  # its records live in the section only: each invocation's counts add up
            section["counters"] = judge_counters(previous, spec, now)
    return section


def _execute(
    step: Step, store: RunStore, view: View, spec: dict[str, Any], records_file: str | None,
    concurrency: int, progress: bool, limit: int | None = None,
) -> tuple[list[Any], dict[str, Any], int]:  # fmt: skip
    """Resume, plan, call (cached), append, compact -> (the records, this invocation's counts,
    the (item, run)s its plan holds)."""
    if not view.samples:
        store.samples()  # the one-line error: no samples.jsonl, and how to get it
    path = store.path(records_file) if records_file else None
    kept = _resume(step, path, spec) if path else []
    planned, sel, done, planned_all = _planned(step, view, spec, kept, limit)
    call, counts = _cached_call(step, spec)
    if step.call_plan is not None:  # a batch collects every call waiting: the bound lifts
        concurrency = step.call_plan.item_concurrency(concurrency)
    t0 = time.perf_counter()
    with store.writer(path.name) if path else nullcontext(_Discard()) as writer:
        writer.write_many([*planned, *sel.decided])  # records made without a call, first
        called = run_sync(execute(sel.todo, call, step.failed, writer,
                                     concurrency=concurrency, desc=f"cafe {step.name}",
                                     progress=progress, aclose=step.aclose))  # fmt: skip
        shared = share_records(sel, called)  # the (item, run)s that shared a call: copies
        writer.write_many(shared)
    fresh = [*called, *sel.decided, *shared]
    made = [*planned, *fresh]  # this invocation's records, in the order they are compacted
    keys = {(p.sample_id, p.run_index) for p in view.predictions}
    merged: dict[tuple[str, int], Any] = {}
    for r in [*kept, *made]:  # a redone record carries the share of the one it replaces
        old = merged.get((r.sample_id, r.run_index))
        if getattr(old, "call", None) and isinstance(getattr(r, "call", None), dict):
            r.call = add(old.call, r.call)
        merged[(r.sample_id, r.run_index)] = r
    records = [r for k, r in merged.items() if k in keys]
    if path:
        rewrite_jsonl(path, records)  # compacted: one record per (item, run)
    counts.update(done=len(made), records=by_status([r.status for r in made]))
    step.this_invocation = Invocation(counts, planned, sel, fresh, done,
                                      time.perf_counter() - t0)  # fmt: skip
    return records, counts, planned_all


def _resume(step: Step, path: Path, spec: dict[str, Any], write: bool = True) -> list[Any]:
    """The records ``path`` keeps under this spec: cafe.execution.resume, the one resume, with
    the step's declarations (another spec's records are redone; a file from before specs
    keeps those its ``legacy_ok`` accepts; a stored spec is read by its ``normalize_spec``)."""
    return resume(path, spec, lambda p: latest_records(p, step.record_cls), write=write,
                  legacy_ok=step.legacy_ok, normalize=step.normalize_spec,
                  spec_name=step.spec_name, redone=step.redone)  # fmt: skip


def _planned(
    step: Step, view: View, spec: dict[str, Any], kept: list[Any], limit: int | None = None
) -> tuple[list[Any], Selection, int, int]:
    """What is left under this spec (a failed record is made again) of the first ``limit``
    (item, run)s of the plan (None: all) -> (the records the plan made without a call, the
    step's selection of the items to call, how many were done, how many the plan holds)."""
    done = {(r.sample_id, r.run_index) for r in kept if r.status != "failed"}
    plan = step.plan(view, spec)
    left = [x for x in plan[:limit] if _key(step, x) not in done]
    planned = [x for x in left if isinstance(x, step.record_cls)]
    items = [x for x in left if not isinstance(x, step.record_cls)]
    return planned, step.select(items), len(done), len(plan)


def _key(step: Step, x: Any) -> tuple[str, int]:
    if isinstance(x, step.record_cls):  # a record the plan made
        return x.sample_id, x.run_index
    return step.key(x)


class _Discard:
    """The writer of a step whose records live in its section only."""

    def write_many(self, records: Any) -> None:
        pass


def _cached_call(step: Step, spec: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The step's call behind the engine's call cache (``step.call_cache``) and its counts: its
    record whole (key: the step's frozen spec + the call's inputs; only a usable record is
    kept, so a failed or unusable reply is asked again), or each model call its judge makes
    through the same cache under the judge's spec (``caches = "calls"``)."""
    counts = {"calls": 0, "cache_hits": 0}
    if step.caches == "calls":
        shared = _sharing(step, lambda item: _call(step, item, spec))

        async def direct(item: Any) -> Any:  # the counts: what its judge's calls shared
            rec = await shared(item)
            share = getattr(rec, "call", None) or {}
            for k in counts:
                counts[k] += share.get(k, 0)
            return rec

        return direct, counts

    def readable(entry: Any) -> bool:
        try:
            step.record_cls.from_dict(entry)
            return True
        except RecordError:
            return False

    def entry(rec: Any) -> dict[str, Any] | None:  # only a usable record is kept
        if rec.status != "ok":
            return None
        return {k: v for k, v in rec.to_dict().items() if k != "call"}

    async def cached(item: Any) -> Any:
        hit, rec = await step.call_cache.ask(spec, step.call_inputs(item, spec),
                                             lambda: _call(step, item, spec), entry=entry,
                                             valid=readable)  # fmt: skip
        if rec is None:  # one that is no record was a miss, asked again, replaced
            counts["cache_hits"] += 1
            return step.record_cls.from_dict(hit)
        counts["calls"] += 1
        return rec

    return _sharing(step, cached), counts


async def _call(step: Step, item: Any, spec: dict[str, Any]) -> Any:
    """The step's call, which may be async; a sync one runs in a thread."""
    if inspect.iscoroutinefunction(step.call):
        return await step.call(item, spec)
    return await asyncio.to_thread(step.call, item, spec)


def _sharing(step: Step, call: Any) -> Any:
    """``call`` whose record carries its share of the counters (cafe.counters.with_share); a
    call that raises is its ``failed`` record here (as cafe.execution.execute would make
    it), so the calls it made are counted too."""
    from cafe.clients.breaker import ServerUnreachable

    async def guarded(item: Any) -> Any:
        try:
            return await call(item)
        except ServerUnreachable:  # a dead server stops the command
            raise
        except Exception as e:  # a bug in one item must not lose the rest
            return step.failed(item, f"{type(e).__name__}: {e}")

    return lambda item: with_share(guarded, item)
