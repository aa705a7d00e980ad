"""Execute: requests -> completions through an adapter, the same way for every caller (`cafe
run`, doctor, the training difficulty filter, the smoke run's format check).

- ``call_adapter`` (cafe.adapters.base, beside the contract it calls): one generate() call; an
  async generate runs on its own event loop, and an exception or a wrong count becomes a
  per-item error instead of losing the batch.
- ``CachedAdapter``: the call cache as a wrapper with the adapter's own contract.
- ``generate``: both for a plain list of requests, in batches on the one executor
  (cafe.execution.execute: C threads, at most two batches per thread in flight), as `cafe run`
  makes its calls."""

from __future__ import annotations

import threading
from typing import Any

from cafe import cache as cache_mod
from cafe.adapters.base import call_adapter
from cafe.audio import file_sha256
from cafe.records import Completion, RecordError, Request


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
        self, adapter: Any, cache: cache_mod.Cache, identity: dict[str, Any], log: Any = None,
        folder: str | None = None,
    ):  # fmt: skip
        self.adapter = adapter
        self.cache = cache
        self.identity = identity
        self.log = log
        #: the run folder paying for the calls: an entry it paid for whose record a kill lost
        #: counts as its call again when replayed (the server answered it once, for it)
        self.folder = folder
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
            paid = hit.pop(PAID_BY, None) if isinstance(hit, dict) else None
            c = Completion.from_dict({**hit, "sample_id": r.sample_id, "run_index": r.run_index})
            mine = self.folder is not None and paid == self._paid(r)
            # this folder's own call whose record was lost: counted as its call, tokens and all
            c.backend = {**c.backend, "recovered" if mine else "cached": True}
            out[i] = c
        if misses:
            fresh = self._call([requests[i] for i, _ in misses])
            for (i, key), c in zip(misses, fresh, strict=True):
                c = _checked(c)
                if not c.error and c.text:
                    paid = {PAID_BY: self._paid(requests[i])} if self.folder else {}
                    self.cache.put(key, {**c.to_dict(), **paid})
                out[i] = c
        return out  # type: ignore[return-value]

    def _paid(self, r: Request) -> list[Any]:
        return [self.folder, r.sample_id, r.run_index]


#: a cache entry's field naming the (run folder, item, run) whose call made it
PAID_BY = "paid_by"


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
        if isinstance(entry, dict) and PAID_BY in entry:
            entry = {k: v for k, v in entry.items() if k != PAID_BY}
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
    from cafe.execution import execute, run_sync

    target: Any = adapter
    if cache is not None and cache.path is not None:
        if identity is None:
            raise ValueError("generate(cache=...) needs identity=RunSpec.call_identity()")
        target = CachedAdapter(adapter, cache, identity)

    def work(batch: list[Request]) -> list[Completion]:
        return call_adapter(target, batch) if target is adapter else target.generate(batch)

    def failed(r: Request, why: str) -> Completion:
        return Completion(r.sample_id, r.run_index, None, error=why)

    return run_sync(execute(
        requests, work, failed, _Discard(), threads=True,
        batch_size=batch_size or getattr(adapter, "default_batch_size", 1),
        concurrency=concurrency or getattr(adapter, "default_concurrency", 1),
        progress=progress, desc=desc,
    ))  # fmt: skip


class _Discard:
    """No records file: the completions are returned."""

    def write_many(self, records: Any) -> None:
        pass
