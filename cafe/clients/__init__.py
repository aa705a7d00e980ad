"""Chat clients shared by API adapters, CAFE judges, captioners and MPAR² reward judges.

    client = make_client("openai-compatible", "Qwen/Qwen3-32B", endpoints=["http://h:8000/v1"])
    reply = await client.achat(messages, temperature=0.0, max_tokens=512)
    reply = run_sync(client.achat(messages))  # from synchronous code: cafe.execution.run_sync

Kinds: "openai-compatible" (vLLM serve, SGLang…), "openai" (OPENAI_API_KEY), "gemini"
(GEMINI_API_KEY or GOOGLE_API_KEY). Keys come from the environment only."""

from __future__ import annotations

from typing import Any

from cafe.clients.base import CLIENTS, ChatClient, ChatReply

# name -> "module:Class"; the SDKs import only when their client is asked for
for _name, _target in {
    "openai-compatible": "cafe.clients.openai_compat:OpenAICompatClient",
    "openai": "cafe.clients.openai_compat:OpenAIClient",
    "gemini": "cafe.clients.gemini:GeminiClient",
}.items():
    CLIENTS.add_lazy(_name, _target)


def make_client(
    kind: str,
    model: str,
    endpoints: list[str] | tuple[str, ...] | str | None = None,
    *,
    calls: Any = None,
    **options: Any,
) -> ChatClient:
    """A chat client of ``kind`` for ``model``; ``endpoints`` are base URLs sharing the load
    (default: the protocol's environment variable or public endpoint). Options: concurrency,
    timeout_s, max_attempts, base_delay, max_delay, recover_after, and per-kind extras.
    ``calls``: a cafe.clients.calls.CallPlan (batch transport, dry run, cost ledger)."""
    cls = CLIENTS.get(kind)
    if calls is None:
        return cls(model, endpoints, **options)
    options = calls.client_options(options)
    return calls.build(kind, model, lambda: cls(model, endpoints, **options))


__all__ = ["CLIENTS", "ChatClient", "ChatReply", "make_client"]
