"""Adapter "openai-audio": GPT-4o audio models (gpt-4o-audio-preview…) on api.openai.com or
OPENAI_BASE_URL, audio sent as base64 WAV ``input_audio``; key from OPENAI_API_KEY."""

from __future__ import annotations

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter


@ADAPTERS.register("openai-audio")
class OpenAIAudioAdapter(ChatAPIAdapter):
    client_kind = "openai"
    engine = "openai"
    client_defaults = {"concurrency": 16, "extra_body": {"modalities": ["text"]}}
