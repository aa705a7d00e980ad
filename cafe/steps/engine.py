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
from types import SimpleNamespace
from typing import Any

from cafe.clients.breaker import ServerUnreachable
from cafe.clients.calls import call_plan
from cafe.counters import add, judge_counters, on_disk_counters, share_totals, with_share
from cafe.execution import (
    CallCache,
    Selection,
    cached_call,
    execute,
    pending_calls,
    resume,
    run_sync,
    share_records,
    write_costs,
)
from cafe.folder.sections import SectionInfo, register_section, removed_notes, sections
from cafe.folder.status import StepStatus, require_usable
from cafe.folder.view import read_view
from cafe.jsontext import strict_dumps
from cafe.locking import folder_lock
from cafe.records import RecordError
from cafe.redaction import scrub_text
from cafe.reporting import note
from cafe.steps.base import (
    Calls,
    Context,
    Invocation,
    Output,
    Setup,
    Step,
    StepRecord,
    concurrency_default,
    spec_of,
)
from cafe.steps.plugins import compute_metrics
from cafe.store import RunStore, judge_records_name, latest_records, replace_file, rewrite_jsonl

#: the writer of a step whose records live in its section only (and of a dry run)
_DISCARD = SimpleNamespace(write_many=lambda records: None)


@dataclass
class StepResult:
    section: dict[str, Any]
    status: StepStatus
    records: list[StepRecord] = field(default_factory=list)


def run_step(step: Step, run_dir: str | Path, **given: Any) -> StepResult:
    """Run ``step`` on a run folder -> its section, also written to metrics.json. ``given``:
    its declared options and how its calls are made (cafe.steps.base.Calls: ``cache``, a Cache,
    its path, or None for $CAFE_CACHE/steps.sqlite, judge.sqlite for a step whose judge caches
    its calls; ``concurrency``; ``progress``; ``limit``, only the first N (item, run)s of its
    plan, the section saying it is partial; servers, batch, dry run...). Raises NothingUsable
    (nothing written) when it produced nothing usable; re-running resumes (and replays
    finished calls from the cache)."""
    calls, options = Calls.split(given, step.options)
    if calls.concurrency is None:
        calls = replace(calls, concurrency=concurrency_default(step))
    w, info = step.writes, sections().get(step.writes.name)  # a plugin's (refused: cafe's own)
    if info is None or not info.builtin or f"cafe {step.name}" not in info.owner.split(" / "):
        register_section(SectionInfo(w.name, f"cafe {step.name}", tuple(w.derives_from),
                                     tuple(w.higher_is_better), tuple(w.lower_is_better),
                                     builtin=False))  # fmt: skip
    store = RunStore(run_dir)
    rec = step.records
    # a dry run writes nothing: it does not take the lock
    with nullcontext() if calls.dry_run else folder_lock(store.root, f"cafe {step.name}"):
        view = read_view(store, rec.reads if rec else ())
        if step.writes.needs_samples and not view.samples:
            store.samples()  # the one-line error: no samples.jsonl, and how to get it
        # the one place the call cache is opened (and the call plan a judge caching each call takes)
        by_call = rec is not None and rec.caches == "calls"
        cache = CallCache(calls.cache, "judge.sqlite" if by_call else "steps.sqlite")
        plan = None
        if by_call:
            plan = call_plan(view.root, batch=calls.batch, dry_run=calls.dry_run,
                             prices=calls.prices, batch_options=calls.batch_options)  # fmt: skip
        ctx = Context(view, spec_of(step, options), calls, cache, plan)
        setup = step.setup(ctx)
        ctx = replace(ctx, spec=setup.spec, state=setup.state)
        if step.variants is not None:  # the runs beside it, made once (cafe.steps.variants)
            from cafe.steps.variants import variant_views

            ctx = replace(ctx, variants=variant_views(store.root, step.variants(ctx), calls.runs))
        records, planned_all = [], 0
        makes_calls = rec is not None and setup.calls
        if makes_calls or calls.dry_run:  # a dry run plans and counts: nothing sent or written
            records, ctx, planned_all = _execute(step, store, ctx, setup)
        if calls.dry_run:
            return _dry_report(ctx)
        if ctx.plan is not None:  # what the calls cost, whatever comes next
            ctx = replace(ctx, costs=write_costs(store, ctx.plan, ctx.cache.hits))
        pending = pending_calls(ctx.plan) if rec is not None and rec.holds else 0
        if pending:  # no results yet: the section as it would be, not written
            return _held(step, ctx, records, pending)
        status = step.status(ctx, records)
        whole, limit = status, calls.limit
        if limit is not None and status.status != "failed" and planned_all > limit:
            why = f"--limit {limit}: {limit} of {planned_all} (item, run)s"  # partial, saying so
            reason = f"{status.reason}; {why}" if status.reason else why
            status = StepStatus("partial", status.total, status.usable, reason)
        require_usable(f"cafe {step.name}", status, str(store.root))  # nothing written then
        if makes_calls and rec.current:  # the run's current records: this step's, now usable
            rewrite_jsonl(store.path(rec.current), records)
            store.invalidate(changed=(Path(rec.current).stem,))  # what the earlier ones fed goes
            ctx = replace(ctx, view=replace(view, metrics=store.read_metrics()))
        out = _section(step, ctx, records, makes_calls, status)
        if status is not whole:  # cut by --limit: said in every section, whatever its shape
            out.section["outcome"] = status.to_dict()
        for name, rows in out.files.items():  # one transaction: a kill never tears it
            text = "".join(strict_dumps(r, ensure_ascii=False) + "\n" for r in rows)
            replace_file(store.path(name), lambda f, text=text: f.write(scrub_text(text)))
        for name, section in {step.writes.name: out.section, **out.more}.items():
            store.update_metrics(name, section)  # stamped with its inputs
        # sections derived from this one go, said as `cafe run` says it: never lost silently
        if gone := store.invalidate():
            for line in removed_notes(store, gone):
                note(line)
        if makes_calls and rec.current:
            compute_metrics(store.root)  # registered metrics derive from the current records
    return StepResult(out.section, status, records)


def _dry_report(ctx: Context) -> StepResult:
    """A dry run's report: what is left under this spec, its calls counted by the call plan."""
    made, sel = ctx.made, ctx.made.selection
    status = StepStatus("partial", len(sel.todo), 0, "dry run: nothing sent")
    if ctx.plan is None:  # a step caching its records whole: its counts
        calls = {k: made.counts[k] for k in ("calls", "cache_hits")}
        return StepResult({**calls, "planned": len(sel.todo), "done_before": made.done_before},
                          status)  # fmt: skip
    selection = sel.report() if sel.decided or sel.copies else None
    return StepResult(ctx.plan.dry_report(len(sel.todo), made.done_before, ctx.cache.hits,
                                          selection=selection), status)  # fmt: skip


def _held(step: Step, ctx: Context, records: list[Any], pending: int) -> StepResult:
    noun = step.records.noun
    note(
        f"{pending} {noun} still pending in a batch (or cancelled there): "
        f"{step.writes.name} left as it was; run the same command again to collect"
    )
    out = _section(step, ctx, records, True)
    held = StepStatus("partial", len(records), 0, f"{pending} {noun} pending")
    return StepResult({**out.section, "pending": pending}, held, records)


def _section(
    step: Step, ctx: Context, records: list[Any], counted: bool, status: StepStatus | None = None
) -> Output:
    """The step's section with its outcome, and, for a step making calls, its spec and its
    counters over every invocation under that spec (calls, cache hits, records, cost)."""
    made = step.section(ctx, records)
    out = made if isinstance(made, Output) else Output(made)
    section = out.section = dict(out.section)
    if status is not None and step.writes.outcome:
        section["outcome"] = status.to_dict()
    if counted:
        rec, c, ours = step.records, ctx.made.counts, ctx.made.asked
        done, replies = rec.counted
        section["spec"] = ctx.spec
        now = {"calls": c.get("calls", 0), "cache_hits": c.get("cache_hits", 0),
               done: len(ours), replies: rec.replies(ours)}  # fmt: skip
        if ctx.costs and "total_cost_usd" in ctx.costs:
            now["cost_usd"] = ctx.costs["total_cost_usd"]
        previous = ctx.view.metrics.get(step.writes.name)
        if not rec.in_section:  # the totals: those of the records on disk, kill or not
            disk = {**share_totals(records), done: len(records), replies: rec.replies(records)}
            section["counters"] = on_disk_counters(previous, ctx.spec, now, disk)
        else:  # its records live in the section only: each invocation's counts add up
            section["counters"] = judge_counters(previous, ctx.spec, now)
    return out


def _execute(
    step: Step, store: RunStore, ctx: Context, setup: Setup
) -> tuple[list[Any], Context, int]:
    """Resume, plan, call (cached), append, compact -> (the records, the context with this
    invocation, the (item, run)s its plan holds); a dry run writes nothing."""
    rec, view, dry = step.records, ctx.view, ctx.calls.dry_run
    if not view.samples:
        store.samples()  # the one-line error: no samples.jsonl, and how to get it
    path, kept = None, []
    if not rec.in_section:  # the one resume, with the step's declarations
        path = store.path(judge_records_name(rec.file, setup.identity) if setup.identity
                          else f"{rec.file}.jsonl")  # fmt: skip
        kept = resume(path, ctx.spec, lambda p: latest_records(p, rec.cls), write=not dry,
                      legacy_ok=setup.keep, normalize=setup.normalize, spec_name=rec.spec_name,
                      redone=rec.redone)  # fmt: skip
    # what is left under this spec (a failed record is made again) of the plan's first
    # ``limit`` (item, run)s (None: all); those it settled without a call are records here
    cls, limit = rec.cls, ctx.calls.limit
    done = {(r.sample_id, r.run_index) for r in kept if r.status != "failed"}
    plan = step.plan(ctx)
    sel = plan if isinstance(plan, Selection) else Selection(list(plan))
    order = [*sel.todo, *sel.decided, *sel.copies]
    left = {_key(cls, x) for x in order[:limit]} - done
    todo = [x for x in sel.todo if _key(cls, x) in left]
    planned = [x for x in todo if isinstance(x, cls)]
    todo = [x for x in todo if not isinstance(x, cls)]
    decided = [x for x in sel.decided if _key(cls, x) in left]
    sel = Selection(todo, decided, {k: v for k, v in sel.copies.items() if k in left})
    call, counts = _cached_call(step, ctx)
    # items in flight: the calls' bound, lifted for a batch (it collects every call waiting)
    bound = int(ctx.calls.concurrency or 1)
    bound = ctx.plan.item_concurrency(bound) if ctx.plan is not None else bound
    t0 = time.perf_counter()
    with store.writer(path.name) if path and not dry else nullcontext(_DISCARD) as writer:
        writer.write_many([*planned, *sel.decided])  # records made without a call, first
        called = run_sync(execute(sel.todo, call, lambda it, why: _failed(ctx, it, why), writer,
                                  concurrency=bound, desc=f"cafe {step.name}",
                                  progress=ctx.calls.progress and not dry,
                                  aclose=_own(ctx, "aclose")))  # fmt: skip
        shared = share_records(sel, [*called, *kept])  # the (item, run)s that shared a call
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
    if path and not dry:
        rewrite_jsonl(path, records)  # compacted: one record per (item, run)
    counts.update(done=len(made))
    inv = Invocation(counts, planned, sel, fresh, len(done), time.perf_counter() - t0)
    return records, replace(ctx, made=inv), len(order)


def _key(cls: type, x: Any) -> tuple[str, int]:
    """An (item, run)'s key: a copy's as it is, else its record's or its prediction's."""
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str):
        return x
    p = x if isinstance(x, cls) else getattr(x, "prediction", None) or x[1]
    return p.sample_id, p.run_index


def _own(ctx: Context, name: str) -> Any:
    """The state's method ``name`` (``failed``, ``aclose``), else its judge's, else None."""
    state = ctx.state
    return getattr(state, name, None) or getattr(getattr(state, "judge", None), name, None)


def _failed(ctx: Context, item: Any, why: str) -> Any:
    """The failed record of an item whose call raised (asked again): its judge's or a StepRecord."""
    if (failed := _own(ctx, "failed")) is not None:
        return failed(item, why)
    return StepRecord(*_key(StepRecord, item), "failed", reason=why)


def _cached_call(step: Step, ctx: Context) -> tuple[Any, dict[str, Any]]:
    """The step's call (a sync one on a thread) behind the engine's call cache, and its counts:
    its record whole (key: the step's frozen spec + the item's question, choices and output), or
    each model call its judge makes under the judge's spec (``caches = "calls"``). A call that
    raises is its failed record inside its share of the counters (with_share): its calls count."""
    counts = {"calls": 0, "cache_hits": 0}
    rec = step.records

    async def call(item: Any) -> Any:
        if inspect.iscoroutinefunction(step.call):
            return await step.call(ctx, item)
        return await asyncio.to_thread(step.call, ctx, item)

    def readable(entry: Any) -> bool:
        try:
            return rec.cls.from_dict(entry) is not None
        except RecordError:
            return False

    def entry(r: Any) -> dict[str, Any] | None:  # a failed or unusable one is asked again
        return {k: v for k, v in r.to_dict().items() if k != "call"} if r.status == "ok" else None

    async def guarded(item: Any) -> Any:
        try:
            if rec.caches == "calls":
                return await call(item)
            s, p = (item.sample, item.prediction) if hasattr(item, "prediction") else item
            inputs = {"question": s.question, "choices": s.choices, "output": p.raw_output}
            hit, r = await cached_call(ctx.cache.cache, ctx.spec, inputs, lambda: call(item),
                                       entry=entry, valid=readable)  # fmt: skip
            return rec.cls.from_dict(hit) if r is None else r  # no record: asked again
        except ServerUnreachable:  # a dead server stops the command
            raise
        except Exception as e:  # a bug in one item must not lose the rest
            return _failed(ctx, item, f"{type(e).__name__}: {e}")

    async def counted(item: Any) -> Any:
        r = await with_share(guarded, item)
        for k, n in (getattr(r, "call", None) or {}).items():
            if k in counts:
                counts[k] += n
        return r

    return counted, counts
