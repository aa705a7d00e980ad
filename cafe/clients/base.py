"""The chat-client contract. One client per wire protocol (OpenAI-compatible, OpenAI, Gemini);
adapters, judges, captioners and reward judges all talk through these, so retries, rate limits,
caching keys and key handling live in one place.

Messages use the OpenAI chat shape with our own audio part, which each client converts:
    {"role": "user", "content": [{"type": "text", "text": "..."},
                                 {"type": "audio", "path": "/abs/clip.wav"}]}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

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


class ChatClient(ABC):
    """Async chat client; ``identity`` names protocol + model (+ endpoint) for cache keys."""

    identity: str

    @abstractmethod
    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        **extra: Any,
    ) -> ChatReply: ...

    async def aclose(self) -> None:
        pass


CLIENTS: Registry[type[ChatClient]] = Registry("chat client", entry_point_group="cafe.clients")
