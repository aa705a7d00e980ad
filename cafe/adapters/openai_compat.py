"""Adapter "openai-compatible": any server speaking OpenAI chat completions with input_audio —
``vllm serve``, SGLang, StepFun's vLLM fork (Step-Audio-R1), vLLM-Omni (MiMo-Audio). Several
``endpoints`` share the work; vLLM's extra sampling fields (repetition_penalty, top_k,
min_tokens) pass through. Reasoning length is counted by the served model's own tokenizer: the
server's ``/tokenize`` (vLLM, llama.cpp), or ``-o tokenizer=hf:<id>`` for a local copy; a server
without that route falls back to words, said at load and labelled so."""

from __future__ import annotations

from typing import Any

from cafe.adapters.base import ADAPTERS
from cafe.adapters.chat_api import ChatAPIAdapter
from cafe.adapters.token_counts import TokenCounter, remembered


@ADAPTERS.register("openai-compatible")
class OpenAICompatAdapter(ChatAPIAdapter):
    client_kind = "openai-compatible"
    engine = "openai-compatible"
    passthrough = frozenset({"repetition_penalty", "top_k", "min_p", "min_tokens"})
    client_defaults = {"concurrency": 64}  # per endpoint; a vLLM server batches them
    budget_method = "provider reasoning effort (OpenAI reasoning_effort, from the budget)"

    def budget_fields(self, budget: int) -> dict[str, Any]:
        from cafe.clients.thinking import reasoning_effort

        return {"reasoning_effort": reasoning_effort(budget)}

    def default_counter(self) -> TokenCounter:
        """Decided once per run by one probe: a tokenizer's answer, or the word fallback (said
        once) for a server without the route, one that answers it with something else, or one
        whose every attempt failed. A server nobody answers for stops the run here
        (ServerUnreachable, through the endpoint's breaker like every call)."""
        from cafe.clients.openai_compat import NoTokenizeEndpoint

        count = remembered(lambda text: self._loop.run(self.client.acount_tokens(text)))
        try:
            # the server says now whether it has the route, not halfway through
            probe = count("a")
        except NoTokenizeEndpoint as e:
            return self._fallback(str(e))
        if probe is None:
            return self._fallback("its /tokenize did not answer")

        def counted(text: str) -> int | None:
            try:
                return count(text)
            except NoTokenizeEndpoint:  # refused for this text only: its length is unknown
                return None

        return TokenCounter(f"server-tokenize:{self.model}", counted)
