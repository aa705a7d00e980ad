"""Judges parse only a server's final answer, never its thinking.

A reasoning server either splits its thinking off (vLLM ``--reasoning-parser``: the chat client
puts it back in front as ``<think>…</think>`` so model evaluation sees it) or leaves it inline in
the reply (``<think>…</think>``; some chat templates open ``<think>`` in the prompt, so only the
closing tag appears). ``final_answer`` cuts all of that away; the raw reply is kept by the caller.

OpenAI-compatible judges are asked not to think by default (``chat_template_kwargs``:
``{"enable_thinking": false}``, which Qwen3 templates honour); a judge that may think gets its
thinking budget added to the answer's token budget, so the thinking cannot eat the answer."""

from __future__ import annotations

import re

# only <think>: servers and Qwen3-style templates use it; <thinking> and <reasoning> are MPAR²
# sections that a CoT writer's final answer legitimately holds
_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<think>", re.IGNORECASE)
_CLOSE = re.compile(r"</think>", re.IGNORECASE)

#: the request field that switches a Qwen3-style chat template's thinking off
NO_THINKING_BODY = {"chat_template_kwargs": {"enable_thinking": False}}
#: tokens a thinking judge may spend before its answer (added to the answer's budget)
DEFAULT_THINKING_BUDGET = 4096


def final_answer(text: str | None) -> str:
    """The reply without thinking: closed blocks removed, text before a lone closing tag removed
    (the template opened it), nothing after an opening tag that never closes (thinking cut off by
    the token budget: there is no answer)."""
    if not text:
        return ""
    out = _BLOCK.sub("", text)
    closes = list(_CLOSE.finditer(out))
    if closes:
        out = out[closes[-1].end() :]
    m = _OPEN.search(out)
    if m:
        out = out[: m.start()]
    return out.strip()


def judge_max_tokens(answer_tokens: int, thinking: bool, budget: int | None = None) -> int:
    """Token budget of a judge call: the answer's, plus the thinking budget when it may think."""
    if not thinking:
        return answer_tokens
    return answer_tokens + (DEFAULT_THINKING_BUDGET if budget is None else int(budget))


#: OpenAI's reasoning_effort levels by the token budget they stand for (upper bounds)
EFFORTS = ((0, "minimal"), (1024, "low"), (8192, "medium"))


def reasoning_effort(budget: int) -> str:
    """The reasoning_effort a token budget maps to, for protocols with levels, not tokens."""
    return next((name for bound, name in EFFORTS if budget <= bound), "high")
