"""Gemini through google-genai (``genai.Client``), for any model name (gemini-2.5-flash,
gemini-3-pro…). Audio goes inline as WAV bytes; clips whose WAV exceeds ``inline_limit_bytes``
(~15 MB, under the 20 MB request cap) go through the Files API once per clip and are then
referenced by URI. ``endpoints`` (or tests' loopback URL) become ``http_options.base_url``.

The SDK's own retries are switched off: the shared limiter and retry policy handle 429/5xx,
Retry-After and timeouts the same way for every protocol. Each event loop gets its own
genai.Client over its own httpx.AsyncClient (HTTP sessions are bound to their loop)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from typing import Any

from cafe.clients.base import CLIENTS, ChatReply, PooledChatClient
from cafe.clients.breaker import BREAK_AFTER
from cafe.clients.common import (
    Lanes,
    PerLoop,
    audio_wav_async,
    check_url,
    clean_text,
    env_key,
    key_env_for,
    missing_key_hint,
    parts_of,
    redact,
    split_system,
    split_userinfo,
    valid_usage,
)
from cafe.clients.ratelimit import (
    AdaptiveLimiter,
    CallError,
    call_with_retries,
    is_retryable_status,
    parse_retry_after,
)

KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
#: the SDK's base-URL variable: a Gemini proxy the user configured as Google's endpoint
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"


def gemini_service_urls() -> tuple[str | None, ...]:
    """Google as the user configured it: the SDK default (None) and GOOGLE_GEMINI_BASE_URL."""
    base = os.environ.get(BASE_URL_ENV)
    return (None, base.rstrip("/")) if base else (None,)


@CLIENTS.register("gemini")
class GeminiClient(PooledChatClient):
    """Options: ``concurrency`` (per endpoint), ``timeout_s``, ``max_attempts``, ``base_delay``,
    ``max_delay``, ``recover_after``, ``inline_limit_bytes``, ``api_version``, ``config`` (extra
    GenerateContentConfig fields, e.g. ``{"thinking_config": {"thinking_budget": 0}}``),
    ``api_key_env`` (the variable holding the key; default GEMINI_API_KEY/GOOGLE_API_KEY for
    Google's endpoint, CAFE_ENDPOINT_API_KEY for any other base URL)."""

    kind = "gemini"

    def __init__(
        self,
        model: str,
        endpoints: list[str] | tuple[str, ...] | str | None = None,
        *,
        concurrency: int = 16,
        timeout_s: float = 180.0,
        max_attempts: int = 6,
        base_delay: float = 0.1,
        max_delay: float = 60.0,
        recover_after: int = 20,
        http_transport: str = "auto",
        inline_limit_bytes: int = 15_000_000,
        config: dict[str, Any] | None = None,
        api_version: str = "v1beta",
        thinking: bool | None = None,  # judges pass it; thought parts never reach .text anyway
        api_key_env: str | None = None,
        break_after: int = BREAK_AFTER,
        server_option: str | None = None,
    ):
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        urls: list[str | None] = [
            check_url(u, server_option).rstrip("/") for u in endpoints or []
        ] or [None]
        service = gemini_service_urls()
        #: per endpoint, the variable(s) its key comes from (never another service's)
        self.key_env = {u: key_env_for(u, service, KEY_ENV, api_key_env) for u in urls}
        for u, names in self.key_env.items():
            if not env_key(*names):
                alt = f" (or {names[1]})" if len(names) > 1 else ""
                raise ValueError(
                    f"gemini client: set the {names[0]}{alt} variable: {missing_key_hint(names, u)}"
                )
        self.model = model
        self._init_pool(
            urls, concurrency=concurrency, timeout_s=timeout_s, max_attempts=max_attempts,
            base_delay=base_delay, max_delay=max_delay, recover_after=recover_after,
            http_transport=http_transport, break_after=break_after,
            server_option=server_option if endpoints else None,
        )  # fmt: skip
        self.inline_limit_bytes = inline_limit_bytes
        self.config = dict(config or {})
        self.api_version = api_version
        self._sdk = [PerLoop(lambda url=e.url: self._new_sdk(url)) for e in self.endpoints]
        self._uploaded: dict[tuple[str | None, str], str] = {}  # (endpoint, wav sha) -> file uri
        self._upload_locks: dict[tuple[str | None, str, int], asyncio.Lock] = {}
        where = ",".join(split_userinfo(e.url)[0] if e.url else "google" for e in self.endpoints)
        self.identity = f"gemini:{model}@{where}"

    def _new_sdk(self, url: str | None) -> Lanes[Any]:
        """genai.Client(s) over our HTTP lanes (the SDK would otherwise build its own aiohttp
        session outside our limits and retries)."""
        from google import genai
        from google.genai import types

        from cafe.clients.transport import http_lanes

        def sdk(http: Any) -> Any:
            opts: dict[str, Any] = {
                "api_version": self.api_version,  # the SDK drops to v1 when base_url is set
                "timeout": int(self.policy.timeout_s * 1000),
                "retry_options": types.HttpRetryOptions(attempts=1),
                "httpx_async_client": http,
            }
            if url:
                opts["base_url"] = url
            # always an explicit key: left None, the SDK would read GEMINI_API_KEY itself and send
            # it to whatever base URL it was given
            key = env_key(*self.key_env[url])
            return genai.Client(api_key=key, http_options=types.HttpOptions(**opts))

        lanes = http_lanes(self.concurrency, self.policy.timeout_s, self.http_transport)
        lanes.items = [sdk(http) for http in lanes.items]
        return lanes

    # -- protocol ----------------------------------------------------------------------------
    async def _contents(self, sdk: Any, url: str | None, messages: list[dict[str, Any]]) -> Any:
        from google.genai import types

        system, turns = split_system(messages)
        contents = []
        for m in turns:
            parts = []
            for p in parts_of(m):
                if p.get("type") == "audio":
                    wav = await audio_wav_async(p["path"])
                    if len(wav) > self.inline_limit_bytes:
                        uri = await self._upload(sdk, url, wav)
                        parts.append(types.Part.from_uri(file_uri=uri, mime_type="audio/wav"))
                    else:
                        parts.append(types.Part.from_bytes(data=wav, mime_type="audio/wav"))
                elif p.get("type") == "text":
                    parts.append(types.Part.from_text(text=p["text"]))
            role = "model" if m.get("role") == "assistant" else "user"
            contents.append(types.Content(role=role, parts=parts))
        return system, contents

    async def _upload(self, sdk: Any, url: str | None, wav: bytes) -> str:
        import io

        key = (url, hashlib.sha256(wav).hexdigest())
        # asyncio locks belong to one loop; the uploaded URI is shared by all
        lock = self._upload_locks.setdefault((*key, id(asyncio.get_running_loop())), asyncio.Lock())
        async with lock:  # K runs of one clip upload it once
            if key not in self._uploaded:
                try:
                    f = await sdk.aio.files.upload(
                        file=io.BytesIO(wav), config={"mime_type": "audio/wav"}
                    )
                    while getattr(f, "state", None) and str(f.state).endswith("PROCESSING"):
                        await asyncio.sleep(1.0)
                        f = await sdk.aio.files.get(name=f.name)
                except Exception as e:
                    raise _as_call_error(e, url) from None
                self._uploaded[key] = f.uri
            return self._uploaded[key]

    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        **extra: Any,
    ) -> ChatReply:

        t0 = time.perf_counter()
        chosen: list[int] = []
        used: list[str | None] = []

        def choose() -> AdaptiveLimiter:
            chosen[:] = [self._pick()]
            return self.endpoints[chosen[0]].limiter

        async def once() -> dict[str, Any]:
            i = chosen[0]
            ep = self.endpoints[i]
            used.append(ep.url)
            ep.calls += 1
            lanes = self._sdk[i].get()
            lane = lanes.take()
            try:
                return await self._once(lanes.items[lane], ep.url, messages, cfg)
            finally:
                lanes.give(lane)

        cfg: dict[str, Any] = {
            "temperature": temperature,
            "max_output_tokens": max_tokens,
            **self.config,
            **extra,
        }
        if seed is not None:
            cfg["seed"] = seed
        if cfg.get("temperature") is None:  # None: the provider's default
            cfg.pop("temperature", None)
        if cfg.get("max_output_tokens") is None:  # None: no budget sent
            cfg.pop("max_output_tokens", None)
        # build this loop's SDK clients (the first one imports google.genai: about a second)
        # before the timed attempts, so a cold start is never counted as a timed-out call
        for per_loop in self._sdk:
            per_loop.get()
        out = await call_with_retries(
            once, choose, self.policy, redact=redact,
            breaker=lambda: self.endpoints[chosen[0]].breaker,
        )  # fmt: skip
        latency = time.perf_counter() - t0
        endpoint = (used[-1] or "google") if used else None
        if out.error is not None:
            return ChatReply(text=None, error=out.error, attempts=out.attempts, latency_s=latency,
                             endpoint=endpoint)  # fmt: skip
        v = out.value
        return ChatReply(
            text=v["text"], usage=v["usage"], latency_s=latency, attempts=out.attempts,
            finish_reason=v["finish_reason"], endpoint=endpoint,
        )  # fmt: skip

    async def _once(
        self, sdk: Any, url: str | None, messages: list[dict[str, Any]], base_cfg: dict[str, Any]
    ) -> dict[str, Any]:
        from google.genai import types

        try:
            system, contents = await self._contents(sdk, url, messages)
        except CallError:
            raise
        except Exception as e:  # unreadable audio: no retry will fix it
            raise CallError(f"cannot build request: {e}", retryable=False) from None
        cfg = dict(base_cfg)
        if system:
            cfg["system_instruction"] = system
        try:
            resp = await sdk.aio.models.generate_content(
                model=self.model, contents=contents, config=types.GenerateContentConfig(**cfg)
            )
        except Exception as e:
            raise _as_call_error(e, url, self.key_env.get(url)) from None
        return _reply_fields(resp, url)

    async def acount_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` as the API counts them for this model (``models.countTokens``),
        under the shared limiter and retries; None when every attempt failed."""

        async def once() -> int:
            lanes = self._sdk[0].get()
            lane = lanes.take()
            try:
                resp = await lanes.items[lane].aio.models.count_tokens(
                    model=self.model, contents=text
                )
            except Exception as e:
                raise _as_call_error(
                    e, self.endpoints[0].url, self.key_env.get(self.endpoints[0].url)
                ) from None
            finally:
                lanes.give(lane)
            if resp.total_tokens is None:
                raise CallError("countTokens reply without totalTokens")
            return int(resp.total_tokens)

        out = await call_with_retries(once, self.endpoints[0].limiter, self.policy, redact=redact)
        return None if out.error is not None else out.value

    async def aclose(self) -> None:
        for per_loop in self._sdk:
            lanes = per_loop.pop_current()
            for sdk in lanes.items if lanes is not None else ():
                http = sdk._api_client._http_options.httpx_async_client
                if http is not None:
                    await http.aclose()


def _as_call_error(
    e: Exception, url: str | None, key_env: tuple[str, ...] | None = None
) -> CallError:
    """SDK exceptions -> CallError with status, retryability and Retry-After."""
    import httpx
    from google.genai import errors

    from cafe.clients.transport import NO_REPLY, REFUSED

    where = url or "gemini"
    if isinstance(e, errors.APIError):
        resp = getattr(e, "response", None)
        headers = getattr(resp, "headers", None) or {}
        status = int(e.code) if e.code else 500
        msg = str(e.message or e.status or "")[:200]
        if status in (401, 403) and key_env is not None:  # no retry fixes a key
            return CallError(
                f"{where}: HTTP {status} (unauthorised): {msg}; {missing_key_hint(key_env, url)}",
                status=status,
                retryable=False,
            )
        return CallError(
            f"{where}: HTTP {status}: {msg}",
            status=status,
            retryable=is_retryable_status(status),
            retry_after=parse_retry_after(headers.get("retry-after")),
        )
    if isinstance(e, NO_REPLY):  # refused, DNS, TLS, dropped: the breaker counts these
        return CallError(f"{where}: {type(e).__name__}: {e}", no_reply=True,
                         refused=isinstance(e, REFUSED))  # fmt: skip
    if isinstance(e, httpx.TimeoutException | asyncio.TimeoutError):
        return CallError(f"{where}: timed out")
    if isinstance(e, httpx.HTTPError):
        return CallError(f"{where}: {type(e).__name__}: {e}")
    # a body the SDK could not parse (truncated JSON etc.): retry
    return CallError(f"{where}: malformed reply: {type(e).__name__}: {str(e)[:120]}")


def _reply_fields(resp: Any, url: str | None) -> dict[str, Any]:
    where = url or "gemini"
    cands = resp.candidates or []
    if not cands:
        fb = getattr(resp, "prompt_feedback", None)
        reason = getattr(fb, "block_reason", None)
        if reason:
            raise CallError(f"{where}: prompt blocked: {reason}", retryable=False)
        raise CallError(f"{where}: reply has no candidates")
    cand = cands[0]
    parts = (cand.content.parts if cand.content else None) or []
    text = "".join(p.text for p in parts if p.text and not getattr(p, "thought", False))
    finish = str(cand.finish_reason.value if cand.finish_reason else "") or None
    if not text and finish not in ("MAX_TOKENS",):
        raise CallError(f"{where}: reply has no text (finish reason {finish})")
    um = resp.usage_metadata
    usage: dict[str, Any] = {}
    if um is not None:
        out_tokens = (um.candidates_token_count or 0) + (um.thoughts_token_count or 0)
        usage = {
            "prompt_tokens": um.prompt_token_count,
            "completion_tokens": out_tokens,
            "total_tokens": um.total_token_count,
        }
        if um.thoughts_token_count:
            usage["reasoning_tokens"] = um.thoughts_token_count
        audio = sum(
            d.token_count or 0
            for d in um.prompt_tokens_details or []
            if str(getattr(d.modality, "value", d.modality)) == "AUDIO"
        )
        if audio:  # priced apart by audio models
            usage["audio_prompt_tokens"] = audio
    return {"text": clean_text(text), "finish_reason": finish, "usage": valid_usage(usage)}
