"""The chat-client contract. One client per wire protocol (OpenAI-compatible, OpenAI, Gemini);
adapters, judges, captioners and reward judges all talk through these, so retries, rate limits,
caching keys and key handling live in one place.

Messages use the OpenAI chat shape with our own audio part, which each client converts:
    {"role": "user", "content": [{"type": "text", "text": "..."},
                                 {"type": "audio", "path": "/abs/clip.wav"}]}
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cafe.clients.breaker import BREAK_AFTER, Breaker
from cafe.clients.common import Endpoint, check_http_transport, least_loaded
from cafe.clients.ratelimit import AdaptiveLimiter, RetryPolicy, add_call_stats
from cafe.registry import Registry


@dataclass
class ChatReply:
    text: str | None
    usage: dict[str, Any] = field(default_factory=dict)  # prompt/completion tokens as reported
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None  # set when every retry failed; text is then None
    finish_reason: str | None = None  # as the server reported it (stop, length, …)
    endpoint: str | None = None  # base URL that answered (several endpoints share the load)
    reasoning: str | None = None  # thinking the server split off (also in text, as <think>)

    @property
    def final(self) -> str:
        """The reply without any thinking: what a judge parses (cafe.clients.thinking)."""
        from cafe.clients.thinking import final_answer

        return final_answer(self.text)


class ChatClient(ABC):
    """Async chat client; ``identity`` names protocol + model (+ endpoint) for cache keys."""

    identity: str

    @abstractmethod
    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        **extra: Any,
    ) -> ChatReply: ...

    async def aclose(self) -> None:
        pass


class PooledChatClient(ChatClient):
    """A client that spreads its calls over several endpoints, each with its own adaptive
    limiter, under one retry policy and HTTP transport choice."""

    def _init_pool(
        self,
        urls: Sequence[str | None],
        *,
        concurrency: int,
        timeout_s: float,
        max_attempts: int,
        base_delay: float,
        max_delay: float,
        recover_after: int,
        http_transport: str,
        break_after: int = BREAK_AFTER,
        server_option: str | None = None,
    ) -> None:
        """``break_after``: attempts refused in a row that end calls to an endpoint
        (0: never); ``server_option``: the option that named the endpoints (--endpoint,
        --judge-endpoint), said when one stops answering."""
        self.endpoints = [
            Endpoint(
                u, AdaptiveLimiter(concurrency, recover_after=recover_after),
                breaker=Breaker(u, break_after, server_option),
            )
            for u in urls
        ]  # fmt: skip
        self.policy = RetryPolicy(
            max_attempts=max_attempts, base_delay=base_delay, max_delay=max_delay,
            timeout_s=timeout_s,
        )  # fmt: skip
        self.concurrency = concurrency
        self.http_transport = check_http_transport(http_transport)  # see cafe.clients.transport
        self._rr = itertools.count()

    def _pick(self) -> int:
        """Index of the endpoint for the next call (least loaded; round-robin among ties;
        ServerUnreachable once every endpoint's breaker has opened)."""
        return least_loaded(self.endpoints, next(self._rr))

    def call_stats(self) -> dict[str, Any]:
        """429s, 5xx, calls without reply, retries and seconds waited, over every endpoint."""
        return add_call_stats(*(e.limiter.stats() for e in self.endpoints))


def call_stats_of(client: Any) -> dict[str, Any]:
    """The call counters of a client, looking through wrappers (metering, batching) that keep
    the direct client as ``inner``; zeros for a client without a limiter (a dry run)."""
    seen = 0
    while client is not None and seen < 8:
        if isinstance(client, PooledChatClient):
            return client.call_stats()
        client, seen = getattr(client, "inner", None), seen + 1
    return add_call_stats()


CLIENTS: Registry[type[ChatClient]] = Registry(
    "chat client", entry_point_group="cafe.clients", base=ChatClient
)
