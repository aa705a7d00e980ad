"""`cafe judge` on the step engine (the CAFE judge of cafe.judge): judge every (item, run) of a
run folder, resumably, and write the CAFE metrics ("cafe" and "decay" sections). The engine
resumes under the judge's spec (setup says how a stored one is read), judges what is left,
appends to ``judgements.<judge>.jsonl``, compacts it and, once the judge did its job, mirrors it
to ``judgements.jsonl`` (the run's current judge)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.cache import Cache
from cafe.errors import ConfigError, RunFolderError
from cafe.execution import pending_calls
from cafe.failures import most_failed
from cafe.folder.status import StepStatus, by_counts
from cafe.judge import JUDGES, batching, build_judge
from cafe.judge.base import Judge, JudgeItem
from cafe.judge.pipeline import JudgeFailedError, JudgeUnusable, judging_reasons, load_caption_map
from cafe.judge.spec import REDONE, SPEC_NAME, normalized
from cafe.metrics.cafe import cafe_section, format_cafe, reply_health
from cafe.metrics.decay import decay_section
from cafe.records import Judgement, Sample
from cafe.reporting import warn
from cafe.steps import step_function
from cafe.steps.base import Context, Flags, Option, Output, Records, Section, Setup, Step, calls_of
from cafe.steps.judged import JUDGE_CACHE, Judging, bench_breakdowns, judge_calls
from cafe.store import JUDGEMENTS, SAMPLES, judge_records_name


def _replies(records: Sequence[Judgement]) -> dict[str, int]:
    """The counters' reply health: usable, empty, unparseable, failed."""
    health = reply_health(list(records))
    return {k: health[k] for k in ("ok", "empty", "unparseable", "failed")}


class CafeJudgeStep(Step):
    """Judge every prediction in RUN_DIR and write Acc_per, Err_per, Err_use and Err_omit
    (micro by default) into its metrics.json, with judgements in judgements.<judge>.jsonl.

    Resumable and cached: re-running skips what is judged and replays cached judge replies.

    \b
    cafe judge runs/x --judge rule
    cafe judge runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1 --captions mmar_captions.jsonl
    """

    name = "judge"
    help = "The CAFE judge: Acc_per, Err_per, Err_use and Err_omit of every (item, run)."
    writes = Section("cafe", outcome=False, needs_samples=True)  # its shape predates outcomes
    records = Records("cafe", Judgement, caches="calls", noun="judge calls",
                      spec_name=SPEC_NAME, redone=REDONE, counted=("judged", "replies"),
                      replies=_replies, current=JUDGEMENTS, holds=False)  # fmt: skip
    positional = ("judge", "judge_model", "endpoints", "concurrency", "template", "mode",
                  "progress")  # fmt: skip
    prints = staticmethod(format_cafe)
    options = (
        Option("judge", str, "rule", "rule (synth, offline), openai-compatible (e.g. `vllm serve "
               "Qwen/Qwen3-32B`), openai or gemini (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
               names="cafe.judge:JUDGES", needs="judge_model"),
        Option("judge_model", str, None, "Model name the judge server knows."),
        Option("template", str, None, "Your own extraction template ({question} {answer} "
               "{caption} {output}).", kind="file"),
        Option("mode", str, "micro", "Average per-sample ratios instead of pooling counts.",
               cli="macro", flags="--macro", switch=("micro", "macro")),
        Option("captions", str, None, "Captions file from `cafe caption` (needed for MMAU/MMAR).",
               kind="file"),
        Option("selective", bool, False, "Judge each distinct judge prompt once (runs that "
               "answered alike share a judgement) and skip what the judge decides without a "
               "call; saving reported.", flags="--selective", switch=(False, True)),
    )  # fmt: skip
    layout = ("judge", "judge_model",
              Flags("judge_server",
                    {"endpoints": "judge_endpoints", "concurrency": "judge_concurrency",
                     "api_key_env": "judge_api_key_env"},
                    {"order": ("api_key_env", "endpoints", "concurrency"), "most": 100_000,
                     "endpoint_help": "Judge server base URL; repeat to share the load over "
                     "several servers.", "concurrency_help": "Judge calls in flight.",
                     "endpoint_old": ("--endpoint",), "concurrency_old": ("--concurrency",)}),
              "template", "captions", "mode", JUDGE_CACHE,
              Flags("thinking", kw={"help": "Let a thinking judge think "
                    "(OpenAI-compatible servers are otherwise sent chat_template_kwargs "
                    "enable_thinking=false). Its reasoning is kept, never parsed.",
                    "budget_help": "Tokens a thinking judge may spend before its reply [4096], "
                    "added to the reply's."}),
              Flags("batch"), Flags("dry_run"), "selective",
              Flags("json", kw={"help": "Print the metrics section as JSON.", "ascii": False}),
              Flags("progress"))  # fmt: skip

    def setup(self, ctx: Context) -> Setup:
        """The folder checked (predictions, ground truth) and the judge built from the spec and
        how its calls are made (no server named, no key: one line before any item is judged)."""
        view, o = ctx.view, ctx.spec
        if not view.predictions:
            raise RunFolderError(f"{view.root}: no predictions.jsonl records to judge")
        caption_of = load_caption_map(view.samples, o["captions"])
        cls = JUDGES.get(o["judge"])
        if getattr(cls, "needs_caption", True) and not caption_of:
            raise ConfigError(
                f"{view.root}: no sample has a caption; the {o['judge']} judge needs ground-truth "
                "captions: write them with `cafe caption --bench NAME --captioner ... --out FILE` "
                "and pass --captions FILE (or use --judge rule on the synth benchmark)"
            )
        # events known (an empty list under a silence control is known: nothing happens)
        if getattr(cls, "needs_events", False) and all(s.events is None for s in view.samples):
            raise ConfigError(
                f"{view.root}: the {o['judge']} judge needs ground-truth events, which no sample "
                "of this benchmark carries (synth has them); use an LLM judge with --captions FILE"
            )
        # a judge with nothing worth caching (the rule) opens no cache file
        cache = ctx.cache.cache if getattr(cls, "uses_cache", True) else Cache(None)
        options = {"template": o["template"] or None, **judge_calls(ctx, cache)}
        try:
            judge: Judge = build_judge(o["judge"], model=o["judge_model"], **options)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        ident = (judge.identity, judge.template_hash)
        return Setup(judge.spec.to_dict(),
                     Judging(judge, caption_of, o["mode"], bool(o["selective"])),
                     identity=judge.identity, normalize=normalized,  # read as a JudgeSpec
                     # a judgement from before judge specs: kept when this judge made it
                     keep=lambda j: (j.judge, j.template_hash) == ident)  # fmt: skip

    def plan(self, ctx: Context) -> Any:
        """Every (item, run) with its caption (a prediction whose sample is gone: its failed
        judgement, made without a call), selectively shared when asked."""
        state: Judging = ctx.state
        by_id = {s.id: s for s in ctx.view.samples}
        out: list[Any] = []
        for p in ctx.view.predictions:
            s = by_id.get(p.sample_id)
            if s is None:
                item = JudgeItem(Sample(p.sample_id, "", "", "", [], None, []), p, None)
                out.append(state.judge.failed(item, f"{SAMPLES}: sample {p.sample_id} not found"))
            else:
                out.append(JudgeItem(s, p, state.captions.get(s.id)))
        return batching.select_items(state.judge, out, state.selective)

    async def call(self, ctx: Context, item: JudgeItem) -> Judgement:
        return await ctx.state.judge.ajudge(item)

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        """Raises JudgeFailedError (with ``judging_reasons`` of this invocation's judgements)
        when the judge failed most outputs, JudgeUnusable when none of its judgements is usable:
        judgements.jsonl and the sections are left as they were."""
        made, view, judge = ctx.made, ctx.view, ctx.state.judge
        attempted = [*made.planned, *made.fresh]
        reasons = judging_reasons(judge, attempted)
        # the judge's own record: of the predictions that have an output to judge, how many did it
        # fail on (a failed prediction's judgement fails whatever the judge)
        outputs = {(p.sample_id, p.run_index) for p in view.predictions if p.raw_output is not None}
        judged = [j for j in records if (j.sample_id, j.run_index) in outputs]
        judge_failed = sum(j.status == "failed" for j in judged)
        # a batch left running (--batch-no-wait) or cancelled at the service is pending, not a judge
        # failure: the next run collects it or submits its items anew
        pending = pending_calls(ctx.plan)
        usable = sum(j.status == "ok" for j in judged)
        kept = f"{view.root}'s judgements.jsonl and its CAFE metrics were left as they were"
        if not pending and judged and not usable:  # 6 of 6 unusable (now or kept): nothing measured
            raise JudgeUnusable("\n".join([*reasons, f"judge {judge.identity} produced nothing "
                                            f"usable: none of {len(judged)} judgements is usable; "
                                            f"{kept}"]))  # fmt: skip
        if attempted and not pending and most_failed(judge_failed, len(judged)):
            raise JudgeFailedError("\n".join([*reasons, f"judge {judge.identity} failed: {kept}; "
                                               "fix the cause and run the same command again "
                                               "(failed judgements are retried)"]))  # fmt: skip
        status = by_counts(len(judged), usable, "judgements", "unusable")
        if status.status == "failed":  # nothing to judge yet, or a batch still out
            return StepStatus("partial", status.total, 0, status.reason)
        return status

    def section(self, ctx: Context, records: Sequence[Any]) -> Output:
        """The "cafe" section (the judge, its spec, reasoning accuracy, reply health, calls,
        reasons, the selective saving) and the "decay" section from the same judgements."""
        view, state, made, preds = ctx.view, ctx.state, ctx.made, ctx.view.predictions
        section = cafe_section(list(records), view.samples, state.mode,
                               breakdowns=bench_breakdowns(view.manifest))  # fmt: skip
        judge, fresh = state.judge, made.fresh  # this invocation's (called, decided, shared)
        health = reply_health(fresh)
        if health["warning"]:
            warn(health["warning"])
        n_correct = sum(p.correct for p in preds)
        section.update(
            judge=judge.describe(),
            spec=judge.spec.to_dict(),
            template_hash=judge.template_hash,
            judgements_file=judge_records_name("cafe", judge.identity),
            reasoning_accuracy={
                "correct": n_correct,
                "total": len(preds),
                "acc": round(100.0 * n_correct / len(preds), 2),
                "note": "share of all (item, run) predictions; the official accuracy is in "
                "'accuracy'",
            },
            replies=health,
            calls=calls_of(ctx, getattr(judge, "calls", 0), getattr(judge, "client", None),
                           judged_now=len(fresh), judge_wall_s=round(made.wall_s, 3)),
        )  # fmt: skip
        section["counters"] = None  # the engine's, over every invocation under this spec
        reasons = judging_reasons(judge, [*made.planned, *fresh])
        if reasons:
            section["failed_reasons"] = reasons
        if state.selective:
            sel, sent = made.selection, getattr(judge, "calls", 0)
            saved = batching.saving(sel, ctx.plan, sent, len(sel.todo))
            section["selective"] = {**sel.report(), **saved}
        decay = decay_section(preds, list(records), mode=state.mode,
                              counter=view.manifest.get("token_counter"))  # fmt: skip
        return Output(section, more={"decay": decay})


# its old name, for callers that import it (cafe.api.judge: made from the registration)
judge_run = step_function(CafeJudgeStep)
