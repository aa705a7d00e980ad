"""The judge contract: one (item, run) in, one Judgement out, never an exception per item."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cafe.caller import Asks, Caller, CallerSpec
from cafe.judge.spec import JudgeSpec
from cafe.records import Judgement, Prediction, Sample


@dataclass
class JudgeItem:
    sample: Sample
    prediction: Prediction
    caption: str | None  # ground-truth caption (Sample.caption or a captions file)


class Judge(ABC):
    identity: str  # judge kind + model: part of every cache key and Judgement
    template_hash: str
    temperature: float | None = None
    needs_caption: bool = True
    uses_cache: bool = True
    task: str = "cafe-extraction"

    @property
    def spec(self) -> JudgeSpec:
        """What decides this judge's judgements (a judge with a model spells more in its own)."""
        return JudgeSpec(
            task=self.task, kind=self.identity, model=None, endpoint=None,
            template_hash=self.template_hash, temperature=self.temperature,
        )  # fmt: skip

    @abstractmethod
    async def ajudge(self, item: JudgeItem) -> Judgement: ...

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict:
        """What metrics.json records about the judge."""
        return {
            "judge": self.identity,
            "template_hash": self.template_hash,
            "temperature": self.temperature,
        }

    def judgement(self, item: JudgeItem, **fields: Any) -> Judgement:
        p = item.prediction
        return Judgement(sample_id=p.sample_id, run_index=p.run_index, judge=self.identity,
                         template_hash=self.template_hash, **fields)  # fmt: skip

    def failed(self, item: JudgeItem, reason: str, raw: str | None = None) -> Judgement:
        return self.judgement(item, raw_reply=raw, status="failed", reason=reason)


class Asking(Asks):
    """A judge that asks a chat model through the one caller (cafe.caller): its ``spec`` keys
    every call, how calls are made never does (cafe.judge.spec)."""

    def connect(
        self, spec: JudgeSpec, endpoints: Sequence[str], cache: Any, client: Any, **options: Any
    ) -> None:
        """Ask under ``spec``; ``options``: ``calls`` (the command's CallPlan: batch, cost
        ledger), ``concurrency`` and further client options. The client is built now: no server
        named or no key fails once, before any item."""
        self.kind, self.model, self.identity = spec.kind, spec.model, spec.identity
        plan, bound = options.pop("calls", None), int(options.pop("concurrency", 16))
        how = CallerSpec(
            spec.kind, spec.model, tuple(endpoints), bound, thinking=spec.thinking, options=options
        )
        self.caller = Caller(how, identity=spec, cache=cache, client=client, plan=plan)
