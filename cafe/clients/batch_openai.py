"""OpenAI's Batch API through the ``openai`` SDK: the input is a JSONL file of
``/v1/chat/completions`` requests (purpose "batch"), the batch carries our submission id in its
metadata (so a run killed between create and log finds it again), results come from the output
and error files. Also works against OpenAI-compatible servers that implement Files + Batches
(the client's first endpoint and key variable are used)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cafe.clients.batch import BatchBackend, BatchLog, BatchSpec, BatchStatus, LineResult
from cafe.clients.ratelimit import CallError, is_retryable_status

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
_RUNNING = {"validating", "in_progress", "finalizing", "cancelling"}
_OUTCOME = {
    "completed": "completed",
    "expired": "expired",
    "cancelled": "cancelled",
    "failed": "failed",
}
#: per-line error codes that another submission can fix
_RETRY_CODES = {"batch_expired", "rate_limit_exceeded", "server_error", "timeout"}


class OpenAIBatch(BatchBackend):
    name = "openai-batch"

    def __init__(self, direct: Any, spec: BatchSpec):
        self.direct = direct
        self.spec = spec
        self._sdk: Any = None

    def _client(self) -> Any:
        if self._sdk is None:
            from openai import AsyncOpenAI

            # exactly the credential the direct client would send to this endpoint (its key
            # scoping rules apply unchanged), or none
            bare, headers = self.direct._target(self.direct.endpoints[0].url)
            auth = headers.get("Authorization", "")
            key = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
            self._sdk = AsyncOpenAI(
                base_url=bare,
                api_key=key or "no-key",  # keyless local servers; the SDK insists on a value
                max_retries=4,
                timeout=self.direct.policy.timeout_s,
            )
        return self._sdk

    def body(self, messages, temperature, max_tokens, seed, extra):  # type: ignore[no-untyped-def]
        return self.direct.body(messages, temperature, max_tokens, seed, extra)

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}

    async def submit(self, path: Path, sid: str, n: int, log: BatchLog) -> str:
        sdk = self._client()
        with path.open("rb") as f:
            uploaded = await sdk.files.create(file=(path.name, f), purpose="batch")
        log.write(sid=sid, event="uploaded", file_id=uploaded.id)
        batch = await sdk.batches.create(
            input_file_id=uploaded.id,
            endpoint=ENDPOINT,
            completion_window=WINDOW,
            metadata={"cafe_submission": sid},
        )
        return str(batch.id)

    async def find(self, sid: str) -> str | None:
        async for b in self._client().batches.list(limit=100):
            if (b.metadata or {}).get("cafe_submission") == sid:
                return str(b.id)
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        b = await self._client().batches.retrieve(batch_id)
        self._last = b
        if b.status in _RUNNING:
            return BatchStatus(b.status, None)
        errors = (
            "; ".join(f"{e.code}: {e.message}" for e in (b.errors.data or []))
            if (b.errors is not None)
            else ""
        )
        return BatchStatus(b.status, _OUTCOME.get(b.status, "failed"), errors)

    async def results(self, batch_id: str, status: BatchStatus, ids: list[str]) -> list[LineResult]:
        b = await self._client().batches.retrieve(batch_id)
        out: list[LineResult] = []
        for file_id in (b.output_file_id, b.error_file_id):
            if file_id:
                content = await self._client().files.content(file_id)
                for raw in content.content.splitlines():
                    if raw.strip():
                        out.append(parse_line(json.loads(raw)))
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._client().batches.cancel(batch_id)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()
            self._sdk = None


def parse_line(d: dict[str, Any]) -> LineResult:
    """One output- or error-file line -> LineResult (reply fields as the direct client has)."""
    from cafe.clients.openai_compat import parse_reply

    cid = d.get("custom_id", "")
    resp = d.get("response") or {}
    err = d.get("error") or {}
    code = resp.get("status_code")
    if code == 200:
        try:
            return LineResult(cid, reply=parse_reply(json.dumps(resp.get("body")).encode()))
        except CallError as e:
            return LineResult(cid, error=str(e), retryable=e.retryable)
    if code is not None:
        body = resp.get("body") or {}
        msg = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        return LineResult(
            cid, error=f"HTTP {code}: {msg or body}"[:300], retryable=is_retryable_status(int(code))
        )
    c = str(err.get("code") or "error")
    return LineResult(
        cid,
        error=f"{c}: {err.get('message', '')}"[:300],
        retryable=c in _RETRY_CODES,
        expired=c == "batch_expired",
    )
