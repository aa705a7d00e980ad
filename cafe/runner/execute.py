"""Execute: requests -> completions through an adapter, the same way for every caller (`cafe
run`, doctor, the training difficulty filter, the smoke run's format check).

- ``call_adapter``: one generate() call; an async generate runs on its own event loop, and an
  exception or a wrong count becomes a per-item error instead of losing the batch.
- ``CachedAdapter``: the call cache as a wrapper with the adapter's own contract.
- ``run_batches``: batches on C threads, at most two batches per thread in flight (memory stays
  flat), each finished batch handed to ``on_done`` (the runner makes it durable there).
- ``generate``: all of the above for a plain list of requests."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from cafe import cache as cache_mod
from cafe.audio import file_sha256
from cafe.records import Completion, RecordError, Request

T = TypeVar("T")
R = TypeVar("R")


def call_adapter(adapter: Any, requests: list[Request], log: Any = None) -> list[Completion]:
    """One generate() call. The contract says per-item errors; an exception raised by adapter
    code (a bug, not the weather) becomes a one-line error per item marked as an adapter
    failure (not retried by re-runs), its traceback once in ``log`` (cafe.failures.RunLog)."""
    try:
        completions = adapter.generate(requests)
        if inspect.isawaitable(completions):  # an async generate: one loop per batch
            completions = asyncio.run(completions)  # type: ignore[arg-type]
        if len(completions) != len(requests):
            raise RuntimeError(
                f"adapter returned {len(completions)} completions for {len(requests)}"
            )
        return list(completions)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        reason = f"adapter error: {type(e).__name__}: {first}"
        if log is not None:
            log.exception("generate() raised", e)
            reason += f" (traceback in {log.path})"
        return [
            Completion(r.sample_id, r.run_index, None, error=reason, backend={"failure": "adapter"})
            for r in requests
        ]


def open_cache(enabled: bool) -> cache_mod.Cache:
    """$CAFE_CACHE/calls.sqlite (default ~/.cache/cafe), or a disabled cache."""
    if not enabled:
        return cache_mod.Cache(None)
    return cache_mod.Cache(cache_mod.cache_file("calls.sqlite"))


class CachedAdapter:
    """An adapter behind the call cache: a request whose key is cached costs no model call.
    The key is the run's call identity (``RunSpec.call_identity()``: adapter, its options,
    decoding, prompt, checkpoint fingerprint, seed) plus the request: template hash, messages
    (audio by content hash), generation settings, seed and run index. Failed or empty
    completions are not cached (retried)."""

    def __init__(
        self, adapter: Any, cache: cache_mod.Cache, identity: dict[str, Any], log: Any = None
    ):
        self.adapter = adapter
        self.cache = cache
        self.identity = identity
        self.log = log
        self.sent = 0  # requests handed to the adapter (the cache answered the rest)
        self._sent_lock = threading.Lock()

    def _call(self, requests: list[Request]) -> list[Completion]:
        with self._sent_lock:
            self.sent += len(requests)
        return call_adapter(self.adapter, requests, self.log)

    def key(self, request: Request) -> str:
        def part(p: dict[str, Any]) -> dict[str, Any]:
            if p.get("type") == "audio":
                return {"type": "audio", "sha256": _clip_hash(p.get("path"), self.adapter)}
            return p

        messages = [
            {
                **m,
                "content": [part(p) for p in m["content"]]
                if isinstance(m.get("content"), list)
                else m.get("content"),
            }
            for m in request.messages
        ]
        return cache_mod.make_key(
            kind="generate",
            model=self.identity,
            template_hash=request.template_hash,
            messages=messages,
            generation=request.generation,
            seed=request.seed,
            run_index=request.run_index,
        )

    def generate(self, requests: list[Request]) -> list[Completion]:
        if self.cache.path is None:
            return [_checked(c) for c in self._call(requests)]
        out: list[Completion | None] = [None] * len(requests)
        misses: list[tuple[int, str]] = []
        for i, r in enumerate(requests):
            key = self.key(r)
            hit = self.cache.get(key, _well_formed)
            if hit is None:  # none, or an entry of the wrong shape: asked again, replaced
                misses.append((i, key))
                continue
            c = Completion.from_dict({**hit, "sample_id": r.sample_id, "run_index": r.run_index})
            c.backend = {**c.backend, "cached": True}
            out[i] = c
        if misses:
            fresh = self._call([requests[i] for i, _ in misses])
            for (i, key), c in zip(misses, fresh, strict=True):
                c = _checked(c)
                if not c.error and c.text:
                    self.cache.put(key, c.to_dict())
                out[i] = c
        return out  # type: ignore[return-value]


def _clip_hash(path: str | None, adapter: Any) -> str:
    """A clip's content hash for a cache key; "" for none, or for a missing clip where the
    adapter never reads clips (a chance baseline runs without them)."""
    if not path:
        return ""
    try:
        return file_sha256(path)
    except OSError:
        if getattr(adapter, "reads_audio", True):
            raise
        return ""


def _well_formed(entry: Any) -> bool:
    """A cached completion that reads back as one, with its text a string."""
    try:
        return isinstance(Completion.from_dict(entry).text, str)
    except RecordError:
        return False


def _checked(c: Completion) -> Completion:
    """A completion whose fields have the wrong types (a server's number or object for its
    text) becomes a failed call: a server fault, never cached, retried by the next run."""
    if c.error or c.text is None:
        return c
    try:
        Completion.from_dict(c.to_dict())
        return c
    except RecordError as e:
        why = str(e)
    return Completion(
        c.sample_id, c.run_index, None, error=f"malformed reply from the model's server "
        f"({why}); not cached, retried by the next run",
    )  # fmt: skip


def batches(items: list[T], size: int) -> Iterator[list[T]]:
    size = max(1, size)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def run_batches(
    work: Callable[[list[T]], list[R]],
    items: list[T],
    *,
    batch_size: int,
    concurrency: int,
    on_done: Callable[[list[R]], None] | None = None,
    progress: bool = False,
    desc: str = "",
) -> list[R]:
    """``work`` on batches of ``items`` from ``concurrency`` threads; results in finishing order
    are handed to ``on_done`` and returned in the items' order. An exception from ``work``
    (a --strict stop), from ``on_done`` (a dead server) or Ctrl-C drops the queued batches and
    propagates; what ``on_done`` already took is kept, and after an exception (not Ctrl-C) so
    are the batches that were already running."""
    from tqdm import tqdm

    concurrency = max(1, concurrency)
    bar = tqdm(total=len(items), desc=desc, unit="item", disable=not progress, file=sys.stderr)
    pending = enumerate(batches(items, batch_size))
    results: dict[int, list[R]] = {}
    in_flight: dict[Future[list[R]], int] = {}
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        try:
            while True:
                while len(in_flight) < 2 * concurrency:
                    nxt = next(pending, None)
                    if nxt is None:
                        break
                    in_flight[pool.submit(work, nxt[1])] = nxt[0]
                if not in_flight:
                    break
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    index = in_flight.pop(fut)
                    done = fut.result()
                    results[index] = done
                    if on_done is not None:
                        on_done(done)
                    bar.update(len(done))
        except BaseException as stop:
            for fut in in_flight:
                fut.cancel()
            if on_done is not None and isinstance(stop, Exception):
                _keep_running(in_flight, on_done)
            raise
        finally:
            bar.close()
    return [r for i in sorted(results) for r in results[i]]


def _keep_running(in_flight: dict[Future[Any], int], on_done: Callable[[Any], None]) -> None:
    """Hand the batches that were running when the run stopped to ``on_done`` (each one's
    results are already paid for); their own errors no longer matter."""
    for fut in in_flight:
        if fut.cancelled():
            continue
        try:
            on_done(fut.result())
        except Exception:
            pass


def generate(
    adapter: Any,
    requests: list[Request],
    *,
    batch_size: int | None = None,
    concurrency: int | None = None,
    cache: cache_mod.Cache | None = None,
    identity: dict[str, Any] | None = None,
    progress: bool = False,
    desc: str = "generate",
) -> list[Completion]:
    """Completions for ``requests``, in order, through the same batching, threads, async
    handling and (optional) call cache as `cafe run`. A cache needs ``identity``: the run's
    ``RunSpec.call_identity()`` (an adapter's own identity leaves its options out, and a cache
    keyed by it answers with another configuration's outputs)."""
    target: Any = adapter
    if cache is not None and cache.path is not None:
        if identity is None:
            raise ValueError("generate(cache=...) needs identity=RunSpec.call_identity()")
        target = CachedAdapter(adapter, cache, identity)
    return run_batches(
        lambda batch: call_adapter(target, batch) if target is adapter else target.generate(batch),
        requests,
        batch_size=batch_size or getattr(adapter, "default_batch_size", 1),
        concurrency=concurrency or getattr(adapter, "default_concurrency", 1),
        progress=progress,
        desc=desc,
    )
