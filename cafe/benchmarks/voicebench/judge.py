"""VoiceBench's GPT judge (api_judge.py): for the open subsets a 1-5 rating of the reply, for
sd-qa a Yes / No against the reference; gpt-4o-mini by default, temperature 0.5, top_p 0.95,
three samples per item (their replies are the row's ``score``), a system message. Our own
prompt wording (open_judge.txt, qa_judge.txt) with the official facts: the rubric's five levels,
the score alone / one word.

The call itself is one method, VoiceBenchJudge.ask, on the answer judge's machinery (call
cache, batch transport, cost ledger: cafe.judge.verdict.VerdictJudge; the engine's caller
where the judge has one): each sample is its own cached call, so a resumed run asks only for
the samples it lacks."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.cache import text_entry
from cafe.execution import cached_call, reply_entry
from cafe.judge.extraction import build_prompt
from cafe.judge.verdict import Judged, VerdictJudge, VerdictSpec
from cafe.records import Prediction, Sample

HERE = Path(__file__).parent
SYSTEM = "You are a careful assistant who judges answers to the user's request."
SAMPLES = 3
JUDGED = ("open", "qa")  # the evaluators whose rows carry the judge's replies


def _evaluator(sample: Sample) -> str:
    from cafe.benchmarks.voicebench.scorers import EVALUATORS

    return EVALUATORS.get(str(sample.meta.get("subset")), "")


@dataclass(frozen=True)
class SampledSpec(VerdictSpec):
    """A VerdictSpec whose judge draws ``samples`` replies per item (VoiceBenchJudge)."""

    samples: int = SAMPLES

    @property
    def judge_class(self) -> type[VerdictJudge]:
        return VoiceBenchJudge


def judge_spec() -> SampledSpec:
    from cafe.benchmarks.voicebench import OFFICIAL_JUDGE

    return SampledSpec(
        name="voicebench-gpt",
        template=HERE / "open_judge.txt",
        model=OFFICIAL_JUDGE,
        temperature=0.5,
        top_p=0.95,
        max_tokens=1024,
        system=SYSTEM,
        reader=lambda text: text,
        applies=lambda s: _evaluator(s) in JUDGED,
    )


class VoiceBenchJudge(VerdictJudge):
    """The VoiceBench judge call: ``samples`` cached replies per (item, run), the reply texts as
    the verdict's value (the official row's ``score``); one failed sample fails the verdict (its
    siblings stay cached)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.templates = {"open": self.template,
                          "qa": (HERE / "qa_judge.txt").read_text(encoding="utf-8")}  # fmt: skip
        both = self.templates["open"] + "\n\n" + self.templates["qa"]
        self.template_hash = hashlib.sha256(both.encode("utf-8")).hexdigest()
        self.spec = dataclasses.replace(self.spec, template_hash=self.template_hash)
        if getattr(self, "caller", None) is not None:  # the engine's caller keys on it too
            self.caller.identity = self.spec

    def prompt(self, sample: Sample, output: str) -> str:
        kind = _evaluator(sample)
        reference = str(sample.meta.get("reference") or "")
        return build_prompt(self.templates[kind], question=sample.question, answer=reference,
                            output=output)  # fmt: skip

    async def ask(self, messages: list[dict[str, Any]], inputs: dict[str, Any]) -> tuple[Any, Any]:
        """One sample: (reply text, None) or (None, error). The one place this judge calls: on
        the engine's caller (cafe.caller, issue 42) where the judge has one, else through the
        call cache directly; both key the call on (spec, inputs), so their caches agree. Any
        text is usable: the evaluators read it (a reply that is no score is named there)."""
        vs = self.verdict_spec
        sampling = {"temperature": vs.temperature, "max_tokens": self.max_tokens,
                    "top_p": vs.top_p}  # fmt: skip
        caller = getattr(self, "caller", None)
        if caller is not None:
            got = await caller.ask(messages, inputs, lambda text: (text, None), **sampling)
            return (got.text, None) if got.error is None else (None, got.error)

        async def call() -> Any:
            self.calls += 1
            return await self.client.achat(messages, **sampling)

        got, reply = await cached_call(self.cache, self.spec, inputs, call, entry=reply_entry,
                                       valid=text_entry)  # fmt: skip
        return (got["text"], None) if got is not None else (None, reply.error)

    async def verdict(self, sample: Sample, pred: Prediction) -> Judged:  # type: ignore[override]
        if pred.raw_output is None or pred.error:
            return Judged(pred.sample_id, pred.run_index, None, "failed",
                          pred.error or "null output")  # fmt: skip
        prompt = self.prompt(sample, pred.raw_output)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        texts: list[str] = []
        for k in range(getattr(self.verdict_spec, "samples", SAMPLES)):
            inputs = {"prompt": prompt, "system": SYSTEM, "top_p": self.verdict_spec.top_p,
                      "sample": k}  # fmt: skip
            text, error = await self.ask(messages, inputs)
            if text is None:
                return Judged(pred.sample_id, pred.run_index, None, "failed", error)
            texts.append(text.strip())
        return Judged(pred.sample_id, pred.run_index, None, "ok", "\n---\n".join(texts),
                      value=texts)  # fmt: skip
