"""Adapter "openai-audio": GPT-4o audio models (gpt-4o-audio-preview…) on api.openai.com or
OPENAI_BASE_URL, audio sent as base64 WAV ``input_audio``; key from OPENAI_API_KEY. Reasoning
length is counted with GPT-4o's public tokenizer (tiktoken, o200k_base)."""

from __future__ import annotations

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter
from cafe.adapters.token_counts import TokenCounter, tiktoken_counter


@ADAPTERS.register("openai-audio")
class OpenAIAudioAdapter(ChatAPIAdapter):
    client_kind = "openai"
    engine = "openai"
    client_defaults = {"concurrency": 16, "extra_body": {"modalities": ["text"]}}
    #: the encoding of the GPT-4o family (tiktoken's model table maps gpt-4o to it)
    encoding = "o200k_base"

    def default_counter(self) -> TokenCounter:
        try:
            return tiktoken_counter(self.encoding)
        except (ImportError, OSError, ValueError) as e:  # no tiktoken, no BPE file offline
            return self._fallback(f"tiktoken {self.encoding} unavailable ({type(e).__name__})")
