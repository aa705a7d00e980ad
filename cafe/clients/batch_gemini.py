"""Gemini batch mode through google-genai: requests inline in ``batches.create`` for small
batches, a JSONL file (``{"key", "request"}`` lines) uploaded with ``files.upload`` for large
ones; ``batches.get`` until the job ends; replies from the job's inline responses or its
responses file (``files.download``). The submission id is the job's display name, so a run killed
between create and log finds its job with ``batches.list``.

Requests are built in the REST shape the direct client's SDK call produces (text parts, audio as
inline WAV, generationConfig with temperature / maxOutputTokens / seed and the client's
``config``), and replies are read by the direct client's own ``_reply_fields``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cafe.clients.batch import BatchBackend, BatchLog, BatchSpec, BatchStatus, LineResult
from cafe.clients.common import audio_b64, env_key, parts_of, split_system
from cafe.clients.ratelimit import CallError, is_retryable_status

_OUTCOME = {
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}
#: google.rpc codes another attempt can fix: deadline, exhausted, aborted, internal, unavailable
_RPC_RETRY = {4, 8, 10, 13, 14}


def _camel(obj: Any) -> Any:
    """snake_case keys (the SDK's config style) -> the REST API's camelCase."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            head, *rest = str(k).split("_")
            out[head + "".join(w[:1].upper() + w[1:] for w in rest)] = _camel(v)
        return out
    if isinstance(obj, list):
        return [_camel(v) for v in obj]
    return obj


class GeminiBatch(BatchBackend):
    name = "gemini-batch"

    def __init__(self, direct: Any, spec: BatchSpec):
        self.direct = direct
        self.spec = spec
        self._sdk: Any = None

    def _client(self) -> Any:
        if self._sdk is None:
            from google import genai
            from google.genai import types

            opts: dict[str, Any] = {
                "api_version": self.direct.api_version,
                "timeout": int(self.direct.policy.timeout_s * 1000),
            }
            url = self.direct.endpoints[0].url
            if url:
                opts["base_url"] = url
            # the direct client's key for this endpoint (its scoping rules, never another's)
            key = env_key(*self.direct.key_env[url])
            self._sdk = genai.Client(api_key=key, http_options=types.HttpOptions(**opts)).aio
        return self._sdk

    # -- requests ----------------------------------------------------------------------------
    def body(self, messages, temperature, max_tokens, seed, extra):  # type: ignore[no-untyped-def]
        system, turns = split_system(messages)
        contents = []
        for m in turns:
            parts: list[dict[str, Any]] = []
            for p in parts_of(m):
                if p.get("type") == "audio":
                    parts.append({"inlineData": {"mimeType": "audio/wav",
                                                 "data": audio_b64(p["path"])}})  # fmt: skip
                elif p.get("type") == "text":
                    parts.append({"text": p["text"]})
            contents.append({"role": "model" if m.get("role") == "assistant" else "user",
                             "parts": parts})  # fmt: skip
        cfg = {"temperature": temperature, "maxOutputTokens": max_tokens,
               **_camel(self.direct.config), **_camel(extra)}  # fmt: skip
        if cfg.get("maxOutputTokens") is None:  # None: no budget sent
            cfg.pop("maxOutputTokens", None)
        if seed is not None:
            cfg["seed"] = seed
        body: dict[str, Any] = {"contents": contents, "generationConfig": cfg}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return body

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"key": custom_id, "request": body}

    @staticmethod
    def _inlined(d: dict[str, Any]) -> Any:
        from google.genai import types

        req = d["request"]
        cfg = dict(req.get("generationConfig") or {})
        if req.get("systemInstruction"):
            cfg["systemInstruction"] = req["systemInstruction"]
        return types.InlinedRequest(
            contents=[types.Content.model_validate(c) for c in req["contents"]],
            config=types.GenerateContentConfig.model_validate(cfg),
            metadata={"key": d["key"]},
        )

    async def submit(self, path: Path, sid: str, n: int, log: BatchLog) -> str:
        sdk = self._client()
        if path.stat().st_size <= self.spec.inline_max_bytes:
            with path.open(encoding="utf-8") as f:
                src: Any = [self._inlined(json.loads(raw)) for raw in f if raw.strip()]
        else:
            uploaded = await sdk.files.upload(
                file=str(path), config={"mime_type": "jsonl", "display_name": sid}
            )
            log.write(sid=sid, event="uploaded", file_id=uploaded.name)
            src = uploaded.name
        job = await sdk.batches.create(model=self.direct.model, src=src,
                                       config={"display_name": sid})  # fmt: skip
        return str(job.name)

    # -- jobs --------------------------------------------------------------------------------
    async def find(self, sid: str) -> str | None:
        async for job in await self._client().batches.list(config={"page_size": 100}):
            if job.display_name == sid:
                return str(job.name)
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        job = await self._client().batches.get(name=batch_id)
        state = str(getattr(job.state, "value", job.state))
        error = getattr(job, "error", None)
        return BatchStatus(state, _OUTCOME.get(state), str(getattr(error, "message", "") or ""))

    async def results(self, batch_id: str, status: BatchStatus, ids: list[str]) -> list[LineResult]:
        job = await self._client().batches.get(name=batch_id)
        dest = job.dest
        if dest is None:
            return []
        url = self.direct.endpoints[0].url
        if dest.inlined_responses:
            out = []
            for i, r in enumerate(dest.inlined_responses):
                key = (r.metadata or {}).get("key") or (ids[i] if i < len(ids) else "")
                out.append(_line(key, r.response, _error_dict(r.error), url))
            return out
        if dest.file_name:
            from google.genai import types

            data = await self._client().files.download(file=dest.file_name)
            out = []
            for raw in data.splitlines():
                if not raw.strip():
                    continue
                d = json.loads(raw)
                resp = d.get("response")
                resp = types.GenerateContentResponse.model_validate(resp) if resp else None
                out.append(_line(d.get("key", ""), resp, d.get("error"), url))
            return out
        return []

    async def cancel(self, batch_id: str) -> None:
        await self._client().batches.cancel(name=batch_id)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.aclose()
            self._sdk = None


def _error_dict(err: Any) -> dict[str, Any] | None:
    if err is None:
        return None
    return {"code": getattr(err, "code", None), "message": getattr(err, "message", "")}


def _line(key: str, resp: Any, error: dict[str, Any] | None, url: str | None) -> LineResult:
    from cafe.clients.gemini import _reply_fields

    if error:
        code = int(error.get("code") or 13)
        # google.rpc codes (8 exhausted, 13 internal, 14 unavailable…), or an HTTP status
        retry = code in _RPC_RETRY if code < 100 else is_retryable_status(code)
        return LineResult(key, error=f"code {code}: {error.get('message', '')}"[:300],
                          retryable=retry)  # fmt: skip
    if resp is None:
        return LineResult(key, error="no response", retryable=True)
    try:
        return LineResult(key, reply=_reply_fields(resp, url))
    except CallError as e:
        return LineResult(key, error=str(e), retryable=e.retryable)
