"""What every chat client shares: keys read from the environment (and scrubbed from any text
that could reach a file or log), audio parts encoded from clip paths, per-event-loop resources
(the bound on calls in flight), a background event loop for synchronous callers and the cause
named when a server refuses a request longer than its context."""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import re
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cafe.clients.breaker import Breaker
from cafe.clients.ratelimit import AdaptiveLimiter

T = TypeVar("T")

#: where a key for a server named with --endpoint comes from unless ``api_key_env`` names another
#: variable: never from another service's variable (OPENAI_API_KEY, GEMINI_API_KEY)
ENDPOINT_KEY_ENV = "CAFE_ENDPOINT_API_KEY"


def env_key(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def redact(text: str) -> str:
    """Error text safe to record (see cafe.redaction: URL credentials, key variable values)."""
    from cafe.redaction import scrub_text

    return scrub_text(text)


def key_env_for(
    url: str | None,
    service_urls: Sequence[str | None],
    service_env: tuple[str, ...],
    api_key_env: str | None,
) -> tuple[str, ...]:
    """The variable(s) a call to ``url`` takes its key from: the one the user named
    (``api_key_env``); else the service's own variables when ``url`` is that service as the
    user configured it (``service_urls``: its default, its SDK's base-URL variable); else
    CAFE_ENDPOINT_API_KEY. A third-party server never receives another service's key."""
    from cafe.redaction import register_key_env

    if api_key_env:
        register_key_env(api_key_env)
        return (api_key_env,)
    if url in service_urls:
        return service_env
    return (ENDPOINT_KEY_ENV,)


def check_url(url: str, option: str | None = None) -> str:
    """``url`` when it can be a server's URL (http or https, a host, a port in range); else a
    ValueError of one line, before any call is made (not a minute of retries)."""
    from urllib.parse import urlsplit

    from cafe.redaction import scrub_text

    named = f"{option} " if option else "endpoint "
    shown = scrub_text(str(url))
    try:
        parts = urlsplit(str(url))
        port = parts.port  # ValueError when out of range or not a number
    except ValueError as e:
        raise ValueError(f"{named}{shown!r} is not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{named}{shown!r} is not a URL: give it as http://HOST:PORT (or https://)"
        )
    if port == 0:
        raise ValueError(f"{named}{shown!r} is not a URL (port 0)")
    return url


def split_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """``http://user:pass@host/v1`` -> (``http://host/v1``, Basic auth header): credentials in a
    URL become a header (HTTP stacks refuse both at once), used when no key is set."""
    import base64 as b64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None:
        return url, {}
    from cafe.redaction import register_url_credentials

    register_url_credentials(url)  # a server echoing them back gets them masked
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    user, pw = unquote(parts.username), unquote(parts.password or "")
    token = b64.b64encode(f"{user}:{pw}".encode()).decode()
    return urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


def missing_key_hint(names: tuple[str, ...], url: str | None) -> str:
    """What to set when a server answers 401/403 or a key is absent."""
    where = url or "the service's default endpoint"
    if names == (ENDPOINT_KEY_ENV,):
        return (
            f"{where} takes its key from {ENDPOINT_KEY_ENV} (or name another variable with "
            "--api-key-env NAME / -o api_key_env=NAME)"
        )
    return f"{where} takes its key from {' or '.join(names)}"


def clean_text(text: str) -> str:
    """A server's text with each lone surrogate (JSON may spell one: "\\ud800") replaced by
    U+FFFD: no UTF-8 file could hold it."""
    from cafe.jsontext import LONE_SURROGATE

    return LONE_SURROGATE.sub("\ufffd", text)


def token_count(value: Any) -> int | None:
    """A usage field as a count: a non-negative finite integer (an integral float is one); any
    other value (a list, a string, -3, 1e308, NaN) is unknown (None), never summed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**53:
        value = int(value)
    return value if isinstance(value, int) and 0 <= value < 2**53 else None


def valid_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """``usage`` with every count validated (token_count)."""
    return {k: token_count(v) for k, v in usage.items()}


def audio_wav(path: str) -> bytes:
    """A clip as 16 kHz mono 16-bit WAV bytes: the one audio encoding sent to every API."""
    from cafe.audio import api_wav

    return api_wav(path)


#: clips larger than this on disk are encoded off the event loop; smaller ones (most) inline,
#: where a thread hand-off costs more CPU than the encoding itself (cafe.audio.api_wav)
OFFLOOP_AUDIO_BYTES = 2_000_000


async def audio_wav_async(path: str) -> bytes:
    """audio_wav from a coroutine: in a worker thread only for a large clip."""
    try:
        large = os.path.getsize(path) > OFFLOOP_AUDIO_BYTES
    except OSError:  # missing: the encoder says so
        large = False
    return await asyncio.to_thread(audio_wav, path) if large else audio_wav(path)


def audio_b64(path: str) -> str:
    return base64.b64encode(audio_wav(path)).decode("ascii")


def audio_bytes_on_disk(messages: list[dict[str, Any]]) -> int:
    """Total file size of the audio parts (missing files count 0: the encoder reports them)."""
    total = 0
    for m in messages:
        for p in parts_of(m):
            if p.get("type") == "audio":
                try:
                    total += os.path.getsize(p["path"])
                except (OSError, KeyError):
                    pass
    return total


def split_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """System text (joined) and the remaining turns."""
    system = [text_of(m) for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    return ("\n".join(system) if system else None), rest


def parts_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in parts_of(message) if p.get("type") == "text")


#: the HTTP stacks a client may run on (see cafe.clients.transport)
HTTP_TRANSPORTS = ("auto", "aiohttp", "httpx")


def check_http_transport(name: str) -> str:
    if name not in HTTP_TRANSPORTS:
        raise ValueError(f"http_transport {name!r}: use auto, aiohttp or httpx")
    return name


@dataclass
class Endpoint:
    """One base URL a client spreads its calls over, with its own adaptive limiter and circuit
    breaker."""

    url: str | None  # None: the SDK's default endpoint (Gemini: Google's)
    limiter: AdaptiveLimiter
    calls: int = 0
    breaker: Breaker | None = None


def least_loaded(endpoints: Sequence[Endpoint], turn: int) -> int:
    """Index of the endpoint with the fewest calls in flight relative to its current limit;
    ties go round-robin, starting at ``turn``. Endpoints whose breaker opened are skipped; when
    every one has, ServerUnreachable is raised (cafe.clients.breaker)."""
    start = turn % len(endpoints)
    order = list(range(start, len(endpoints))) + list(range(start))
    alive = [i for i in order if endpoints[i].breaker is None or not endpoints[i].breaker.is_open]
    if not alive:
        raise endpoints[order[0]].breaker.error()  # type: ignore[union-attr]
    order = alive
    lims = [e.limiter for e in endpoints]
    return min(order, key=lambda i: (lims[i].in_flight + 1) / lims[i].limit)


class PerLoop(Generic[T]):
    """One resource per running event loop (HTTP sessions are bound to the loop that made them),
    so a client works under repeated ``asyncio.run`` calls and from several threads."""

    def __init__(self, factory: Callable[[], T]):
        self._factory = factory
        self._items: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            item = self._items.get(loop)
            if item is None:
                item = self._items[loop] = self._factory()
            return item

    def pop_current(self) -> T | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        with self._lock:
            return self._items.pop(loop, None)


@functools.cache
def ssl_context() -> Any:
    """One TLS context for every HTTP client: loading the CA bundle costs ~0.1 s per client."""
    import ssl

    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


class Lanes(Generic[T]):
    """Several HTTP clients used as one: each call takes the least-busy lane."""

    def __init__(self, factory: Callable[[int], T], connections: int, per_lane: int):
        n = max(1, -(-connections // per_lane))
        self.items = [factory(min(per_lane, connections)) for _ in range(n)]
        self.load = [0] * n

    def take(self) -> int:
        i = min(range(len(self.items)), key=self.load.__getitem__)
        self.load[i] += 1
        return i

    def give(self, i: int) -> None:
        self.load[i] -= 1


class BackgroundLoop:
    """A daemon thread running one event loop; sync code submits coroutines to it. Adapters use
    one per instance so every runner thread shares a single limiter and connection pool."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


_shared_lock = threading.Lock()
_shared: BackgroundLoop | None = None


def shared_loop() -> BackgroundLoop:
    """The process-wide background loop: the runner calls generate() from several threads, and
    all of them share one client, limiter and connection pool living on this loop."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = BackgroundLoop()
        return _shared


class Limiter:
    """At most ``n`` calls in flight on whichever event loop runs them (a semaphore per loop:
    TRL's reward loop, a test's, the shared client loop), as ``async with limiter:``."""

    def __init__(self, n: int) -> None:
        self._sem = PerLoop(lambda: asyncio.Semaphore(max(1, n)))

    async def __aenter__(self) -> None:
        await self._sem.get().acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._sem.get().release()


_CTX = (
    re.compile(r"exceed context window of (\d+)", re.I),  # llama-cpp-python
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"context size \((\d+) tokens\)", re.I),  # llama.cpp server
    re.compile(r'"n_ctx"\s*:\s*(\d+)'),
)
_ASKED = (
    re.compile(r"requested tokens \((\d+)\)", re.I),
    re.compile(r"you requested (\d+) tokens", re.I),
    re.compile(r"request \((\d+) tokens\)", re.I),
    re.compile(r'"n_prompt_tokens"\s*:\s*(\d+)'),
)


def context_too_small(error: str | None) -> str | None:
    """The cause named when ``error`` is a server refusing a request longer than its context
    (HTTP 400 of llama.cpp, llama-cpp-python, vLLM, OpenAI), else None."""
    if not error or "HTTP 400" not in error or "context" not in error.lower():
        return None
    ctx = next((m.group(1) for p in _CTX if (m := p.search(error))), None)
    asked = next((m.group(1) for p in _ASKED if (m := p.search(error))), None)
    need = f"at least {asked} tokens" if asked else "a larger context"
    return (f"context too small: the server's context is {ctx or 'smaller than asked'} tokens, "
            f"the request needs {asked or 'more'} (prompt plus the reply's budget): serve the "
            f"judge with {need} (`cafe serve ... -o n_ctx=N`, llama.cpp's --ctx-size)")  # fmt: skip
