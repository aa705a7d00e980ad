"""Judged accuracy (the paper's † figures): an answer-extraction judge names the option each
(item, run) output chose (its final answer read; thinking kept raw, never parsed), the
benchmark's rule scores that choice, and the "judged_accuracy" section holds it
(cafe.metrics.judged): a labelled accuracy with the judge named, beside (never instead of) the
official headline. ``selective`` asks the judge only where the official rule cannot decide
(``decide``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.clients.thinking import final_answer, judge_max_tokens
from cafe.judge.base import Asking
from cafe.judge.extraction import build_prompt
from cafe.judge.spec import JudgeSpec
from cafe.parsing import extract_answer
from cafe.prompts import text_template
from cafe.records import Prediction, Sample, Verdict

SECTION = "judged_accuracy"
MAX_TOKENS = 16
RETRIES = 1  # one retry, with a reminder: the same prompt again would give the same reply
REMINDER = "\n\nReply with one option letter (A, B, C, ...) or NONE, and nothing else."


def lettered(choices: Sequence[str]) -> str:
    return "\n".join(f"({chr(ord('A') + i)}) {c}" for i, c in enumerate(choices))


def read_verdict(text: str | None, choices: Sequence[str]) -> tuple[str | None, str]:
    """(choice, status) from a judge reply: a letter or the option text, or NONE."""
    reply = final_answer(text)
    if not reply:
        return None, "unparseable"
    if reply.strip().strip(".").upper() == "NONE":
        return None, "none"
    choice, status = extract_answer(reply, list(choices))
    return (choice, "ok") if choice is not None else (None, "unparseable")


class AnswerJudge(Asking):
    def __init__(
        self, kind: str, model: str, endpoints: Sequence[str] = (), *,
        template: str | Path | None = None, cache: Cache | None = None, concurrency: int = 16,
        thinking: bool = False, thinking_budget: int | None = None, client: Any = None,
        calls: Any = None,  # a CallPlan (batch transport, cost ledger)
    ):  # fmt: skip
        self.template, self.template_hash = text_template("answer", template)
        self.thinking = thinking
        self.max_tokens = judge_max_tokens(MAX_TOKENS, thinking, thinking_budget)
        self.spec = JudgeSpec(
            task="answer-extraction", kind=kind, model=model, template_hash=self.template_hash,
            endpoint=JudgeSpec.endpoint_of(endpoints), thinking=bool(thinking),
            max_tokens=self.max_tokens, temperature=0.0, retries=RETRIES,
        )  # fmt: skip
        self.connect(self.spec, endpoints, cache, client, calls=calls, concurrency=concurrency)

    @staticmethod
    def decide(sample: Sample, pred: Prediction) -> Verdict | None:
        """The verdict where the official rule decides (it mapped the answer to a choice)."""
        if pred.error or pred.parse_status != "ok" or pred.answer not in sample.choices:
            return None
        return Verdict(pred.sample_id, pred.run_index, pred.answer, "ok",
                       "decided by the official rule", source="rule")  # fmt: skip

    @staticmethod
    def failed(item: tuple[Sample, Prediction], why: str) -> Verdict:
        """A (sample, prediction) whose call raised (a bug on one item: that item only)."""
        return Verdict(item[1].sample_id, item[1].run_index, None, "failed", why)

    async def verdict(self, sample: Sample, pred: Prediction) -> Verdict:
        if pred.raw_output is None or pred.error:
            return Verdict(pred.sample_id, pred.run_index, None, "failed", pred.error)
        prompt = build_prompt(self.template, question=sample.question, output=pred.raw_output,
                              choices=lettered(sample.choices))  # fmt: skip

        def parse(text: str | None) -> tuple[Any, str | None]:
            choice, status = read_verdict(text, sample.choices)
            return ((choice, status), None) if status != "unparseable" else (None, status)

        def request(attempt: int, _: str | None) -> tuple[Any, dict[str, Any]]:
            text_in = prompt if attempt == 0 else prompt + REMINDER
            # the reminder is in the prompt, so in the key
            return [{"role": "user", "content": text_in}], {"prompt": text_in}

        got, raws = await self.caller.ask_retrying(RETRIES, request, parse, temperature=0.0,
                                                   max_tokens=self.max_tokens)  # fmt: skip
        if got.error is not None:
            return Verdict(pred.sample_id, pred.run_index, None, "failed", got.error)
        choice, status = got.value if got.ok else (None, "unparseable")
        return Verdict(pred.sample_id, pred.run_index, choice, status, "\n---\n".join(raws))
