"""Adapter "gemini": any Gemini model through google-genai (inline WAV, the Files API for long
clips); key from GEMINI_API_KEY or GOOGLE_API_KEY, base URL from ``endpoint``. Reasoning length
is counted by the API's own ``countTokens`` for the model (one call per reasoning text)."""

from __future__ import annotations

from typing import Any

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter
from cafe.adapters.token_counts import TokenCounter, remembered


@ADAPTERS.register("gemini")
class GeminiAdapter(ChatAPIAdapter):
    client_kind = "gemini"
    engine = "gemini"
    passthrough = frozenset({"top_k"})
    client_defaults = {"concurrency": 16}
    budget_method = "provider thinking budget (Gemini thinking_config.thinking_budget = N)"

    def budget_fields(self, budget: int) -> dict[str, Any]:
        return {"thinking_config": {"thinking_budget": budget}}

    def default_counter(self) -> TokenCounter:
        count = remembered(lambda text: self._loop.run(self.client.acount_tokens(text)))

        return TokenCounter(f"gemini-count_tokens:{self.model}", count)
