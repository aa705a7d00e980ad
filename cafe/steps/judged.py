"""`cafe judge-accuracy` on the step engine: an answer-extraction judge (cafe.judge.answer)
names the option each (item, run) output chose; the benchmark's rule scores it into the
"judged_accuracy" section. Its verdicts live in the section only (the call cache replays them);
calls go direct or through the batch transport with the cost ledger (the engine's call plan);
``selective`` asks the judge only where the official rule cannot decide. A benchmark's
LLM-judged official rule (cafe.judge.verdict) is this step with its own judge and section."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.clients.base import call_stats_of
from cafe.counters import by_status
from cafe.errors import CafeError, CafeUsageError
from cafe.execution import Selection, pending_calls
from cafe.folder.status import StepStatus, by_counts
from cafe.judge.answer import SECTION, AnswerJudge, Verdict, judged_section
from cafe.judge.verdict import (
    EMBEDDING_FILE,
    VERDICTS_FILE,
    Judged,
    VerdictJudge,
    embedding_rows,
    kept_rows,
    output_hash,
)
from cafe.records import Prediction
from cafe.reporting import warn
from cafe.steps.base import Flags, Option, Step, View
from cafe.steps.cues import bench_breakdowns


class JudgedAccuracyStep(Step):
    name = "judge-accuracy"
    help = "Judged accuracy: an LLM names the option each output chose; the rule scores it."
    section_name = SECTION
    record_cls = Verdict
    caches = "calls"  # the answer judge caches each call under its JudgeSpec
    records_in_section = True
    needs_samples = True
    noun = "answer-judge calls"
    options = (
        Option(
            "judge",
            str,
            None,
            "Chat client kind: openai-compatible, openai or gemini.",
            required=True,
        ),
        Option("judge_model", str, None, "Model name, e.g. gpt-5.", required=True),
        Option(
            "template", str, None, "Your own template ({question} {choices} {output}).", kind="file"
        ),
        Option("thinking", bool, False, "Let a thinking judge think (budget --thinking-budget)."),
        Option("thinking_budget", int, None, bounds=(0, 10**8)),  # tokens before its reply
        Option(
            "selective",
            bool,
            False,
            "Ask the judge only where the official rule cannot "
            "decide (its parse did not map the answer to a choice); the rule's choice stands "
            "for the rest.",
            flags="--selective",
            switch=(False, True),
        ),
    )
    layout = ("judge", "judge_model",
              Flags("judge_server", kw={"endpoint_help": "Judge server base URL."}),
              "template", "thinking", "thinking_budget",
              Flags("cache", kw={"default_file": "judge.sqlite"}), "selective",
              Flags("batch"))  # fmt: skip

    def __init__(self, endpoints: Sequence[str] = (), concurrency: int = 16, client: Any = None,
                 batch: bool = False, prices: Any = None,
                 batch_options: dict[str, Any] | None = None, make_judge: Any = None,
                 build_section: Any = None) -> None:  # fmt: skip
        self.endpoints, self.concurrency, self.client = endpoints, concurrency, client
        self.batch, self.prices, self.batch_options = batch, prices, batch_options
        self.make_judge = make_judge or AnswerJudge
        self.build_section = build_section or judged_section

    def who(self) -> str:
        return f"the {self.section_name} judge"

    def check(self, view: View) -> None:
        if not view.predictions:
            raise ValueError(f"{view.root}: no predictions.jsonl records to judge")

    def bind(self, view: View) -> None:
        from cafe.caller import call_plan

        self.call_plan = call_plan(view.root, batch=self.batch, prices=self.prices,
                                            batch_options=self.batch_options)  # fmt: skip

    def spec(self, **options: Any) -> dict[str, Any]:
        """The judge's spec (built now: no key or no server fails here, before any call)."""
        known = {opt.name: opt.default for opt in JudgedAccuracyStep.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise CafeUsageError(f"cafe {self.name}: unknown option(s) {', '.join(unknown)}")
        o = {**known, **options}
        self.selective = bool(o["selective"])
        self.judge = self.make_judge(
            o["judge"], o["judge_model"], self.endpoints, template=o["template"],
            cache=self.call_cache.cache, concurrency=self.concurrency, thinking=o["thinking"],
            thinking_budget=o["thinking_budget"], client=self.client, calls=self.call_plan,
        )  # fmt: skip
        return self.judge.spec.to_dict()

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        """Every prediction with its sample (None where the sample is gone)."""
        by_id = {s.id: s for s in view.samples}
        return [(by_id.get(p.sample_id), p) for p in view.predictions]

    def select(self, todo: list[Any]) -> Selection:
        """With ``selective``, the predictions the official rule decides get its verdict
        without a call; the judge is asked about the rest."""
        asked, decided = [], []
        for s, p in todo:
            v = self.judge.decide(s, p) if self.selective and s is not None else None
            if v is None:
                asked.append((s, p))
            else:
                decided.append(v)
        return Selection(asked, decided)

    def key(self, item: Any) -> tuple[str, int]:
        return item[1].sample_id, item[1].run_index

    def failed(self, item: Any, why: str) -> Verdict:  # a bug on one item: that item only
        return Verdict(item[1].sample_id, item[1].run_index, None, "failed", why)

    async def call(self, item: Any, spec: dict[str, Any]) -> Verdict:
        s, p = item
        if s is None:
            return Verdict(p.sample_id, p.run_index, None, "failed", "sample not found")
        return await self.judge.verdict(s, p)

    def asked(self) -> list[Verdict]:
        """This invocation's verdicts from the judge's calls (the rule's decided ones left
        out)."""
        made = self.this_invocation
        decided = {id(v) for v in made.selection.decided}
        return [v for v in made.fresh if id(v) not in decided]

    async def aclose(self) -> None:
        await self.judge.client.aclose()

    def pending(self) -> int:
        return pending_calls(self.call_plan)

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        """A failed call is no verdict (a figure counting it wrong would be a 0 the judge never
        gave): raised, nothing written. Otherwise by counts; most unusable warns."""
        _refuse_lost_calls(view.predictions, self.asked())
        verdicts = list(records)  # the rule's decided ones too
        n = len(verdicts)
        bad = sum(v.status in ("unparseable", "failed") for v in verdicts)
        status = by_counts(n, n - bad, "answer-judge replies", "unusable")
        if status.status != "failed" and bad * 2 > n:
            statuses = judged_statuses(verdicts)
            warn(f"{bad} of {n} answer-judge replies unusable ({statuses})")
        return status

    def counters(self, counts: dict[str, Any]) -> dict[str, Any]:
        c = self.costs
        cost = {"cost_usd": c["total_cost_usd"]} if c and "total_cost_usd" in c else {}
        asked = self.asked()
        return {"calls": self.judge.calls, "cache_hits": self.call_cache.hits,
                "judged": len(asked), "replies": by_status([v.status for v in asked]),
                **cost}  # fmt: skip

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        from cafe.benchmarks.scoring import choice_rule_for

        verdicts = list(records)  # the rule's decided ones too
        asked = self.asked()
        bench = (view.manifest.get("bench") or {}).get("name")
        section = self.build_section(view.samples, view.predictions, verdicts, self.judge,
                                     bench_breakdowns(view.manifest), view.manifest.get("runs"),
                                     choice_rule_for(bench))  # fmt: skip
        aj, c = self.judge, self.costs
        section["calls"] = {
            "sent": aj.calls, "cache_hits": self.call_cache.hits, "judged_now": len(asked),
            "mode": self.call_plan.mode, **call_stats_of(aj.client),  # 429s, 5xx, retries
            **({"cost": c} if c is not None else {}),
        }  # fmt: skip
        section["counters"] = None  # the engine's, over every invocation under this spec
        if self.selective:  # the shared report shape (cafe.execution.Selection)
            from cafe.judge import batching

            sel = self.this_invocation.selection
            section["selective"] = {
                **sel.report(len(view.predictions)),
                **batching.saving(sel, self.call_plan, aj.calls, len(asked)),
            }
        return section


def judged_statuses(verdicts: Sequence[Verdict]) -> dict[str, int]:
    out = dict.fromkeys(("ok", "none", "unparseable", "failed"), 0)
    for v in verdicts:
        out[v.status] = out.get(v.status, 0) + 1
    return out


def _refuse_lost_calls(preds: Sequence[Prediction], asked: list[Verdict]) -> None:
    """Raise when a judge call on an answered output failed: such a call is no verdict."""
    answered = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None
                and not p.error}  # fmt: skip
    lost = [v for v in asked if v.status == "failed" and (v.sample_id, v.run_index) in answered]
    if lost:
        raise CafeError(
            f"{len(lost)} of {len(asked)} answer-judge calls failed (first: sample "
            f"{lost[0].sample_id}: {lost[0].raw}); {SECTION} left as it was; run the same "
            "command again to retry them"
        )


#: what a judged step is built with (how its calls are made), the rest are its options
HOW = ("concurrency", "cache", "client", "batch", "prices", "batch_options", "make_judge",
       "build_section", "limit")  # fmt: skip


def judge_accuracy_run(
    run_dir: str | Path,
    judge: str,
    judge_model: str,
    endpoints: Sequence[str] = (),
    *,
    template: str | Path | None = None,
    thinking: bool = False,
    thinking_budget: int | None = None,
    selective: bool = False,
    **how: Any,
) -> dict[str, Any]:
    """Judge every (item, run) output of a run folder and write metrics.json "judged_accuracy".

    ``selective``: ask the judge only where the official rule cannot decide. ``how``: how the
    calls are made (``HOW``): ``batch`` delivers through the service's batch endpoints (state
    in RUN/batches/), ``prices`` is your price table (the cost goes into the manifest),
    ``limit`` judges the first N (item, run)s only.
    ``make_judge`` / ``build_section``: another judge of the same shape (an AnswerJudge
    subclass) and the section it makes (judged_section's arguments); another section is a
    subclass declaring its ``name`` and ``section_name`` (as OfficialStep)."""
    from cafe.steps.engine import run_step

    cache, limit = how.pop("cache", None), how.pop("limit", None)  # the engine's
    step = JudgedAccuracyStep(endpoints, **how)  # an unknown keyword: its TypeError
    res = run_step(step, run_dir, cache=cache, concurrency=step.concurrency, progress=False,
                   limit=limit, judge=judge,
                   judge_model=judge_model, template=str(template) if template else None,
                   thinking=thinking, thinking_budget=thinking_budget,
                   selective=selective)  # fmt: skip
    return res.section


class OfficialStep(JudgedAccuracyStep):
    """`cafe judge-official`: the run's benchmark's official model paths, its LLM judge
    (cafe.judge.verdict.VerdictJudge, through the answer judge's machinery: cache, batch, cost
    ledger) and its embedding match, into its "official" section. Every reply is kept in
    RUN/official_judgements.jsonl (a reply that does not parse stays there for manual review
    and counts as wrong); a path not run now keeps its earlier rows while their outputs stand."""

    name = "judge-official"
    help = "The official LLM-judged figure, for a benchmark whose official rule is an LLM judge."
    section_name = "official"
    reads = (VERDICTS_FILE, EMBEDDING_FILE)
    options = (
        Option("judge", str, None, "Official LLM judge client: openai-compatible, openai, gemini."),
        Option("judge_model", str, None, "Judge model (default: the official script's)."),
        Option(
            "embedder",
            str,
            None,
            "Embedding model (sentence-transformers name or folder) "
            "of an embedding path (MMAU-Pro's closed questions; the official one is the "
            "benchmark's official_embedder).",
        ),
    )
    layout = ("judge", "embedder", "judge_model",
              Flags("judge_server", kw={"endpoint_help": "Judge server base URL."}),
              Flags("cache", kw={"default_file": "judge.sqlite"}),
              Flags("batch", kw={"saving": False}))  # fmt: skip

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)  # its name and section: its own declarations
        self.build_section = self._judged_section
        self.embedded: list[dict[str, Any]] | None = None  # rows of the embedding run now

    def check(self, view: View) -> None:
        from cafe.benchmarks.base import benchmark_class

        self.view = view  # the judge's section reads the embedding path's picks of it
        self.bench_name = (view.manifest.get("bench") or {}).get("name") or ""
        self.bench = benchmark_class(self.bench_name)()

    def spec(self, **options: Any) -> dict[str, Any]:
        judge, embedder = options.get("judge"), options.get("embedder")
        vs, name = self.bench.official_judge, self.bench_name or "this run"
        if judge is not None and vs is None:
            raise ValueError(f"{name}: its official rule has no LLM judge")
        if embedder is not None and self.bench.official_embedder is None:
            raise ValueError(f"{name}: its official rule has no embedding path")
        if judge is None and embedder is None:
            raise ValueError("nothing to run: pass --judge (the official LLM judge) or --embedder "
                             "(the official embedding match)")  # fmt: skip
        self.records_in_section = judge is not None  # no judge: no calls, the kept verdicts
        if embedder is not None:  # run first: an embedder that cannot load fails before a call
            v = self.view
            self.embedded = embedding_rows(v.samples, v.predictions, self.bench, embedder)
        if judge is None:
            self.call_plan = None  # no calls: no batch, no costs
            return {"step": self.name, "embedder": embedder}
        self.vspec = vs
        judge_cls = getattr(vs, "judge_class", VerdictJudge)  # a rule's own call (VoiceBench's)
        self.make_judge = type("BoundVerdictJudge", (judge_cls,), {"verdict_spec": vs})
        return super().spec(judge=judge, judge_model=options.get("judge_model") or vs.model,
                            selective=True)  # fmt: skip

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        JudgedAccuracyStep.check(self, view)  # the judge needs predictions
        return super().plan(view, spec)

    def _extras(self, view: View) -> dict[str, Any]:
        """The embedding path's picks (run now, else kept) for the benchmark's section."""
        rows = self.embedded if self.embedded is not None else view.files.get(EMBEDDING_FILE, [])
        embedded = kept_rows(rows, view.predictions)
        if not embedded:
            return {}
        return {"embedded": embedded, "embedder": next(iter(embedded.values()))["embedder"]}

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        if self.records_in_section:
            return super().status(view, records)
        extras = self._extras(view)  # no judge now: what the kept rows cover
        n = len(view.predictions)
        return by_counts(n, n if extras or self._kept(view) else 0, "predictions",
                         "have no official verdict kept")  # fmt: skip

    def _kept(self, view: View) -> dict[str, Any]:
        kept = kept_rows(view.files.get(VERDICTS_FILE, []), view.predictions)
        if not kept:
            return {}
        verdicts = {k: Judged(k[0], k[1], None, r["status"], r.get("raw_reply"),
                              value=r.get("value")) for k, r in kept.items()}  # fmt: skip
        return {"verdicts": verdicts, "judge": next(iter(kept.values())).get("judge")}

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        if self.records_in_section:
            return super().section(view, records, spec)
        return self.bench.official_section(view.samples, view.predictions,
                                           view.manifest.get("runs"),
                                           **self._extras(view), **self._kept(view))  # fmt: skip

    def _judged_section(self, samples, preds, verdicts, aj, breakdowns, runs, rule):  # type: ignore[no-untyped-def]
        vs = self.vspec
        by_key = {(v.sample_id, v.run_index): v for v in verdicts}
        extras = self._extras(self.view)
        section = self.bench.official_section(samples, preds, runs, verdicts=by_key,
                                              judge=aj.identity, **extras)  # fmt: skip
        section["judge"] = {"judge": aj.identity, "template_hash": aj.template_hash,
                            "temperature": vs.temperature, "top_p": vs.top_p,
                            "thinking": aj.thinking}  # fmt: skip
        section["spec"] = aj.spec.to_dict()
        section["verdicts"] = judged_statuses(verdicts)
        section["verdicts_file"] = "official_judgements.jsonl"
        return section

    def files(self, view: View, records: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
        out = {EMBEDDING_FILE: self.embedded} if self.embedded is not None else {}
        if self.records_in_section:
            by_pred = {(p.sample_id, p.run_index): p for p in view.predictions}
            out[VERDICTS_FILE] = [
                {"sample_id": v.sample_id, "run_index": v.run_index, "status": v.status,
                 "value": getattr(v, "value", None), "raw_reply": v.raw,
                 "judge": self.judge.identity,
                 "output": output_hash(by_pred[(v.sample_id, v.run_index)])}
                for v in records if (v.sample_id, v.run_index) in by_pred
            ]  # fmt: skip
        return out


def official_judge_run(
    run_dir: str | Path,
    judge: str | None = None,
    judge_model: str | None = None,
    endpoints: tuple[str, ...] = (),
    embedder: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the run's benchmark's official model paths (its LLM judge with ``judge``, its
    embedding match with ``embedder``) and write its "official" section. Results of an earlier
    call for the other path are kept (RUN/official_*.jsonl) while their outputs are unchanged;
    ``options``: how the calls are made (``HOW``)."""
    from cafe.steps.engine import run_step

    cache, limit = options.pop("cache", None), options.pop("limit", None)  # the engine's
    step = OfficialStep(endpoints=endpoints, **options)
    res = run_step(step, run_dir, cache=cache, concurrency=step.concurrency, progress=False,
                   limit=limit, judge=judge,
                   judge_model=judge_model, embedder=embedder)  # fmt: skip
    return res.section
