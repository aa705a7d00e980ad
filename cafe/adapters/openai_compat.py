"""Adapter "openai-compatible": any server speaking OpenAI chat completions with input_audio —
``vllm serve``, SGLang, StepFun's vLLM fork (Step-Audio-R1), vLLM-Omni (MiMo-Audio). Several
``endpoints`` share the work; vLLM's extra sampling fields (repetition_penalty, top_k,
min_tokens) pass through."""

from __future__ import annotations

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter


@ADAPTERS.register("openai-compatible")
class OpenAICompatAdapter(ChatAPIAdapter):
    client_kind = "openai-compatible"
    engine = "openai-compatible"
    passthrough = frozenset({"repetition_penalty", "top_k", "min_p", "min_tokens"})
    client_defaults = {"concurrency": 64}  # per endpoint; a vLLM server batches them
