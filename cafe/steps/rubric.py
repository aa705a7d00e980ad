"""`cafe rubric` on the step engine: MMAR rubric scores of a run's predictions, to the MMAR
authors' protocol (cafe.judge.rubric.RubricJudge rates; cafe.metrics.rubric sums up). Its
records go to ``rubric.<judge>.jsonl`` under the judge's spec; each rater's call is cached in the
engine's call cache under the judge's spec, through the engine's call plan (batch, costs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.clients.calls import cost_lines
from cafe.errors import CafeError
from cafe.folder.status import StepStatus, by_counts
from cafe.judge.rubric import PAPER_JUDGE, RATERS, RETRIES, SEED, TEMPERATURE, TRIM, RubricJudge
from cafe.metrics.rubric import format_rubric, rubric_section
from cafe.records import RubricScore
from cafe.steps import step_function
from cafe.steps.base import Context, Flags, Option, Records, Section, Setup, Step, View, calls_of
from cafe.steps.judged import bench_breakdowns, judge_calls
from cafe.store import SAMPLES, judge_records_name


def printed(section: dict[str, Any]) -> str:
    """What `cafe rubric` prints; with items left unrated (their calls failed) it prints that,
    the calls' costs, and exits 1: a score left absent must not look like success."""
    text, failed = format_rubric(section), section["status"].get("failed", 0)
    if not failed:
        return text
    print("\n".join((text, *cost_lines(section.get("calls", {})))))
    raise CafeError(
        f"{failed} of {section['total']} items could not be rated (judge calls failed; "
        f"reasons in {section['file']}): the score is absent; run the same command again "
        "to retry them"
    )


def no_prediction(judge: RubricJudge, view: View) -> list[RubricScore]:
    """Every item of every run is accounted for: one with no prediction scores 0."""
    keys = {(p.sample_id, p.run_index) for p in view.predictions}
    runs = sorted({p.run_index for p in view.predictions})
    return [
        RubricScore(x.id, r, judge.identity, judge.template_hash, "no_prediction", score=0.0,
                    protocol=judge.protocol, reason="no prediction for this (item, run)")
        for x in view.samples for r in runs if (x.id, r) not in keys
    ]  # fmt: skip


class RubricStep(Step):
    """Score RUN_DIR's MMAR predictions against each item's rubric, to the MMAR
    authors' protocol: only correct answers are rated, RATERS judge calls per item, trimmed
    mean; results by modality, category and sub-category go into metrics.json "rubric".

    \b
    cafe rubric runs/qwen2.5-omni-7b-mmar-v2                       # gpt-4o-2024-11-20, 5 raters
    cafe rubric runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """

    name = "rubric"
    help = "Score MMAR predictions against each item's rubric (the MMAR authors' protocol)."
    writes = Section("rubric")
    # the rubric judge caches each rater's call under its JudgeSpec
    records = Records("rubric", RubricScore, caches="calls", counted=("rated", "replies"))
    prints = staticmethod(printed)
    positional = ("judge", "judge_model", "endpoints", "concurrency")
    options = (
        Option("judge", str, "openai", "Chat protocol of the judge (keys from OPENAI_API_KEY / "
               "GEMINI_API_KEY).", kind=("openai", "gemini", "openai-compatible")),
        Option("judge_model", str, PAPER_JUDGE, "Judge model (the authors')."),
        Option("raters", int, RATERS, bounds=(1, 10**8)),  # judge calls per item
        Option("trim", int, TRIM, "Drop this many lowest and highest rater scores before "
               "averaging.", bounds=(0, 10**8)),
        Option("temperature", float, TEMPERATURE, bounds=(0, 10)),
        Option("seed", int, SEED, bounds=(0, 2**32 - 1)),
        Option("retries", int, RETRIES, "Extra attempts per rater after an invalid reply.",
               bounds=(0, 10**8)),
        Option("template", str, None, "Your own rubric template (same '----- part -----' layout "
               "as the packaged one).", kind="file"),
    )  # fmt: skip
    layout = ("judge", "judge_model",
              Flags("judge_server", {"concurrency": "judge_concurrency"},
                    {"endpoint_help": "Judge server base URL (repeatable).",
                     "order": ("endpoints", "concurrency", "api_key_env")}),
              "raters", "trim", "temperature", "seed", "retries", "template", Flags("cache"),
              Flags("batch"), Flags("json"), Flags("progress"))  # fmt: skip

    def setup(self, ctx: Context) -> Setup:
        """The rubric judge and its spec (built now: no key or no server fails here, in one
        line, before anything is written), through the engine's call plan."""
        view, o = ctx.view, ctx.spec
        if not view.predictions:
            raise ValueError(f"{view.root}: no predictions.jsonl records to rate")
        if not any(s.meta.get("rubric") for s in view.samples):
            raise ValueError(
                f"{view.root}: no sample carries a rubric; rubric scoring needs MMAR v2 "
                "metadata (MMAR-meta.jsonl from the MMAR GitHub repository)"
            )
        judge = RubricJudge(
            o["judge"], o["judge_model"], template=str(o["template"]) if o["template"] else None,
            raters=o["raters"], trim=o["trim"], temperature=o["temperature"], seed=o["seed"],
            retries=o["retries"], **judge_calls(ctx),
        )  # fmt: skip
        return Setup(judge.spec.to_dict(), judge, judge.identity)

    def plan(self, ctx: Context) -> list[Any]:
        """Every prediction (the judge decides what is rated); one whose sample is gone is its
        failed record."""
        by_id = {s.id: s for s in ctx.view.samples}
        return [(by_id[p.sample_id], p) if p.sample_id in by_id else ctx.state.failed(
            (None, p), f"{SAMPLES}: sample {p.sample_id} not found")
            for p in ctx.view.predictions]  # fmt: skip

    async def call(self, ctx: Context, item: Any) -> RubricScore:
        return await ctx.state.ascore(*item)

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        # a failed call or an invalid reply is no score of the model's answer
        usable = sum(r.status not in ("failed", "invalid") for r in records)
        return by_counts(len(records), usable, "items", "got no usable rating")

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        s, view, made = ctx.state, ctx.view, ctx.made
        records = [*records, *no_prediction(s, view)]
        section = rubric_section(records, view.samples, bench_breakdowns(view.manifest))
        calls = calls_of(ctx, s.calls, s.caller.client, rated_now=made.counts.get("done", 0),
                         wall_s=round(made.wall_s, 3))  # fmt: skip
        return {
            "judge": s.describe(),
            "protocol": "MMAR code/evaluation_rubrics.py: official string match gates; "
            f"{s.raters} raters, drop {s.trim} lowest and highest, average the rest",
            **section,
            "file": judge_records_name("rubric", s.identity),
            "calls": calls,
        }


# its old name, for callers that import it (cafe.api.rubric: made from the registration)
rubric_run = step_function(RubricStep)
