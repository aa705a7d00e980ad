"""The one executor of calls (``execute``: `cafe run`'s batches of model calls on threads, every
step of cafe.steps.engine, captions; ``run_sync`` from synchronous code), the one resume
(``resume``), the one cached call (``cached_call``) and the calls' cost into the manifest."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from cafe.cache import Cache, cache_file, make_key
from cafe.clients.breaker import ServerUnreachable
from cafe.clients.common import Limiter
from cafe.clients.costs import merge_summaries
from cafe.counters import count_share
from cafe.reporting import note
from cafe.store import rewrite_jsonl, write_json_atomic

FLUSH_EVERY = 32
R = TypeVar("R")
T = TypeVar("T")


async def execute(
    items: Sequence[T], call: Callable[[Any], Any], failed: Callable[[T, str], R], writer: Any,
    *, concurrency: int, desc: str, progress: bool,
    aclose: Callable[[], Awaitable[None]] | None = None, flush_every: int | None = None,
    batch_size: int | None = None, fatal: tuple[type[BaseException], ...] = (),
    threads: bool = False,
) -> list[R]:  # fmt: skip
    """``call`` on every item, at most ``concurrency`` in flight, records written as they come
    -> the records in the items' order. An exception in one call is its items' ``failed(item,
    reason)`` records; ServerUnreachable or a ``fatal`` exception ends the command with what
    finished kept. ``threads``: ``call`` is synchronous (a model's generate) and runs on one of
    ``concurrency`` threads, one more call queued per thread (a thread never waits while the
    records are written). ``batch_size``: ``call`` gets lists of items and returns their
    records in order. ``aclose`` runs at the end whatever happens."""
    from tqdm import tqdm

    pool = ThreadPoolExecutor(max(1, concurrency), "cafe-call") if threads else None
    sem = Limiter(2 * concurrency if threads else concurrency)
    size = batch_size or 1  # every unit a list of items, its result a list of records
    units = [list(items[i : i + size]) for i in range(0, len(items), size)]
    # calls sent: on a thread (its future), or on this loop (None); a stop lets them finish
    running: dict[asyncio.Future[Any], Future[Any] | None] = {}
    stopped: list[BaseException] = []  # a stop seen by a call: no call waiting starts after it

    async def one(n: int, unit: list[Any]) -> tuple[int, list[Any]]:
        async with sem:
            if stopped:
                raise _Stopped from None
            try:
                arg = unit if batch_size else unit[0]
                # on a thread with the item's context (its counter share), as to_thread's
                on_thread = pool.submit(contextvars.copy_context().run, call, arg) if pool else None
                running[asyncio.current_task()] = on_thread  # type: ignore[index]
                got = await (call(arg) if on_thread is None else asyncio.wrap_future(on_thread))
                return n, got if batch_size else [got]
            except (ServerUnreachable, *fatal) as stop:  # the end of the command
                stopped.append(stop)
                raise
            except Exception as e:  # a bug in one item must not lose the rest
                why = f"{type(e).__name__}: {e}"
                return n, [failed(i, why) for i in unit]

    tasks = [asyncio.ensure_future(one(n, u)) for n, u in enumerate(units)]
    bar = tqdm(total=len(items), desc=desc, unit="item", disable=not progress)
    try:
        done = await _write_as_completed(tasks, writer, running, bar, flush_every or FLUSH_EVERY)
    finally:
        bar.close()
        for t in tasks:  # Ctrl-C: nothing left behind on the loop
            t.cancel()
        if pool is not None:  # the running calls finish (no thread can be stopped)
            pool.shutdown(wait=True, cancel_futures=True)
        if aclose is not None:
            await aclose()
    return [r for _, rs in sorted(done, key=lambda d: d[0]) for r in rs]


async def _write_as_completed(
    tasks: Sequence[asyncio.Future[Any]], writer: Any,
    running: Mapping[asyncio.Future[Any], Future[Any] | None], bar: Any, flush_every: int,
) -> list[tuple[int, list[Any]]]:  # fmt: skip
    """Await ``tasks`` ((index, records) each) as they finish, writing their records in
    fsynced batches (a kill loses at most one, which the call cache replays for free) -> the
    pairs as they came. On a stop the buffer is written, the calls not yet sent are cancelled
    and those sent (``running``: on this loop or a thread) are paid for, so they finish and
    their records are written; a second Ctrl-C ends that wait."""
    done: list[tuple[int, list[Any]]] = []
    buffer: list[Any] = []

    def flush() -> None:
        nonlocal buffer
        ready, buffer = buffer, []  # handed over: a writer that raises owns it
        if ready:
            writer.write_many(ready)

    try:
        for fut in asyncio.as_completed(tasks):
            i, records = await fut
            buffer.extend(records)
            done.append((i, records))
            if len(buffer) >= flush_every:
                flush()
            bar.update(len(records))
        flush()
    except (Exception, KeyboardInterrupt, asyncio.CancelledError) as stop:  # a cancel: Ctrl-C
        flush()
        taken = {i for i, _ in done}
        left = [t for i, t in enumerate(tasks) if i not in taken]
        for t in left:
            if t not in running:
                t.cancel()  # a finished one keeps its result
            elif (on_thread := running[t]) is not None:
                on_thread.cancel()  # only if it has not started
        kept = sum(len(r) for _, r in done)
        for got in await asyncio.gather(*left, return_exceptions=True):
            if not isinstance(got, BaseException):
                with contextlib.suppress(Exception):  # the stop already said what went wrong
                    writer.write_many(got[1])
                    kept += len(got[1])
        if isinstance(stop, ServerUnreachable):
            raise stop.stopped(f"{kept} records of this run kept") from None
        raise
    return done


class _Stopped(Exception):
    """A call that was waiting when another stopped the command: never started."""


def honour_interrupts() -> Callable[[], None]:
    """Make SIGINT raise KeyboardInterrupt whatever disposition it inherited (a shell starts
    background jobs with SIGINT ignored: `kill -INT` must still stop cafe) -> the undo. A
    handler of the program's own (a notebook kernel's) is kept."""
    old = signal.getsignal(signal.SIGINT)
    if callable(old) or threading.current_thread() is not threading.main_thread():
        return lambda: None
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGINT, old)


def run_sync(coro: Coroutine[Any, Any, R]) -> R:
    """Run ``coro`` from synchronous code on a loop of its own (on a helper thread where this
    thread runs one: a notebook). An interrupt (Ctrl-C, `kill -INT`, the notebook's stop
    button) cancels it and is raised once it has wound down."""
    restore = honour_interrupts()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            return asyncio.run(coro)
        finally:
            restore()
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    lock, stop = threading.Lock(), threading.Event()

    async def main() -> R:
        with lock:  # an interrupt that came before the work began cancels it at once
            started.append((asyncio.get_running_loop(), asyncio.current_task()))  # type: ignore[arg-type]
            if stop.is_set():
                asyncio.current_task().cancel()  # type: ignore[union-attr]
        return await coro

    done: Future[R] = Future()  # not Thread.join: an interrupted join marks it stopped

    def helper() -> None:
        try:
            done.set_result(asyncio.run(main()))
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            done.set_exception(e)

    thread = threading.Thread(target=helper, name="cafe-loop", daemon=True)
    try:
        thread.start()
        wait([done])
    except KeyboardInterrupt:  # may come while the thread is still starting
        with lock:
            stop.set()
            for loop, task in started:
                with contextlib.suppress(RuntimeError):  # its loop has closed: the work is over
                    loop.call_soon_threadsafe(task.cancel)
        if thread.ident is not None:
            wait([done])  # the calls wind down (what a writer took stays written)
        raise
    finally:
        restore()
    return done.result()


@dataclass
class Selection:
    """Which items left to do are called (``todo``); ``decided``: records made without a call;
    ``copies``: (item, run) -> the (item, run) whose record it shares (the same prompt:
    cafe.judge.batching), copied after the calls (``share_records``)."""

    todo: list[Any]
    decided: list[Any] = field(default_factory=list)
    copies: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def report(self, n_items: int | None = None) -> dict[str, Any]:
        made_from = len(self.todo) + len(self.decided) + len(self.copies)
        return {"items": made_from if n_items is None else n_items, "judged": len(self.todo),
                "shared_same_prompt": len(self.copies),
                "decided_without_call": len(self.decided)}  # fmt: skip


def share_records(sel: Selection, called: Sequence[Any]) -> list[Any]:
    """A copy of the representative's record for every (item, run) that shared its call."""
    by_key = {(r.sample_id, r.run_index): r for r in called}
    out = []
    for (sid, run), src in sel.copies.items():
        if (r := by_key.get(src)) is None:
            continue
        shared = f"shared: same judge prompt as {src[0]} run {src[1]}"
        reason = f"{r.reason}; {shared}" if r.reason else shared
        # made without a call (``call={}``): the representative's record counts it
        out.append(replace(r, sample_id=sid, run_index=run, reason=reason, call={}))
    return out


def call_key(spec: Any, inputs: Mapping[str, Any]) -> str:
    """One call's cache key: a step's dict spec as ``step=spec, inputs=inputs``; a judge's
    JudgeSpec through its ``call_key``. The keys cafe has always written: caches keep hitting."""
    if isinstance(spec, Mapping):
        return make_key(step=dict(spec), inputs=dict(inputs))
    return str(spec.call_key(**inputs))


async def cached_call(
    cache: Any, spec: Any, inputs: Mapping[str, Any], ask: Callable[[], Awaitable[R]], *,
    entry: Callable[[R], Any], valid: Callable[[Any], bool] | None = None,
) -> tuple[Any, R | None]:  # fmt: skip
    """(entry, None) from the cache when it holds one ``valid`` accepts (a damaged one is a
    miss); else ``ask()`` once -> (``entry(result)``, result), the entry stored unless None (a
    failed or unusable reply: the next invocation asks again)."""
    key = call_key(spec, inputs)
    hit = cache.get(key, valid)
    if hit is not None:
        return hit, None
    count_share("calls")
    result = await ask()
    stored = entry(result)
    if stored is not None:
        cache.put(key, stored)
    return stored, result


class CallCache:
    """The engine's call cache, handed to every hook as ``ctx.cache`` (``cache``: a Cache, its
    path, or None for ``$CAFE_CACHE/<name>``), opened on first use, so a step whose calls cache
    nothing opens no file."""

    def __init__(self, cache: Any, name: str) -> None:
        self._given, self._name = cache, name

    @functools.cached_property
    def cache(self) -> Any:
        if isinstance(self._given, Cache):
            return self._given
        return Cache(self._given if self._given is not None else cache_file(self._name))

    @property
    def hits(self) -> int:
        return self.cache.hits if "cache" in vars(self) else 0  # 0 while never opened


def run_calls(calls: Sequence[Awaitable[R]]) -> list[R]:
    """Await ``calls`` (the data pipeline's LLM stages: each stage's caller bounds its calls in
    flight) on one loop from synchronous code -> the results in order; the first error ends it."""

    async def every() -> list[R]:
        return list(await asyncio.gather(*calls))

    return run_sync(every())


def spec_file(records: Path) -> Path:
    """Where the spec of a records file is kept: ``<file>.spec.json`` beside it."""
    return records.with_name(records.name.removesuffix(".jsonl") + ".spec.json")


def resume(
    path: Path, spec: Mapping[str, Any], read: Callable[[Path], Sequence[R]], *,
    write: bool = True, legacy_ok: Callable[[R], bool] | None = None,
    normalize: Callable[[Any], Mapping[str, Any] | None] | None = None,
    spec_name: str = "spec", redone: str = "made again",
) -> list[R]:  # fmt: skip
    """The records of ``path`` made under ``spec``, which is stored beside them (``spec_file``).
    Another stored spec keeps none (a note names the differing fields), and the file is emptied
    before the new spec is written, so a kill in between never leaves old records under the new
    spec. No stored spec (a folder from before specs): those ``legacy_ok`` accepts are kept.
    ``normalize`` reads a stored spec (None: damaged or foreign). ``write=False``: a dry run."""
    where = spec_file(path)
    try:
        stored = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    if stored is not None and normalize is not None:
        stored = normalize(stored)
    kept = list(read(path)) if path.exists() else []
    if stored is None and not where.exists() and legacy_ok is not None:
        kept = [r for r in kept if legacy_ok(r)]
    elif stored != spec:
        if kept and write:
            said = "unreadable"
            if isinstance(stored, Mapping):
                diff = [k for k in dict.fromkeys([*spec, *stored]) if stored.get(k) != spec.get(k)]
                said = "; ".join(f"{k}: {stored.get(k)!r} then, {spec.get(k)!r} now" for k in diff)
            note(
                f"note: {path.name} was made under another {spec_name} ({said}): its "
                f"{len(kept)} records are {redone} (calls the two share replay from the cache)"
            )
            rewrite_jsonl(path, [])
        kept = []
    if stored != spec and write:
        write_json_atomic(where, dict(spec))
    return kept


def pending_calls(plan: Any) -> int:
    """Calls a plan's batches still hold (left running by --batch-no-wait, or cancelled at the
    service): no results yet, so not a failure: the same command again collects them."""
    if plan is None:
        return 0
    return sum(int(s.get("left_pending", 0)) + int(s.get("cancelled_items", 0))
               for s in plan.batch_stats().values())  # fmt: skip


def write_costs(store: Any, plan: Any, cache_hits: int) -> dict[str, Any] | None:
    """This invocation's ledger (plus cache hits and batch counts), added into the manifest's
    ``costs`` -> the invocation's own summary."""
    batches = plan.batch_stats()
    if plan.ledger is None or not (plan.ledger.tallies or batches):
        return None  # nothing was sent (rule judge, all cached): the manifest stays as it was
    mine = {**plan.ledger.summary(), "cache_hits": cache_hits}
    if batches:
        mine["batches"] = batches
    if not store.has_manifest():
        return mine

    def add(manifest: dict[str, Any]) -> None:  # under the folder's lock: no cost is lost
        old = manifest.get("costs")
        total = merge_summaries(old, plan.ledger.summary())
        total["cache_hits"] = (old or {}).get("cache_hits", 0) + cache_hits
        manifest["costs"] = total

    store.update_manifest(add)
    return mine
