"""HTTP for the chat clients: always the httpx API, over aiohttp's connection handling when
aiohttp is installed (it costs ~0.9 ms of CPU per call at concurrency 64 where httpx's own
transport costs ~2.7 ms, which decides whether 2 cores sustain 300+ calls/s), else over httpx's
own transport in small pools ("lanes": httpcore scans every pooled connection on each event, so
one pool of 64 connections spends more CPU than the calls)."""

from __future__ import annotations

import asyncio
import importlib.util
import weakref
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


def http_lanes(connections: int, timeout_s: float, transport: str = "auto") -> Lanes[Any]:
    """httpx.AsyncClient(s) for ``connections`` concurrent calls, bound to the running loop.
    ``transport``: "auto" (aiohttp when installed), "aiohttp" or "httpx"."""
    if transport not in TRANSPORTS:
        raise ValueError(f"http_transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    if transport == "aiohttp" or (
        transport == "auto" and importlib.util.find_spec("aiohttp") is not None
    ):
        transport = AiohttpTransport(connections, timeout_s)
        return Lanes(lambda n: httpx.AsyncClient(transport=transport, timeout=timeout_s), 1, 1)
    timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))

    def one(n: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        return httpx.AsyncClient(timeout=timeout, limits=limits, verify=ssl_context())

    return Lanes(one, connections, LANE_CONNECTIONS)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx async transport that sends through one aiohttp session (created lazily inside
    the running loop). aiohttp errors map to httpx's, so callers handle one exception family."""

    def __init__(self, connections: int, timeout_s: float):
        self.connections = connections
        self.timeout_s = timeout_s
        self._session: Any = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
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
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        try:
            async with self._session.request(
                request.method, str(request.url), data=await request.aread(), headers=headers
            ) as r:
                content = await r.read()
                status, raw_headers = r.status, list(r.headers.items())
        except asyncio.TimeoutError:
            raise httpx.ReadTimeout("timed out", request=request) from None
        except aiohttp.ClientConnectionError as e:
            raise httpx.ConnectError(f"{type(e).__name__}: {e}", request=request) from None
        except aiohttp.ClientError as e:
            raise httpx.TransportError(f"{type(e).__name__}: {e}", request=request) from None
        kept = [(k, v) for k, v in raw_headers if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(status, headers=kept, content=content, request=request)

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
