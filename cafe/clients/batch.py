"""The batch transport: a chat client that, instead of sending each call, writes it as one line of
the service's batch input, submits the lines as a batch, polls it, and answers every waiting
``achat`` from the batch's output. Judges, captioners and any later caller keep calling
``achat`` as they do on the direct path, so replies land in the same cache and records.

    calls arrive ──▶ spool (<sid>.input.jsonl) ──quiet for collect_s──▶ submit ──▶ log "submitted"
         ▲                                                                           │ poll
         └── retryable failures resubmitted (or sent directly) ◀── results ◀────────┘

Every line's ``custom_id`` is a hash of its request body plus the count of earlier calls with
that body in this process: one call is one line (as on the direct path), and a resumed run maps
its calls onto the lines a killed one submitted, so nothing in a batch is submitted again. The
state folder (a run folder's ``batches/<client>/``) holds an append-only ``log.jsonl`` (prepared
→ uploaded → submitted → finished, fsynced, the batch id written the moment the service returns
it, before any polling), each submission's input file and its results: a killed command, run
again, polls the same batches (found by submission id at the service if the kill came between
create and log) and collects finished results without paying twice.

Failed items: a per-line error the service marks retryable (429, 5xx), an item an expired or
failed batch did not reach: resubmitted in a new batch (``retry="resubmit"``, at most
``max_rounds`` submissions) or sent through the direct client (``retry="direct"``). A client
error (4xx) fails that item with its reason. A batch cancelled at the service fails its
unfinished items (the cancel is respected; a re-run submits them anew).

Protocols plug in as ``BatchBackend``s registered per client kind in ``BATCH_BACKENDS``
(cafe.clients.batch_openai, cafe.clients.batch_gemini)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.clients.base import ChatClient, ChatReply
from cafe.clients.common import redact
from cafe.registry import Registry

LOG = "log.jsonl"


@dataclass
class BatchSpec:
    """How a batch client collects, submits and waits."""

    state_dir: Path
    poll_s: float = 30.0  # first wait between status checks; grows x1.5 up to max_poll_s
    max_poll_s: float = 300.0
    collect_s: float = 0.5  # a batch closes when no call arrived for this long
    max_items: int = 50_000  # OpenAI's limit per batch
    max_bytes: int = 180_000_000  # under OpenAI's 200 MB input file
    retry: str = "resubmit"  # resubmit | direct: what retryable failures get
    max_rounds: int = 3  # submissions of one item before it fails
    wait: bool = True  # False: check each batch once; unfinished items fail as "pending"
    inline_max_bytes: int = 10_000_000  # Gemini: smaller batches go inline, larger as a file

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)
        if self.retry not in ("resubmit", "direct"):
            raise ValueError(f"batch retry {self.retry!r}: use resubmit or direct")


@dataclass
class BatchStatus:
    state: str  # the service's own word
    outcome: str | None  # None while running, else completed | expired | cancelled | failed
    message: str = ""


@dataclass
class LineResult:
    custom_id: str
    reply: dict[str, Any] | None = None  # text, usage, finish_reason
    error: str | None = None
    retryable: bool = False
    expired: bool = False  # the batch ended before this line was reached


class BatchBackend(ABC):
    """One service's batch protocol. ``body`` builds the request exactly as the direct client
    would send it; ``line`` wraps it with the custom id in the service's input format."""

    name: str

    @abstractmethod
    def body(
        self,
        messages: list[dict[str, Any]],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]: ...

    @abstractmethod
    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    async def submit(self, path: Path, sid: str, n: int, log: BatchLog) -> str:
        """Upload/create; returns the batch id (write intermediate ids with ``log``)."""

    @abstractmethod
    async def find(self, sid: str) -> str | None:
        """The batch created for submission ``sid``, if the service has one."""

    @abstractmethod
    async def status(self, batch_id: str) -> BatchStatus: ...

    @abstractmethod
    async def results(self, batch_id: str, status: BatchStatus, ids: list[str]) -> list[LineResult]:
        """Every line the batch answered (``ids``: the submitted custom ids, in order)."""

    @abstractmethod
    async def cancel(self, batch_id: str) -> None: ...

    async def aclose(self) -> None:
        pass


BATCH_BACKENDS: Registry[Any] = Registry("batch protocol", entry_point_group="cafe.batch")
for _name, _target in {
    "openai": "cafe.clients.batch_openai:OpenAIBatch",
    "openai-compatible": "cafe.clients.batch_openai:OpenAIBatch",
    "gemini": "cafe.clients.batch_gemini:GeminiBatch",
}.items():
    BATCH_BACKENDS.add_lazy(_name, _target)


def custom_id(line_body: dict[str, Any]) -> str:
    canonical = json.dumps(line_body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "cafe-" + hashlib.sha256(canonical.encode()).hexdigest()[:40]


# -- the state folder -------------------------------------------------------------------------
class BatchLog:
    """Append-only, fsynced event log of one client's submissions, plus their files."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / LOG

    def write(self, **event: Any) -> None:
        event = {"t": round(time.time(), 3), **event}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(redact(json.dumps(event, ensure_ascii=False)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def submissions(self) -> dict[str, dict[str, Any]]:
        """sid -> merged events (a torn last line, from a kill mid-write, is skipped)."""
        out: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            return out
        for raw in self.path.read_text(encoding="utf-8").split("\n"):
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            out.setdefault(ev["sid"], {}).update(ev)
        return out

    def input_path(self, sid: str) -> Path:
        return self.folder / f"{sid}.input.jsonl"

    def results_path(self, sid: str) -> Path:
        return self.folder / f"{sid}.results.jsonl"


def read_ids(path: Path) -> list[str]:
    out = []
    with path.open(encoding="utf-8") as f:
        for raw in f:
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            out.append(d.get("custom_id") or d.get("key"))
    return out


@dataclass
class _Spool:
    sid: str
    path: Path
    file: Any
    ids: list[str] = field(default_factory=list)
    bytes: int = 0


@dataclass
class _Call:
    messages: list[dict[str, Any]]
    kw: dict[str, Any]
    futures: list[asyncio.Future[ChatReply]] = field(default_factory=list)
    rounds: int = 0


class BatchClient(ChatClient):
    """A chat client delivering through a service's batch endpoints (see module docstring).
    ``direct`` answers fallbacks; ``ledger`` (cafe.clients.costs) gets each batch reply's usage."""

    def __init__(
        self,
        direct: ChatClient,
        backend: BatchBackend,
        spec: BatchSpec,
        *,
        kind: str,
        model: str,
        ledger: Any = None,
    ):
        self.direct, self.backend, self.spec = direct, backend, spec
        self.kind, self.model, self.ledger = kind, model, ledger
        self.identity = direct.identity
        slug = "".join(c if c.isalnum() or c in "._-" else "-" for c in self.identity)[:120]
        self.log = BatchLog(spec.state_dir / slug.strip("-"))
        self.stats: Counter[str] = Counter()
        self._occurrence: Counter[str] = Counter()  # body hash -> calls made with it
        self._calls: dict[str, _Call] = {}  # unanswered custom ids
        self._owner: dict[str, str] = {}  # custom id -> sid of the unfinished batch holding it
        self._done: dict[str, dict[str, Any]] = {}  # custom id -> reply, from finished batches
        self._spool: _Spool | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ready: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None

    # -- the caller's side --------------------------------------------------------------------
    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        **extra: Any,
    ) -> ChatReply:
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._resume())
        await asyncio.shield(self._ready)
        kw = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed, **extra}
        try:
            body = self.backend.body(messages, temperature, max_tokens, seed, extra)
        except Exception as e:  # unreadable audio etc.: no batch will fix it
            return ChatReply(text=None, error=redact(f"cannot build request: {e}"))
        # one call, one line, as on the direct path: five raters sending the same body are five
        # lines, and a retry of an invalid reply (same body at temperature 0) is a new line. The
        # suffix counts this body's calls in this process, so a resumed run maps its calls onto
        # the same lines (identical bodies are interchangeable)
        base = custom_id(body)
        cid = f"{base}-{self._occurrence[base]}"
        self._occurrence[base] += 1
        if cid in self._done:
            self.stats["from_finished_batches"] += 1
            return self._reply(self._done[cid], self._done[cid].get("_batch", ""))
        fut: asyncio.Future[ChatReply] = asyncio.get_running_loop().create_future()
        self._calls[cid] = _Call(messages, kw, [fut])
        if cid in self._owner:
            self.stats["adopted"] += 1
        else:
            self._enqueue(cid, body)
        return await fut

    def _reply(self, r: dict[str, Any], batch_id: str) -> ChatReply:
        return ChatReply(
            text=r["text"],
            usage=r.get("usage") or {},
            finish_reason=r.get("finish_reason"),
            endpoint=f"batch:{batch_id}",
        )

    def _answer(self, cid: str, reply: ChatReply) -> None:
        call = self._calls.pop(cid, None)
        for fut in call.futures if call else ():
            if not fut.done():
                fut.set_result(reply)

    # -- collecting and submitting ------------------------------------------------------------
    def _enqueue(self, cid: str, body: dict[str, Any]) -> None:
        if self._spool is None:
            sid = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]
            path = self.log.input_path(sid)
            self._spool = _Spool(sid, path, path.open("w", encoding="utf-8"))
        raw = json.dumps(self.backend.line(cid, body), ensure_ascii=False) + "\n"
        sp = self._spool
        if sp.ids and (
            len(sp.ids) >= self.spec.max_items or sp.bytes + len(raw) > self.spec.max_bytes
        ):
            self._spawn(self._submit(self._close_spool()))
            return self._enqueue(cid, body)
        sp.file.write(raw)
        sp.ids.append(cid)
        sp.bytes += len(raw)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush_when_quiet())

    def _close_spool(self) -> _Spool:
        sp, self._spool = self._spool, None
        assert sp is not None
        sp.file.flush()
        os.fsync(sp.file.fileno())
        sp.file.close()
        return sp

    async def _flush_when_quiet(self) -> None:
        while self._spool is not None:
            n = len(self._spool.ids)
            await asyncio.sleep(self.spec.collect_s)
            if self._spool is not None and len(self._spool.ids) == n:
                self._spawn(self._submit(self._close_spool()))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, sp: _Spool) -> None:
        self.log.write(
            sid=sp.sid,
            event="prepared",
            backend=self.backend.name,
            identity=self.identity,
            n=len(sp.ids),
            input=sp.path.name,
        )
        for cid in sp.ids:
            self._owner[cid] = sp.sid
        try:
            batch_id = await self.backend.submit(sp.path, sp.sid, len(sp.ids), self.log)
        except Exception as e:
            msg = redact(f"batch submit failed: {type(e).__name__}: {e}")
            self.log.write(sid=sp.sid, event="finished", outcome="not-submitted", error=msg)
            self.stats["submit_failures"] += 1
            for cid in sp.ids:
                self._owner.pop(cid, None)
                self._failed(cid, msg, retryable=True)
            return
        self.log.write(sid=sp.sid, event="submitted", batch_id=batch_id)  # before any polling
        self.stats["batches"] += 1
        self.stats["submitted"] += len(sp.ids)
        await self._collect(sp.sid, batch_id, sp.ids)

    # -- waiting and collecting ---------------------------------------------------------------
    async def _collect(self, sid: str, batch_id: str, ids: list[str]) -> None:
        delay = self.spec.poll_s
        while True:
            try:
                st = await self.backend.status(batch_id)
            except Exception as e:  # a flaky status call: try again later
                st = BatchStatus(f"status check failed: {redact(str(e))[:200]}", None)
            if st.outcome is not None:
                break
            if not self.spec.wait:
                for cid in ids:
                    self._answer(
                        cid,
                        ChatReply(
                            text=None,
                            error=(
                                f"batch {batch_id} still {st.state}: "
                                "run the command again to collect it"
                            ),
                        ),
                    )
                self.stats["left_pending"] += len(ids)
                return
            await asyncio.sleep(delay)
            delay = min(self.spec.max_poll_s, delay * 1.5)
        try:
            lines = await self.backend.results(batch_id, st, ids) if st.outcome != "failed" else []
        except Exception as e:
            lines = []
            st.message = (st.message + f"; results unreadable: {redact(str(e))[:200]}").strip("; ")
        seen = self._store_results(sid, batch_id, lines)
        self.log.write(
            sid=sid,
            event="finished",
            batch_id=batch_id,
            outcome=st.outcome,
            state=st.state,
            message=st.message,
            ok=sum(1 for r in lines if r.reply is not None),
            errors=sum(1 for r in lines if r.reply is None),
            missing=len(set(ids) - seen),
        )
        self.stats[f"batches_{st.outcome}"] += 1
        for r in lines:
            self._owner.pop(r.custom_id, None)
            if r.reply is not None:
                self.stats["succeeded"] += 1
                if self.ledger is not None:
                    self.ledger.record(
                        self.kind, self.model, self.identity, "batch", r.reply.get("usage") or {}
                    )
                self._answer(r.custom_id, self._reply(r.reply, batch_id))
            elif st.outcome == "cancelled":
                self._cancelled(r.custom_id, batch_id)
            else:
                self.stats["expired_items" if r.expired else "line_errors"] += 1
                self._failed(r.custom_id, f"batch {batch_id}: {r.error}", r.retryable)
        for cid in ids:
            if cid in seen:
                continue
            self._owner.pop(cid, None)
            if st.outcome == "cancelled":
                self._cancelled(cid, batch_id)
            else:  # expired, failed, or a completed batch that lost a line
                self.stats[f"{st.outcome}_items"] += 1
                why = f"batch {batch_id} {st.outcome} before this item" + (
                    f" ({st.message})" if st.message else ""
                )
                self._failed(cid, why, retryable=st.outcome != "failed")

    def _store_results(self, sid: str, batch_id: str, lines: list[LineResult]) -> set[str]:
        path = self.log.results_path(sid)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for r in lines:
                f.write(
                    json.dumps(
                        {
                            "custom_id": r.custom_id,
                            "reply": r.reply,
                            "error": r.error,
                            "retryable": r.retryable,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for r in lines:
            if r.reply is not None:
                self._done[r.custom_id] = {**r.reply, "_batch": batch_id}
        return {r.custom_id for r in lines}

    def _cancelled(self, cid: str, batch_id: str) -> None:
        self.stats["cancelled_items"] += 1
        self._answer(
            cid,
            ChatReply(
                text=None,
                error=(
                    f"batch {batch_id} was cancelled before this item; run again to submit it anew"
                ),
            ),
        )

    def _failed(self, cid: str, why: str, retryable: bool) -> None:
        call = self._calls.get(cid)
        if call is None:  # adopted from a killed run and nobody asked for it again
            return
        call.rounds += 1
        if not retryable or (self.spec.retry == "resubmit" and call.rounds >= self.spec.max_rounds):
            self.stats["failed"] += 1
            suffix = "" if not retryable else f" (after {call.rounds} batch submissions)"
            self._answer(cid, ChatReply(text=None, error=redact(why + suffix)))
        elif self.spec.retry == "direct":
            self.stats["sent_direct"] += 1
            self._spawn(self._send_direct(cid, call))
        else:
            self.stats["resubmitted"] += 1
            kw = call.kw
            body = self.backend.body(
                call.messages,
                kw["temperature"],
                kw["max_tokens"],
                kw["seed"],
                {k: v for k, v in kw.items() if k not in ("temperature", "max_tokens", "seed")},
            )
            self._enqueue(cid, body)

    async def _send_direct(self, cid: str, call: _Call) -> None:
        reply = await self.direct.achat(call.messages, **call.kw)
        self._answer(cid, reply)

    # -- resuming a killed run ----------------------------------------------------------------
    async def _resume(self) -> None:
        """Adopt this client's submissions from earlier processes: finished ones answer from
        their results file; unfinished ones are polled (never resubmitted)."""
        for sid, ev in self.log.submissions().items():
            if ev.get("identity") not in (None, self.identity):
                continue
            if ev.get("event") == "finished":
                self._load_results(sid, ev.get("batch_id", ""))
                continue
            batch_id = ev.get("batch_id")
            if batch_id is None:  # killed between create and log: ask the service
                try:
                    batch_id = await self.backend.find(sid)
                except Exception:
                    batch_id = None
                if batch_id is None:
                    self.log.write(sid=sid, event="finished", outcome="never-created")
                    continue
                self.log.write(sid=sid, event="submitted", batch_id=batch_id, found=True)
            try:
                ids = read_ids(self.log.input_path(sid))
            except OSError:
                continue
            for cid in ids:
                self._owner[cid] = sid
            self.stats["batches_adopted"] += 1
            self._spawn(self._collect(sid, batch_id, ids))

    def _load_results(self, sid: str, batch_id: str) -> None:
        path = self.log.results_path(sid)
        if not path.exists():
            return
        with path.open(encoding="utf-8") as f:
            for raw in f:
                try:
                    d = json.loads(raw)
                except ValueError:
                    continue
                if d.get("reply") is not None:
                    self._done[d["custom_id"]] = {**d["reply"], "_batch": batch_id}

    async def cancel_all(self) -> list[str]:
        """Cancel this client's unfinished batches at the service; returns their ids."""
        out = []
        for sid, ev in self.log.submissions().items():
            if ev.get("event") == "submitted" and ev.get("identity") in (None, self.identity):
                await self.backend.cancel(ev["batch_id"])
                self.log.write(sid=sid, event="cancel-requested", batch_id=ev["batch_id"])
                out.append(ev["batch_id"])
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "protocol": self.backend.name,
            "state_dir": str(self.log.folder),
            **dict(sorted(self.stats.items())),
        }

    async def aclose(self) -> None:
        # every caller has its answer by now; what is left polls batches adopted from a killed
        # run that nobody asked for again: they stay in the log for the next run
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._spool is not None:
            self._close_spool().path.unlink(missing_ok=True)
        await self.backend.aclose()
        await self.direct.aclose()
