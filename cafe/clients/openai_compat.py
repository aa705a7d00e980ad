"""OpenAI chat-completions protocol over httpx, for OpenAI itself and any compatible server
(vLLM serve, SGLang, LiteLLM…). httpx rather than the openai SDK: one small code path we fully
control (retries, Retry-After, malformed bodies), and httpx is a core dependency, so served
models need no extra.

Audio parts become ``{"type": "input_audio", "input_audio": {"data": <base64 WAV>,
"format": "wav"}}``. Several endpoints share the work: each call goes to the least-loaded one,
each endpoint with its own adaptive limiter."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from cafe.clients.base import CLIENTS, ChatReply, PooledChatClient
from cafe.clients.breaker import BREAK_AFTER
from cafe.clients.common import (
    OFFLOOP_AUDIO_BYTES,
    Endpoint,
    PerLoop,
    audio_b64,
    audio_bytes_on_disk,
    audio_wav,
    check_url,
    clean_text,
    env_key,
    key_env_for,
    missing_key_hint,
    parts_of,
    redact,
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

if TYPE_CHECKING:
    from cafe.clients.transport import Poster

OPENAI_URL = "https://api.openai.com/v1"
#: what GET /models says of a model that tells its weights apart (cafe.adapters.chat_api)
MODEL_INFO = ("id", "root", "parent", "owned_by")
#: the largest GET /models body read: a model list, not a download
MODEL_INFO_BYTES = 1024 * 1024
#: where OPENAI_API_KEY may go: OpenAI's endpoint and the SDK's own base-URL variable
OPENAI_KEY_ENV = ("OPENAI_API_KEY",)


def openai_service_urls() -> tuple[str, ...]:
    """OpenAI as the user configured it: its public URL, and OPENAI_BASE_URL when set."""
    base = os.environ.get("OPENAI_BASE_URL")
    return (OPENAI_URL, normalise_base(base)) if base else (OPENAI_URL,)


def normalise_base(url: str) -> str:
    """Accept ``http://host:8000`` or ``http://host:8000/v1`` (what vLLM prints) alike."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    if urlparse(url).path in ("", "/"):
        url += "/v1"
    return url


@CLIENTS.register("openai-compatible")
class OpenAICompatClient(PooledChatClient):
    """Chat client for the OpenAI chat-completions protocol.

    Options: ``concurrency`` (per endpoint), ``timeout_s``, ``max_attempts``, ``base_delay``,
    ``max_delay``, ``recover_after`` (successes per regained slot), ``break_after`` (attempts
    refused in a row that end calls to a server; 0: never; see cafe.clients.breaker),
    ``api_key_env`` (variable holding the key for every endpoint; default: OPENAI_API_KEY for
    OpenAI itself, as its URL or OPENAI_BASE_URL names it, and CAFE_ENDPOINT_API_KEY for any
    other server),
    ``drop_params`` (request fields a model rejects, e.g. temperature for
    gpt-5), ``extra_body`` (merged into every request), ``thinking`` (None: the server's
    default; False: ask a Qwen3-style template not to think, as judges do by default)."""

    kind = "openai-compatible"
    default_url: str | None = None  # a served model's server is always named, never guessed
    key_required = False
    token_field = "max_tokens"  # older vLLM/SGLang only know max_tokens
    thinking_switch = True  # the server takes chat_template_kwargs (vLLM, SGLang)

    def __init__(
        self,
        model: str,
        endpoints: list[str] | tuple[str, ...] | str | None = None,
        *,
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_attempts: int = 6,
        base_delay: float = 0.1,
        max_delay: float = 60.0,
        recover_after: int = 20,
        http_transport: str = "auto",
        api_key_env: str | None = None,
        drop_params: list[str] | tuple[str, ...] = (),
        extra_body: dict[str, Any] | None = None,
        thinking: bool | None = None,
        break_after: int = BREAK_AFTER,
        server_option: str | None = None,
    ):
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        from cafe.cluster.endpoints import expand  # @FILE of `cafe serve`, ray:ADDRESS

        urls = expand(list(endpoints or [])) or [
            os.environ.get("OPENAI_BASE_URL") or self.default_url
        ]
        if urls == [None]:
            option = server_option or "--endpoint"
            also = " (or -o endpoint=URL)" if option == "--endpoint" else ""
            raise ValueError(
                f"{self.kind} client for {model}: name the server with {option} URL{also}; "
                "no server is assumed"
            )
        urls = [normalise_base(check_url(u, server_option)) for u in urls]
        self.model = model
        service = openai_service_urls()
        #: per endpoint, the variable(s) its key comes from (never another service's)
        self.key_env = {u: key_env_for(u, service, OPENAI_KEY_ENV, api_key_env) for u in urls}
        if self.key_required:
            for u, names in self.key_env.items():
                if not env_key(*names):
                    raise ValueError(f"{self.kind} client: set the {names[0]} variable: "
                                     f"{missing_key_hint(names, u)}")  # fmt: skip
        self._init_pool(
            urls, concurrency=concurrency, timeout_s=timeout_s,
            max_attempts=max_attempts, base_delay=base_delay, max_delay=max_delay,
            recover_after=recover_after, http_transport=http_transport,
            break_after=break_after, server_option=server_option if endpoints else None,
        )  # fmt: skip
        self.drop_params = set(drop_params)
        self.extra_body = dict(extra_body or {})
        self.thinking = thinking
        if thinking is False and self.thinking_switch:
            from cafe.clients.thinking import NO_THINKING_BODY

            kwargs = {**NO_THINKING_BODY["chat_template_kwargs"]}
            kwargs.update(self.extra_body.get("chat_template_kwargs") or {})
            self.extra_body["chat_template_kwargs"] = kwargs
        self._http = PerLoop(self._new_http)
        # identity names protocol, model and endpoints: never a key
        self.identity = f"{self.kind}:{model}@" + ",".join(
            split_userinfo(e.url)[0] for e in self.endpoints
        )  # never the credentials a URL carries: identities name files and folders

    # -- transport ---------------------------------------------------------------------------
    def _new_http(self) -> Poster:
        from cafe.clients.transport import Poster

        n = self.concurrency * len(self.endpoints)
        return Poster(n, self.policy.timeout_s, self.http_transport)

    def _target(self, url: str) -> tuple[str, dict[str, str]]:
        """Request base URL and auth header for an endpoint: its key as a bearer token, else
        credentials written in its URL (user:pass@) as Basic auth, else none."""
        bare, basic = split_userinfo(url)
        key = env_key(*self.key_env[url])
        return bare, ({"Authorization": f"Bearer {key}"} if key else basic)

    # -- protocol ----------------------------------------------------------------------------
    def convert_messages(
        self, messages: list[dict[str, Any]], blobs: dict[str, bytes] | None = None
    ) -> list[dict[str, Any]]:
        """OpenAI content parts. With ``blobs``, each clip's base64 goes there under a random
        placeholder that stands in the message (see spliced_json) instead of inline."""
        out = []
        for m in messages:
            parts = []
            for p in parts_of(m):
                if p.get("type") == "audio":
                    if blobs is None:
                        data = audio_b64(p["path"])
                    else:
                        data = f"cafe-audio-{secrets.token_hex(8)}"
                        blobs[data] = base64.b64encode(audio_wav(p["path"]))
                    parts.append(
                        {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
                    )
                else:
                    parts.append(p)
            only_text = all(p.get("type") == "text" for p in parts)
            content: Any = "".join(p["text"] for p in parts) if only_text else parts
            out.append({"role": m["role"], "content": content})
        return out

    def body(
        self, messages: list[dict[str, Any]], temperature: float | None, max_tokens: int,
        seed: int | None, extra: dict[str, Any], blobs: dict[str, bytes] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.convert_messages(messages, blobs),
            "temperature": temperature,
            self.token_field: max_tokens,
            **self.extra_body,
            **extra,
        }
        if seed is not None:
            body["seed"] = seed
        if body.get("temperature") is None:  # None: the server's default (model's settings)
            body.pop("temperature", None)
        if body.get(self.token_field) is None:  # None: no budget sent (the server's default)
            body.pop(self.token_field, None)
        for k in self.drop_params:
            body.pop(k, None)
        return body

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
        built: list[bytes] = []
        used: list[str] = []

        async def payload() -> bytes:
            """Encoded once, under the first attempt's slot: a batch of thousands never holds
            all its clips in memory at once, and encoding is paced by the limiter."""
            if not built:
                blobs: dict[str, bytes] = {}
                args = (messages, temperature, max_tokens, seed, extra, blobs)
                try:
                    if audio_bytes_on_disk(messages) > OFFLOOP_AUDIO_BYTES:
                        # long clips encode in a worker thread, short ones (most) inline
                        body = await asyncio.to_thread(self.body, *args)
                    else:
                        body = self.body(*args)
                    built.append(spliced_json(body, blobs))
                except Exception as e:  # unreadable audio etc.: no retry will fix it
                    raise CallError(f"cannot build request: {e}", retryable=False) from None
            return built[0]

        async def once() -> tuple[dict[str, Any], str]:
            data = await payload()
            ep = chosen[0]
            used.append(ep.url)
            ep.calls += 1
            return await self._post(ep.url, data), ep.url

        chosen: list[Endpoint] = []

        def choose() -> AdaptiveLimiter:
            chosen[:] = [self.endpoints[self._pick()]]
            return chosen[0].limiter

        out = await call_with_retries(
            once, choose, self.policy, redact=redact, breaker=lambda: chosen[0].breaker
        )
        latency = time.perf_counter() - t0
        if out.error is not None:
            return ChatReply(text=None, error=out.error, attempts=len(used), latency_s=latency,
                             endpoint=used[-1] if used else None)  # fmt: skip
        data, url = out.value
        text, finish, usage = data["text"], data["finish_reason"], data["usage"]
        return ChatReply(
            text=text, usage=usage, latency_s=latency, attempts=out.attempts,
            finish_reason=finish, endpoint=url, reasoning=data.get("reasoning"),
        )  # fmt: skip

    async def _post(self, base: str, payload: bytes) -> dict[str, Any]:
        import httpx

        from cafe.clients.transport import NO_REPLY, REFUSED

        bare, auth = self._target(base)
        headers = {"Content-Type": "application/json", **auth}
        try:
            r = await self._http.get().post(f"{bare}/chat/completions", payload, headers)
        except NO_REPLY as e:  # refused, DNS, TLS, dropped: the breaker counts these
            raise CallError(f"{base}: {type(e).__name__}: {e}", no_reply=True,
                            refused=isinstance(e, REFUSED)) from None  # fmt: skip
        except httpx.TimeoutException:
            raise CallError(f"{base}: timed out") from None
        except httpx.TransportError as e:  # refused/reset: try again (maybe elsewhere)
            raise CallError(f"{base}: {type(e).__name__}: {e}") from None
        if r.status in (401, 403):  # no retry fixes a key: say which variable to set
            names = self.key_env[base]
            state = "is set but was refused" if env_key(*names) else "is not set"
            raise CallError(
                f"{base}: HTTP {r.status} (unauthorised): {names[0]} {state}; "
                f"{missing_key_hint(names, base)}",
                status=r.status,
                retryable=False,
            )
        if r.status != 200:
            detail = r.text[:200].replace("\n", " ")
            raise CallError(
                f"{base}: HTTP {r.status}: {detail}",
                status=r.status,
                retryable=is_retryable_status(r.status),
                retry_after=parse_retry_after(r.headers.get("retry-after")),
            )
        return parse_reply(r.content, base)

    async def acount_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` by the served model's own tokenizer: ``POST /tokenize`` at the
        server's root (vLLM answers ``count`` for a ``prompt``; llama.cpp ``tokens`` for a
        ``content``; both fields are sent, no special tokens added). None when every attempt
        failed; NoTokenizeEndpoint when the server has no such route or answers it with
        something that is no token count (a gateway answering every path with a chat
        completion): no retry helps. Through the endpoint's breaker, like every call."""
        import httpx

        from cafe.clients.transport import NO_REPLY, REFUSED

        ep = self.endpoints[0]
        bare, auth = self._target(ep.url)
        root = bare[: -len("/v1")] if bare.endswith("/v1") else bare
        body = json.dumps(
            {"model": self.model, "prompt": text, "content": text,
             "add_special_tokens": False, "add_special": False}
        ).encode()  # fmt: skip
        headers = {"Content-Type": "application/json", **auth}

        async def once() -> int:
            try:
                r = await self._http.get().post(f"{root}/tokenize", body, headers)
            except NO_REPLY as e:
                raise CallError(f"{root}/tokenize: {type(e).__name__}: {e}", no_reply=True,
                                refused=isinstance(e, REFUSED)) from None  # fmt: skip
            except httpx.TransportError as e:
                raise CallError(f"{root}/tokenize: {type(e).__name__}: {e}") from None
            if r.status in (400, 404, 405, 422, 501):  # no such route, or not this shape
                raise NoTokenizeEndpoint(f"{root} has no /tokenize (HTTP {r.status})")
            if r.status != 200:
                raise CallError(
                    f"{root}/tokenize: HTTP {r.status}", status=r.status,
                    retryable=is_retryable_status(r.status),
                    retry_after=parse_retry_after(r.headers.get("retry-after")),
                )  # fmt: skip
            count = token_count_of(r.content)
            if count is None:
                raise NoTokenizeEndpoint(
                    f"{root} answers /tokenize with no token count ({r.text[:60]!r})"
                )
            return count

        # a probe, not a model call: a few attempts, then the run counts words
        policy = dataclasses.replace(self.policy, max_attempts=min(3, self.policy.max_attempts))
        out = await call_with_retries(once, ep.limiter, policy, redact=redact, breaker=ep.breaker)
        return None if out.error is not None else out.value

    async def amodel_info(self) -> list[dict[str, Any] | None]:
        """Per endpoint, what the server says about this model (``GET /models``: ``served_row``):
        the fields that tell one server's weights from another's
        (vLLM's ``root`` and ``parent``, ``owned_by``; not ``created``, which vLLM stamps per
        request). None for an endpoint without the route or a usable entry: one attempt with
        a short timeout, since it names weights and must never stall or stop a run."""
        import httpx

        from cafe.clients.transport import read_capped

        wait = min(10.0, self.policy.timeout_s)

        async def body(url: str, auth: dict[str, str]) -> bytes | None:
            async with httpx.AsyncClient(timeout=wait) as http:
                async with http.stream("GET", url, headers=auth) as r:
                    if r.status_code != 200:
                        return None
                    return await read_capped(r.aiter_bytes(), MODEL_INFO_BYTES)

        async def one(url: str) -> dict[str, Any] | None:
            bare, auth = self._target(url)
            try:  # bounded in time as a whole (not per read) and in size
                raw = await asyncio.wait_for(body(f"{bare}/models", auth), wait)
                data = json.loads(raw) if raw is not None else None
            except (httpx.HTTPError, ValueError, RecursionError, TimeoutError):
                return None
            rows = data.get("data") if isinstance(data, dict) else None
            return served_row(rows if isinstance(rows, list) else [], self.model)

        return list(await asyncio.gather(*(one(e.url) for e in self.endpoints)))

    async def aclose(self) -> None:
        poster = self._http.pop_current()
        if poster is not None:
            await poster.aclose()


def served_row(rows: list[Any], model: str) -> dict[str, Any] | None:
    """What a GET /models list says about the weights behind ``model``: the row whose id (or one
    of its ``aliases``) is ``model``; else the server's only row, which serves whatever name it
    is asked for (llama.cpp lists its GGUF alias); else every row, as ``listed``. None where the
    list names no model."""
    rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("id"), str)]

    def info(row: dict[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in MODEL_INFO if isinstance(row.get(k), (str, int))}

    for row in rows:
        aliases = row.get("aliases")
        if row["id"] == model or (isinstance(aliases, list) and model in aliases):
            return info(row)
    if len(rows) == 1:
        return info(rows[0])
    return {"listed": sorted((info(r) for r in rows), key=lambda r: r["id"])} if rows else None


def spliced_json(body: dict[str, Any], blobs: dict[str, bytes]) -> bytes:
    """``json.dumps(body)`` with each placeholder string of ``blobs`` replaced by its bytes, which
    are JSON string content already (base64 needs no escaping): the encoder would otherwise scan
    every character of every clip for escapes, ~0.3 ms of CPU per 4-second clip."""
    raw = json.dumps(body).encode()
    for token, blob in blobs.items():
        head, found, tail = raw.partition(token.encode())
        if not found:  # extra_body replaced the messages: never send a body without its clip
            raise ValueError("a clip's placeholder is missing from the request body "
                             "(does extra_body set messages?)")  # fmt: skip
        raw = head + blob + tail
    return raw


class NoTokenizeEndpoint(Exception):
    """The server has no ``/tokenize`` route: its reasoning lengths need another counter."""


def token_count_of(raw: bytes) -> int | None:
    """The count in a /tokenize reply (vLLM ``count``, llama.cpp ``tokens``); None when the body
    is no such reply."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    count = data.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = data.get("tokens")
    return len(tokens) if isinstance(tokens, list) and "count" not in data else None


def parse_reply(raw: bytes, base: str = "") -> dict[str, Any]:
    """text, finish_reason and usage from a chat-completions body. A body that is not one
    (broken JSON, ``message`` a string, ``content`` a number) is a retryable server fault
    (CallError naming it), never cached nor handed on; usage counts that are no counts are
    recorded unknown. Reasoning that a server's reasoning parser split off (vLLM
    ``reasoning_content``) is put back in front as ``<think>…</think>``: for reasoning models
    that text is what we evaluate."""
    fault = f"{base}: malformed reply (server fault)"
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        msg = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise CallError(f"{base}: malformed reply body: {raw[:120]!r}") from None
    if not isinstance(choice, dict) or not isinstance(msg, dict):
        what = type(choice if not isinstance(choice, dict) else msg).__name__
        raise CallError(f"{fault}: choices[0] or its message is a {what}, not an object")
    content = msg.get("content")
    if isinstance(content, list):  # some servers return content parts
        if not all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
            raise CallError(f"{fault}: message content parts are not text parts")
        content = "".join(p.get("text", "") for p in content)
    if content is None:
        if msg.get("refusal"):
            raise CallError(f"{base}: refused: {msg['refusal']}", retryable=False)
        raise CallError(f"{base}: reply has no message content")
    if not isinstance(content, str):
        raise CallError(f"{fault}: message content is a {type(content).__name__}, not text")
    content = clean_text(content)
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        reasoning = clean_text(reasoning)
        content = f"<think>{reasoning}</think>{content}"
    else:
        reasoning = None
    finish = choice.get("finish_reason")
    return {
        "text": content,
        "finish_reason": finish if isinstance(finish, str) else None,
        "usage": _usage(data.get("usage")),
        "reasoning": reasoning,
    }


def _usage(u: Any) -> dict[str, Any]:
    """The token counts of a reply's usage, each a count or None (cafe.clients.common)."""
    u = u if isinstance(u, dict) else {}
    usage = {k: u.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    details = u.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    if details.get("reasoning_tokens") is not None:
        usage["reasoning_tokens"] = details["reasoning_tokens"]
    prompt_details = u.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    if prompt_details.get("audio_tokens") is not None:  # priced apart by audio models
        usage["audio_prompt_tokens"] = prompt_details["audio_tokens"]
    return valid_usage(usage)


@CLIENTS.register("openai")
class OpenAIClient(OpenAICompatClient):
    """api.openai.com (or OPENAI_BASE_URL): key required; reasoning models take
    max_completion_tokens."""

    kind = "openai"
    default_url = OPENAI_URL
    key_required = True
    token_field = "max_completion_tokens"
    thinking_switch = False  # api.openai.com rejects chat_template_kwargs
