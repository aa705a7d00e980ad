"""`cafe rubric` on the step engine: MMAR rubric scores of a run's predictions, to the MMAR
authors' protocol (cafe.judge.rubric.RubricJudge rates; cafe.metrics.rubric sums up). Its
records go to ``rubric.<judge>.jsonl`` under the judge's spec; each rater's call is cached in the
engine's call cache under the judge's spec."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.clients.base import call_stats_of
from cafe.counters import by_status, share_totals
from cafe.folder.status import StepStatus, by_counts
from cafe.judge.rubric import PAPER_JUDGE, RATERS, RETRIES, SEED, TEMPERATURE, TRIM, RubricJudge
from cafe.metrics.rubric import format_rubric, rubric_section
from cafe.records import RubricScore
from cafe.steps.base import Flags, Option, Step, View
from cafe.steps.cues import bench_breakdowns
from cafe.store import SAMPLES, judge_records_name

#: a record that is no score of the model's answer: the judge's reply, or the call, failed
UNUSABLE = ("failed", "invalid")


class RubricStep(Step):
    name = "rubric"
    help = "Score MMAR predictions against each item's rubric (the MMAR authors' protocol)."
    section_name = "rubric"
    record_cls = RubricScore
    caches = "calls"  # the rubric judge caches each rater's call under its JudgeSpec
    options = (
        Option(
            "judge",
            str,
            "openai",
            "Chat protocol of the judge (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
            kind=("openai", "gemini", "openai-compatible"),
        ),
        Option("judge_model", str, PAPER_JUDGE, "Judge model (the authors')."),
        Option("raters", int, RATERS, bounds=(1, 10**8)),  # judge calls per item
        Option(
            "trim",
            int,
            TRIM,
            "Drop this many lowest and highest rater scores before averaging.",
            bounds=(0, 10**8),
        ),
        Option("temperature", float, TEMPERATURE, bounds=(0, 10)),
        Option("seed", int, SEED, bounds=(0, 2**32 - 1)),
        Option(
            "retries",
            int,
            RETRIES,
            "Extra attempts per rater after an invalid reply.",
            bounds=(0, 10**8),
        ),
        Option(
            "template",
            str,
            None,
            "Your own rubric template (same '----- part -----' layout as the packaged one).",
            kind="file",
        ),
    )
    layout = ("judge", "judge_model",
              Flags("judge_server", {"concurrency": "judge_concurrency"},
                    {"endpoint_help": "Judge server base URL (repeatable).",
                     "order": ("endpoints", "concurrency", "api_key_env")}),
              "raters", "trim", "temperature", "seed", "retries", "template", Flags("cache"),
              Flags("batch", kw={"plan": True}), Flags("json"), Flags("progress"))  # fmt: skip

    def __init__(self, concurrency: int = 16, endpoints: Sequence[str] = (),
                 **client_options: Any) -> None:  # fmt: skip
        self.concurrency = concurrency
        self.endpoints, self.client_options = tuple(endpoints), client_options

    def spec(self, **options: Any) -> dict[str, Any]:
        """The rubric judge's spec (built now: no key or no server fails here, in one line,
        before anything is written)."""
        o = {opt.name: options.get(opt.name, opt.default) for opt in self.options}
        self.scorer = RubricJudge(
            o["judge"], o["judge_model"], self.endpoints,
            str(o["template"]) if o["template"] else None, self.call_cache.cache,
            raters=o["raters"], trim=o["trim"], temperature=o["temperature"], seed=o["seed"],
            retries=o["retries"], concurrency=self.concurrency, **self.client_options,
        )  # fmt: skip
        return self.scorer.spec.to_dict()

    def records_file(self, spec: dict[str, Any]) -> str:
        return judge_records_name("rubric", self.scorer.identity)

    def check(self, view: View) -> None:
        if not view.predictions:
            raise ValueError(f"{view.root}: no predictions.jsonl records to rate")
        if not any(s.meta.get("rubric") for s in view.samples):
            raise ValueError(
                f"{view.root}: no sample carries a rubric; rubric scoring needs MMAR v2 "
                "metadata (MMAR-meta.jsonl from the MMAR GitHub repository)"
            )

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        """Every prediction (the judge decides what is rated); one whose sample is gone gets a
        failed record."""
        by_id = {s.id: s for s in view.samples}
        return [(by_id.get(p.sample_id), p) for p in view.predictions]

    def failed(self, item: Any, why: str) -> Any:
        return self.scorer.record(item[1], "failed", reason=why)

    async def call(self, item: Any, spec: dict[str, Any]) -> Any:
        sample, p = item
        if sample is None:
            return self.failed(item, f"{SAMPLES}: sample {p.sample_id} not found")
        return await self.scorer.ascore(sample, p)

    async def aclose(self) -> None:
        await self.scorer.aclose()

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        usable = sum(r.status not in UNUSABLE for r in records)
        return by_counts(len(records), usable, "items", "got no usable rating")

    def counters(self, counts: dict[str, Any]) -> dict[str, Any]:
        return {"calls": self.scorer.calls, "cache_hits": self.call_cache.hits,
                "rated": counts["done"], "replies": counts["records"]}  # fmt: skip

    def disk_counters(self, records: Sequence[Any]) -> dict[str, Any]:
        return {**share_totals(records), "rated": len(records),
                "replies": by_status([r.status for r in records])}  # fmt: skip

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        s = self.scorer
        records = [*records, *self._no_prediction(view, records)]
        section = rubric_section(records, view.samples, bench_breakdowns(view.manifest))
        return {
            "judge": s.describe(),
            "protocol": "MMAR code/evaluation_rubrics.py: official string match gates; "
            f"{s.raters} raters, drop {s.trim} lowest and highest, average the rest",
            **section,
            "file": self.records_file(spec),
            "calls": {
                "sent": s.calls,
                "cache_hits": self.call_cache.hits,
                "rated_now": self.this_invocation.counts.get("done", 0),
                "wall_s": round(self.this_invocation.wall_s, 3),
                **call_stats_of(s.caller.client),
            },  # fmt: skip
        }

    def _no_prediction(self, view: View, records: Sequence[Any]) -> list[RubricScore]:
        """Every item of every run is accounted for: one with no prediction scores 0."""
        s = self.scorer
        keys = {(p.sample_id, p.run_index) for p in view.predictions}
        runs = sorted({p.run_index for p in view.predictions})
        return [
            RubricScore(x.id, r, s.identity, s.template_hash, "no_prediction", score=0.0,
                        protocol=s.protocol, reason="no prediction for this (item, run)")
            for x in view.samples for r in runs if (x.id, r) not in keys
        ]  # fmt: skip

    def format(self, section: dict[str, Any]) -> str:
        return format_rubric(section)


def rubric_run(
    run_dir: str | Path,
    judge: str = "openai",
    judge_model: str | None = PAPER_JUDGE,
    endpoints: Sequence[str] = (),
    concurrency: int = 16,
    *,
    raters: int = RATERS,
    trim: int = TRIM,
    temperature: float = TEMPERATURE,
    seed: int | None = SEED,
    retries: int = RETRIES,
    template: str | Path | None = None,
    cache: Cache | str | Path | None = None,
    progress: bool = True,
    limit: int | None = None,
    **client_options: Any,
) -> dict[str, Any]:
    """Rate a run folder against its MMAR rubrics; returns (and writes) the "rubric" section.
    ``judge`` is a chat client kind (openai, gemini, openai-compatible); ``limit``: the first
    N (item, run)s only."""
    from cafe.steps.engine import run_step

    step = RubricStep(concurrency, endpoints, **client_options)
    options = dict(judge=judge, judge_model=judge_model, raters=raters, trim=trim, seed=seed,
                   temperature=temperature, retries=retries, template=template)  # fmt: skip
    return run_step(step, run_dir, cache=cache, concurrency=concurrency, progress=progress,
                    limit=limit, **options).section  # fmt: skip
