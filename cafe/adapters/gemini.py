"""Adapter "gemini": any Gemini model through google-genai (inline WAV, the Files API for long
clips); key from GEMINI_API_KEY or GOOGLE_API_KEY, base URL from ``endpoint``."""

from __future__ import annotations

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter


@ADAPTERS.register("gemini")
class GeminiAdapter(ChatAPIAdapter):
    client_kind = "gemini"
    engine = "gemini"
    passthrough = frozenset({"top_k"})
    client_defaults = {"concurrency": 16}
