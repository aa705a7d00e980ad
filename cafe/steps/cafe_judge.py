"""`cafe judge` on the step engine (the CAFE judge of cafe.judge): judge every (item, run) of a
run folder, resumably, and write the CAFE metrics. The judge modules (cafe.judge.pipeline:
refusal, reply health; cafe.judge.spec: the spec a resume compares) compute from records and
open no folder.

The engine resumes under the judge's spec (the step declares how: a stored spec read as a
JudgeSpec, folders from before judge specs keeping the same judge's judgements), judges what is
not yet judged (at most ``concurrency`` calls in flight, or a batch through the call plan),
appends judgements to ``judgements.<judge>.jsonl`` in small fsynced batches (a kill loses at
most one batch, which the judge's call cache then replays for free) and compacts the file; the
step then mirrors it to ``judgements.jsonl`` (the run's current judge) only when the judge did
its job, and writes the "cafe" and "decay" sections. Its own pieces: a missing sample's failed
judgement (planned, no call), selective sharing (cafe.judge.batching) and the dry run's
report; what one invocation made, the engine hands it (``this_invocation``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.clients.base import call_stats_of
from cafe.counters import share_totals
from cafe.errors import ConfigError, RunFolderError
from cafe.folder.status import StepStatus, by_counts
from cafe.judge import JUDGES, build_judge
from cafe.judge.base import Judge, JudgeItem
from cafe.judge.pipeline import (
    _check_ground_truth,
    _item_without_sample,
    _refuse_a_failed_judge,
    format_cafe,
    judging_reasons,
    load_caption_map,
    reply_health,
)
from cafe.judge.spec import REDONE, SPEC_NAME, normalized
from cafe.metrics.cafe import cafe_section
from cafe.metrics.decay import decay_section
from cafe.records import Judgement
from cafe.reporting import warn
from cafe.steps.base import Flags, Option, Step, View
from cafe.steps.cues import bench_breakdowns
from cafe.store import JUDGEMENTS, SAMPLES, judge_records_name, rewrite_jsonl


class CafeJudgeStep(Step):
    name = "judge"
    help = "The CAFE judge: Acc_per, Err_per, Err_use and Err_omit of every (item, run)."
    section_name = "cafe"
    record_cls = Judgement
    caches = "calls"  # the judge caches each call under its JudgeSpec
    needs_samples = True
    outcome_in_section = False  # the "cafe" section keeps its shape
    noun = "judge calls"
    spec_name, redone = SPEC_NAME, REDONE  # its resume's notes: "judged again"
    options = (
        Option(
            "judge",
            str,
            "rule",
            "rule (synth, offline), openai-compatible (e.g. `vllm serve "
            "Qwen/Qwen3-32B`), openai or gemini (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
            names="cafe.judge:JUDGES",
            needs="judge_model",
        ),
        Option("judge_model", str, None, "Model name the judge server knows."),
        Option(
            "template",
            str,
            None,
            "Your own extraction template ({question} {answer} {caption} {output}).",
            kind="file",
        ),
        Option(
            "mode",
            str,
            "micro",
            "Average per-sample ratios instead of pooling counts.",
            cli="macro",
            flags="--macro",
            switch=("micro", "macro"),
        ),
        Option(
            "captions",
            str,
            None,
            "Captions file from `cafe caption` (needed for MMAU/MMAR).",
            kind="file",
        ),
        Option(
            "selective",
            bool,
            False,
            "Judge each distinct judge prompt once (runs that "
            "answered alike share a judgement) and skip what the judge decides without a "
            "call; saving reported.",
            flags="--selective",
            switch=(False, True),
        ),
    )
    layout = ("judge", "judge_model",
              Flags("judge_server",
                    {"endpoints": "judge_endpoints", "concurrency": "judge_concurrency",
                     "api_key_env": "judge_api_key_env"},
                    {"order": ("api_key_env", "endpoints", "concurrency"), "most": 100_000,
                     "endpoint_help": "Judge server base URL; repeat to share the load over "
                     "several servers.", "concurrency_help": "Judge calls in flight.",
                     "endpoint_old": ("--endpoint",), "concurrency_old": ("--concurrency",),
                     "into": "judge_options"}),
              "template", "captions", "mode", Flags("cache", kw={"default_file": "judge.sqlite"}),
              Flags("thinking", kw={"into": "judge_options", "help": "Let a thinking judge think "
                    "(OpenAI-compatible servers are otherwise sent chat_template_kwargs "
                    "enable_thinking=false). Its reasoning is kept, never parsed.",
                    "budget_help": "Tokens a thinking judge may spend before its reply [4096], "
                    "added to the reply's."}),
              Flags("batch"), Flags("dry_run"), "selective",
              Flags("json", kw={"help": "Print the metrics section as JSON.", "ascii": False}),
              Flags("progress"))  # fmt: skip

    def __init__(self, endpoints: Sequence[str] = (), concurrency: int = 16,
                 batch: bool = False, dry_run: bool = False, prices: Any = None,
                 batch_options: dict[str, Any] | None = None,
                 judge_options: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.endpoints, self.concurrency = tuple(endpoints), concurrency
        self.batch, self.dry_run, self.prices = batch, dry_run, prices
        self.batch_options, self.judge_options = batch_options, dict(judge_options or {})

    def check(self, view: View) -> None:
        if not view.predictions:
            raise RunFolderError(f"{view.root}: no predictions.jsonl records to judge")

    def bind(self, view: View) -> None:
        self.view = view  # the spec checks its ground truth (captions, events)

    def spec(self, **options: Any) -> dict[str, Any]:
        """The judge's spec: ground truth checked, the judge built (no server named, no key:
        one line before any item is judged)."""
        from cafe.caller import call_plan

        o = {k: v for k, v in Step.spec(self, **options).items() if k not in ("step", "version")}
        self.mode, self.selective = o["mode"], bool(o["selective"])
        view, judge = self.view, o["judge"]
        self.caption_of = load_caption_map(view.samples, o["captions"])
        judge_cls = JUDGES.get(judge)
        _check_ground_truth(view.root, judge, judge_cls, view.samples, self.caption_of)
        # a judge with nothing worth caching (the rule) opens no cache file
        cache = self.call_cache.cache if getattr(judge_cls, "uses_cache", True) else Cache(None)
        self.call_plan = call_plan(view.root, batch=self.batch, dry_run=self.dry_run,
                                            prices=self.prices,
                                            batch_options=self.batch_options)  # fmt: skip
        try:
            self.judge: Judge = build_judge(
                judge, model=o["judge_model"], endpoints=self.endpoints,
                template=str(o["template"]) if o["template"] else None, cache=cache,
                concurrency=self.concurrency,  # the client may keep this many per endpoint
                calls=self.call_plan, **self.judge_options,  # an LLM judge's make_client
            )  # fmt: skip
        except ValueError as e:
            raise ConfigError(str(e)) from None
        return self.judge.spec.to_dict()

    def records_file(self, spec: dict[str, Any]) -> str:
        return judge_records_name("cafe", self.judge.identity)

    def legacy_ok(self, j: Judgement) -> bool:  # type: ignore[override]
        """A judgement from before judge specs is kept when this judge made it (its identity
        and template)."""
        return (j.judge, j.template_hash) == (self.judge.identity, self.judge.template_hash)

    def normalize_spec(self, stored: Any) -> Any:
        return normalized(stored)  # read as this cafe's JudgeSpec (its defaults filled)

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        """Every (item, run) with its caption; a prediction whose sample is gone: its failed
        judgement, made without a call."""
        by_id = {s.id: s for s in view.samples}
        out: list[Any] = []
        for p in view.predictions:
            s = by_id.get(p.sample_id)
            if s is None:
                why = f"{SAMPLES}: sample {p.sample_id} not found"
                out.append(self.judge.failed(_item_without_sample(p), why))
            else:
                out.append(JudgeItem(s, p, self.caption_of.get(s.id)))
        return out

    def select(self, todo: list[Any]) -> Any:
        from cafe.judge import batching

        return batching.select_items(self.judge, todo, self.selective)

    def key(self, item: Any) -> tuple[str, int]:
        return item.prediction.sample_id, item.prediction.run_index

    def failed(self, item: Any, why: str) -> Judgement:
        return self.judge.failed(item, why)

    async def call(self, item: Any, spec: dict[str, Any]) -> Judgement:
        return await self.judge.ajudge(item)

    async def aclose(self) -> None:
        await self.judge.aclose()

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        """Raises JudgeFailedError (one line per reason) when the judge failed most outputs
        or made nothing usable: judgements.jsonl and the sections are left as they were."""
        preds, made = view.predictions, self.this_invocation
        _refuse_a_failed_judge(view.root, self.judge, [*made.planned, *made.fresh], preds,
                               records, self.call_plan)  # fmt: skip
        outputs = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None}
        judged = [j for j in records if (j.sample_id, j.run_index) in outputs]
        status = by_counts(len(judged), sum(j.status == "ok" for j in judged), "judgements",
                           "unusable")  # fmt: skip
        if status.status == "failed":  # nothing to judge yet, or a batch still out
            return StepStatus("partial", status.total, 0, status.reason)
        return status

    def commit(self, store: Any, records: Sequence[Any]) -> None:
        """The run's current judgements: this judge's, now that it did its job."""
        rewrite_jsonl(store.path(JUDGEMENTS), records)
        store.invalidate(changed=("judgements",))  # what the earlier judgements fed goes

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        from cafe.judge import batching

        section = cafe_section(list(records), view.samples, self.mode,
                               breakdowns=bench_breakdowns(view.manifest))  # fmt: skip
        _describe_judging(section, self, view)
        section["counters"] = None  # the engine's, over every invocation under this spec
        made = self.this_invocation
        reasons = judging_reasons(self.judge, [*made.planned, *made.fresh])
        if reasons:
            section["failed_reasons"] = reasons
        if self.selective:
            sel = made.selection
            section["selective"] = {
                **sel.report(),
                **batching.saving(sel, self.call_plan, getattr(self.judge, "calls", 0),
                                  len(sel.todo)),
            }  # fmt: skip
        return section

    def counters(self, counts: dict[str, Any]) -> dict[str, Any]:
        fresh, c = self.this_invocation.fresh, self.costs
        health = reply_health(fresh)
        cost = {"cost_usd": c["total_cost_usd"]} if c and "total_cost_usd" in c else {}
        return {"calls": getattr(self.judge, "calls", 0), "cache_hits": self.call_cache.hits,
                "judged": len(fresh),
                "replies": {k: health[k] for k in ("ok", "empty", "unparseable", "failed")},
                **cost}  # fmt: skip

    def disk_counters(self, records: Sequence[Any]) -> dict[str, Any]:
        health = reply_health(list(records))
        replies = {k: health[k] for k in ("ok", "empty", "unparseable", "failed")}
        return {**share_totals(records), "judged": len(records), "replies": replies}

    def more_sections(self, view: View, records: Sequence[Any]) -> dict[str, dict[str, Any]]:
        counter = view.manifest.get("token_counter")
        return {"decay": decay_section(view.predictions, list(records), mode=self.mode,
                                       counter=counter)}  # fmt: skip

    def written(self, store: Any) -> None:
        from cafe.steps.plugins import compute_metrics

        compute_metrics(store.root)  # registered metrics (cafe.metrics.METRICS), each its own

    def dry_report(self, counts: dict[str, Any]) -> dict[str, Any]:
        from cafe.judge import batching

        sel = self.this_invocation.selection
        return batching.dry_run_report(
            self.call_plan, items=counts["planned"], already_done=counts["done_before"],
            cache_hits=self.call_cache.hits,
            selection=sel.report() if self.selective else None,
        )  # fmt: skip

    def format(self, section: dict[str, Any]) -> str:
        return format_cafe(section)


def _describe_judging(section: dict[str, Any], step: CafeJudgeStep, view: View) -> None:
    """What the "cafe" section says about the judge and this invocation: its spec, reasoning
    accuracy, reply health and calls (the counters: the engine's)."""
    judge, preds, costs = step.judge, view.predictions, step.costs
    fresh = step.this_invocation.fresh  # this invocation's judgements (called, decided, shared)
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
            "note": "share of all (item, run) predictions; the official accuracy is in 'accuracy'",
        },
        replies=health,
        calls={
            "sent": getattr(judge, "calls", 0),
            "cache_hits": step.call_cache.hits,
            "judged_now": len(fresh),
            "judge_wall_s": round(step.this_invocation.wall_s, 3),
            "mode": step.call_plan.mode,
            **call_stats_of(getattr(getattr(judge, "caller", None), "client", None)),  # 429s, 5xx…
            **({"cost": costs} if costs is not None else {}),
        },
    )


def judge_run(
    run_dir: str | Path,
    judge: str = "rule",
    judge_model: str | None = None,
    endpoints: Sequence[str] = (),
    concurrency: int = 16,
    template: str | Path | None = None,
    mode: str = "micro",
    progress: bool = True,
    *,
    captions: str | Path | None = None,
    cache: Cache | str | Path | None = None,
    batch: bool = False,
    dry_run: bool = False,
    selective: bool = False,
    prices: str | Path | None = None,
    batch_options: dict[str, Any] | None = None,
    limit: int | None = None,
    **judge_options: Any,
) -> dict[str, Any]:
    """Judge a run folder and return the metrics.json "cafe" section (also written there).

    ``cache``: a Cache, a path to the SQLite file, or None for ``$CAFE_CACHE/judge.sqlite``.
    ``batch``: deliver through the service's batch endpoints (state in RUN/batches/);
    ``dry_run``: count calls, cache hits and estimated cost, send and write nothing (returns
    that report); ``selective``: judge each distinct judge prompt once (see
    cafe.judge.batching); ``prices``: your price table (cafe/clients/prices.yaml's shape);
    ``limit``: only the first N (item, run)s (the section says it is partial)."""
    from cafe.steps.engine import run_step

    step = CafeJudgeStep(endpoints, concurrency, batch=batch, dry_run=dry_run,
                         prices=prices, batch_options=batch_options,
                         judge_options=judge_options)  # fmt: skip
    res = run_step(step, run_dir, cache=cache, concurrency=concurrency, progress=progress,
                   limit=limit, judge=judge,
                   judge_model=judge_model, template=str(template) if template else None,
                   mode=mode, captions=str(captions) if captions else None,
                   selective=selective)  # fmt: skip
    return res.section
