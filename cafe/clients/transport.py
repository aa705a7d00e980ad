"""HTTP for the chat clients, over aiohttp's connection handling when aiohttp is installed (it
costs ~0.9 ms of CPU per call at concurrency 64 where httpx's own transport costs ~2.7 ms, which
decides whether 2 cores sustain 300+ calls/s), else over httpx's own transport in small pools
("lanes": httpcore scans every pooled connection on each event, so one pool of 64 connections
spends more CPU than the calls). SDKs that take an httpx client (google-genai) get one over the
same transport (``http_lanes``); our own protocol code posts through a ``Poster``, which skips
httpx's Request and Response objects on aiohttp. Either way errors are httpx's exceptions."""

from __future__ import annotations

import asyncio
import errno
import importlib.util
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from cafe.clients.common import HTTP_TRANSPORTS, Lanes, ssl_context

#: connections per httpx-transport client (see module docstring)
LANE_CONNECTIONS = 4
#: response headers that describe the wire encoding aiohttp has already undone
_WIRE_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}
#: request headers aiohttp sets itself
_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding"}


TRANSPORTS = HTTP_TRANSPORTS
#: httpx errors that mean the server gave no reply at all: refused, DNS, TLS (ConnectError),
#: no connection in time (ConnectTimeout), dropped before any answer (RemoteProtocolError)
NO_REPLY = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
#: of those, the ones that say nothing is there (the breaker's dead server); the others
#: happen to busy servers too (a full listen backlog resets connections)
REFUSED = (httpx.ConnectError,)
#: the largest reply body read, after decompression: a reply past it is a server fault (a
#: 1 MB gzip body can inflate to 1 GB)
MAX_REPLY_BYTES = 64 * 1024 * 1024
#: connect errors (errno) that mean nobody listens there or no route leads there
_REFUSED_ERRNOS = {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH,
                   errno.EADDRNOTAVAIL, errno.ENOENT}  # fmt: skip


class ReplyTooLarge(httpx.TransportError):
    """A reply body (decompressed) past MAX_REPLY_BYTES: read no further."""

    def __init__(self, limit: int):
        super().__init__(f"reply body larger than {limit // (1024 * 1024)} MB (decompressed)")


async def read_capped(chunks: Any, limit: int | None = None) -> bytes:
    """Join an async iterator of (decompressed) chunks, stopping past ``limit`` bytes
    (default MAX_REPLY_BYTES)."""
    limit = MAX_REPLY_BYTES if limit is None else limit
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(limit)
        parts.append(chunk)
    return b"".join(parts)


def _refused(e: Exception) -> bool:
    """A connect error that says nobody is there (refused, no route, no such name, TLS)."""
    import socket
    import ssl

    cause = getattr(e, "os_error", None) or e
    if isinstance(cause, (socket.gaierror, ssl.SSLError, ssl.CertificateError)):
        return True
    return getattr(cause, "errno", None) in _REFUSED_ERRNOS


def _uses_aiohttp(transport: str) -> bool:
    if transport not in TRANSPORTS:
        raise ValueError(f"http_transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    return transport == "aiohttp" or (
        transport == "auto" and importlib.util.find_spec("aiohttp") is not None
    )


def http_lanes(connections: int, timeout_s: float, transport: str = "auto") -> Lanes[Any]:
    """httpx.AsyncClient(s) for ``connections`` concurrent calls, bound to the running loop.
    ``transport``: "auto" (aiohttp when installed), "aiohttp" or "httpx"."""
    if _uses_aiohttp(transport):
        aio = AiohttpTransport(connections, timeout_s)
        return Lanes(lambda n: httpx.AsyncClient(transport=aio, timeout=timeout_s), 1, 1)
    timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))

    def one(n: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        return httpx.AsyncClient(timeout=timeout, limits=limits, verify=ssl_context())

    return Lanes(one, connections, LANE_CONNECTIONS)


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: Mapping[str, str]  # case-insensitive
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class Poster:
    """POST bytes, get an HttpReply, for ``connections`` concurrent calls on the running loop.
    On aiohttp the call goes straight to its session: an httpx Request and Response per call
    cost ~0.3 ms of CPU, a fifth of what a whole call costs at 300 calls/s on 2 cores."""

    def __init__(self, connections: int, timeout_s: float, transport: str = "auto"):
        self._aio = AiohttpTransport(connections, timeout_s) if _uses_aiohttp(transport) else None
        self._lanes = None if self._aio else http_lanes(connections, timeout_s, "httpx")

    async def post(self, url: str, content: bytes, headers: dict[str, str]) -> HttpReply:
        if self._aio is not None:
            return await self._aio.send("POST", url, content, headers)
        lanes = self._lanes
        assert lanes is not None
        lane = lanes.take()
        try:
            async with lanes.items[lane].stream("POST", url, content=content, headers=headers) as r:
                return HttpReply(r.status_code, r.headers, await read_capped(r.aiter_bytes()))
        finally:
            lanes.give(lane)

    async def aclose(self) -> None:
        if self._aio is not None:
            await self._aio.aclose()
        for http in self._lanes.items if self._lanes else ():
            await http.aclose()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx async transport that sends through one aiohttp session (created lazily inside
    the running loop). aiohttp errors map to httpx's, so callers handle one exception family."""

    def __init__(self, connections: int, timeout_s: float):
        self.connections = connections
        self.timeout_s = timeout_s
        self._session: Any = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        r = await self.send(request.method, str(request.url), await request.aread(), headers)
        kept = [(k, v) for k, v in r.headers.items() if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(r.status, headers=kept, content=r.content, request=request)

    async def send(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> HttpReply:
        """One request through the session; aiohttp's errors raised as httpx's."""
        import aiohttp

        if self._session is None:
            self._session = session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connections, ssl=ssl_context()),
                timeout=aiohttp.ClientTimeout(
                    total=self.timeout_s, connect=min(10.0, self.timeout_s)
                ),
                auto_decompress=True,
            )
            # a client dropped without aclose() (scripts, tests) closes its sockets when it is
            # collected, instead of aiohttp logging "Unclosed client session" at exit
            weakref.finalize(self, _close_quietly, session)
        try:
            async with self._session.request(method, url, data=content, headers=headers) as r:
                if (
                    not r.headers.get("content-encoding")
                    and (r.content_length or 0) > MAX_REPLY_BYTES
                ):  # said up front: not worth reading
                    raise ReplyTooLarge(MAX_REPLY_BYTES)
                # decompressed as it streams in (aiohttp): never the whole inflated body
                body = await read_capped(r.content.iter_chunked(1 << 16))
                return HttpReply(r.status, r.headers, body)
        except asyncio.TimeoutError:
            raise httpx.ReadTimeout("timed out") from None
        except aiohttp.ClientConnectorError as e:
            kind = httpx.ConnectError if _refused(e) else httpx.RemoteProtocolError
            raise kind(f"{type(e).__name__}: {e}") from None
        except aiohttp.ServerDisconnectedError as e:  # dropped before any answer
            raise httpx.RemoteProtocolError(f"{type(e).__name__}: {e}") from None
        except aiohttp.ClientConnectionError as e:  # reset mid-call: a busy server too
            raise httpx.ReadError(f"{type(e).__name__}: {e}") from None
        except aiohttp.ClientError as e:
            raise httpx.TransportError(f"{type(e).__name__}: {e}") from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _close_quietly(session: Any) -> None:
    connector = getattr(session, "connector", None)
    if connector is not None and not connector.closed:
        try:
            connector._close()  # synchronous socket close; aiohttp's async close needs a loop
        except Exception:
            pass
