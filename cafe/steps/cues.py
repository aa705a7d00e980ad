"""`cafe cues` on the step engine: cue recall of MMAR v2 runs, offline always and by the cue
judge (cafe.judge.cues.CueJudge) when one is named; its judgements go to
``cues.judgements.<judge>.jsonl`` under the judge's spec, resumed and compacted by the engine
(each judge call cached in the engine's call cache under the judge's spec)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.folder.status import StepStatus, by_counts, require_usable
from cafe.judge.base import JudgeItem
from cafe.judge.cues import NO_CAPTION, CueJudge
from cafe.judge.pipeline import load_caption_map
from cafe.metrics.cues import cues_of, cues_section, format_cues
from cafe.records import Judgement
from cafe.steps import step_function
from cafe.steps.base import Context, Flags, Option, Records, Section, Setup, Step, View
from cafe.steps.judged import Judging, bench_breakdowns, judge_calls
from cafe.store import judge_records_name


def answered(view: View) -> StepStatus:
    n = sum(p.error is None and p.raw_output is not None for p in view.predictions)
    return by_counts(len(view.predictions), n, "items", "failed")


class CuesStep(Step):
    """Cue recall of RUN_DIR (MMAR v2): the share of each item's ground-truth audio
    cues that the model's reasoning mentions, by a documented offline matcher and optionally by
    the CAFE judge, plus how the cues agree with the CAFE judge's required events (after
    `cafe judge`).

    \b
    cafe cues runs/x
    cafe cues runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """

    name = "cues"
    help = "Cue recall of MMAR runs: offline matcher and CAFE judge, vs required events."
    writes = Section("cues")
    # the cue judge caches each call under its JudgeSpec
    records = Records("cues", Judgement, caches="calls")
    prints = staticmethod(format_cues)
    positional = ("judge", "judge_model", "endpoints", "concurrency")
    options = (
        Option("judge", str, None, "Also ask this CAFE judge (cue list as required events); "
               "offline matcher only without.", kind=("openai", "gemini", "openai-compatible"),
               needs="judge_model"),
        Option("judge_model", str, None, "Judge model name."),
        Option("template", str, None, "Own template.", kind="file"),
        Option("captions", str, None, "Captions file (optional).", kind="file"),
    )  # fmt: skip
    layout = ("judge", "judge_model",
              Flags("judge_server", {"concurrency": "judge_concurrency"},
                    {"endpoint_help": "Judge server URL (repeatable).", "concurrency_help": None,
                     "order": ("endpoints", "concurrency", "api_key_env")}),
              "captions", "template", Flags("cache"), Flags("json"), Flags("progress"))  # fmt: skip

    def setup(self, ctx: Context) -> Setup:
        """The cue judge and its spec (its records are kept while it is the same), or the
        offline matcher's spec and no calls."""
        view, o = ctx.view, ctx.spec
        if not view.predictions:
            raise ValueError(f"{view.root}: no predictions.jsonl records")
        if not any(cues_of(s) for s in view.samples):
            raise ValueError(
                f"{view.root}: no sample carries cues; cue recall needs MMAR v2 metadata "
                "(MMAR-meta.jsonl, field 'cue')"
            )
        require_usable("cafe cues", answered(view), str(view.root))
        if not o["judge"]:
            return Setup({"step": self.name, "version": self.version}, calls=False)
        template = str(o["template"]) if o["template"] else None
        judge = CueJudge(o["judge"], o["judge_model"], template, **judge_calls(ctx))
        captions = load_caption_map(view.samples, o["captions"])
        return Setup(judge.spec.to_dict(), Judging(judge, captions), judge.identity)

    def plan(self, ctx: Context) -> list[Any]:
        """Answered predictions of items with cues (a failed one counts 0 of its cues offline
        and is not asked; nor is one whose sample is gone)."""
        cap = ctx.state.captions
        return [
            JudgeItem(s, p, cap.get(s.id) or NO_CAPTION) for s, p in ctx.view.items() if cues_of(s)
        ]

    async def call(self, ctx: Context, item: JudgeItem) -> Judgement:
        return await ctx.state.judge.ajudge(item)

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        if ctx.state is None:  # the offline matcher: every answered prediction
            return answered(ctx.view)
        return super().status(ctx, records)

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view, judge, described = ctx.view, ctx.state and ctx.state.judge, None
        if judge is not None:
            described = {**judge.describe(), "file": judge_records_name("cues", judge.identity),
                         "calls_sent": judge.calls}  # fmt: skip
        cafe_judgements = [j for j in view.judgements if j.status == "ok"] or None
        return cues_section(
            view.samples, view.predictions, bench_breakdowns(view.manifest),
            list(records) if judge else None, described, cafe_judgements,
        )  # fmt: skip


# its old name, for callers that import it (cafe.api.cues: made from the registration)
cues_run = step_function(CuesStep)
