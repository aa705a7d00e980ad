"""`cafe judge-accuracy` on the step engine: an answer-extraction judge (cafe.judge.answer)
names the option each (item, run) output chose; the benchmark's rule scores it into the
"judged_accuracy" section. Its verdicts live in the section only (the call cache replays them);
``selective`` asks the judge only where the official rule cannot decide. `cafe judge-official`
(a benchmark's LLM-judged official rule, cafe.judge.verdict) is this step with its own judge and
section; another judge of the same shape (an AnswerJudge subclass) is a subclass declaring
``judge_class`` and ``builds`` (judged_section's arguments), with its own ``name`` and
``writes``. Also what every judging step shares: its state, its judge's calls, breakdowns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from cafe.benchmarks.base import BENCHMARKS, benchmark_class
from cafe.benchmarks.official import format_official
from cafe.benchmarks.scoring import choice_rule_for
from cafe.errors import CafeError
from cafe.execution import Selection
from cafe.folder.status import StepStatus, by_counts
from cafe.judge import batching
from cafe.judge.answer import SECTION, AnswerJudge, Verdict
from cafe.judge.verdict import (
    EMBEDDING_FILE,
    VERDICTS_FILE,
    Judged,
    VerdictJudge,
    embedding_rows,
    kept_rows,
    output_hash,
)
from cafe.metrics.judged import format_judged, judged_section, judged_statuses
from cafe.reporting import warn
from cafe.steps import step_function
from cafe.steps.base import Context, Flags, Option, Output, Records, Section, Setup, Step, calls_of

#: the judge server's and the judge cache's flags as the judging steps lay them out
JUDGE_SERVER = Flags("judge_server", kw={"endpoint_help": "Judge server base URL."})
JUDGE_CACHE = Flags("cache", kw={"default_file": "judge.sqlite"})


@dataclass(frozen=True)
class Judging:
    """What one invocation of a judging step judges with (``Context.state``): the judge (None:
    no calls; the engine uses its ``failed`` and ``aclose``), the captions its prompts show, the
    averaging mode, ``selective`` (the rule decides first, identical prompts share a call), and
    for an official figure the run's benchmark and the embedding path's rows made now."""

    judge: Any = None
    captions: dict[str, str] = field(default_factory=dict)
    mode: str = "micro"
    selective: bool = False
    bench: Any = None
    embedded: list[dict[str, Any]] | None = None


def judge_calls(ctx: Context, cache: Any = None) -> dict[str, Any]:
    """How a judge built now makes its calls: the servers, calls in flight (its client may keep
    this many per endpoint), the engine's call cache (``cache``: another) and call plan (batch
    transport, cost ledger), further client options (``client=``: a ready client)."""
    c = ctx.calls
    out = {"endpoints": c.endpoints, "concurrency": c.concurrency, "calls": ctx.plan}
    return {**out, "cache": ctx.cache.cache if cache is None else cache, **c.judge_options()}


def bench_breakdowns(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The run's benchmark's own breakdowns (as its accuracy uses), else None."""
    try:
        name = (manifest.get("bench") or {}).get("name")
        return (dict(BENCHMARKS.get(name).breakdowns) or None) if name else None
    except (KeyError, ValueError, AttributeError):
        return None


class JudgedAccuracyStep(Step):
    """Judged accuracy of RUN_DIR (the paper's † figures): an LLM names the option
    each output chose; the benchmark's rule scores it. Written to metrics.json
    "judged_accuracy", beside the official headline; tables print it in the † rows' place."""

    name = "judge-accuracy"
    help = "Judged accuracy: an LLM names the option each output chose; the rule scores it."
    writes = Section(SECTION, needs_samples=True)
    records = Records(SECTION, Verdict, caches="calls", noun="answer-judge calls",
                      counted=("judged", "replies"), in_section=True)  # fmt: skip
    positional = ("judge", "judge_model", "endpoints")
    prints = staticmethod(format_judged)
    judge_class: type[Any] = AnswerJudge  # built with AnswerJudge's arguments
    builds = staticmethod(judged_section)  # (samples, predictions, verdicts, judge, ...)
    options = (
        Option("judge", str, None, "Chat client kind: openai-compatible, openai or gemini.",
               required=True),
        Option("judge_model", str, None, "Model name, e.g. gpt-5.", required=True),
        Option("template", str, None, "Your own template ({question} {choices} {output}).",
               kind="file"),
        Option("thinking", bool, False, "Let a thinking judge think (budget --thinking-budget)."),
        Option("thinking_budget", int, None, bounds=(0, 10**8)),  # tokens before its reply
        Option("selective", bool, False, "Ask the judge only where the official rule cannot "
               "decide (its parse did not map the answer to a choice); the rule's choice stands "
               "for the rest.", flags="--selective", switch=(False, True)),
    )  # fmt: skip
    layout = ("judge", "judge_model", JUDGE_SERVER, "template", "thinking", "thinking_budget",
              JUDGE_CACHE, "selective", Flags("batch"))  # fmt: skip

    def setup(self, ctx: Context) -> Setup:
        """The judge (built now: no key or no server fails here, before any call)."""
        s = ctx.spec
        judge = _judge(ctx, self.judge_class, s["judge"], s["judge_model"],
                       template=s["template"], thinking=s["thinking"],
                       thinking_budget=s["thinking_budget"])  # fmt: skip
        return Setup(judge.spec.to_dict(), Judging(judge, selective=s["selective"]))

    def plan(self, ctx: Context) -> Selection:
        """Every prediction with its sample (a sample gone: its failed verdict). With
        ``selective``, those the official rule decides get its verdict without a call."""
        by_id = {s.id: s for s in ctx.view.samples}
        asked: list[Any] = []
        decided = []
        for p in ctx.view.predictions:
            s = by_id.get(p.sample_id)
            if s is None:
                asked.append(Verdict(p.sample_id, p.run_index, None, "failed", "sample not found"))
            elif ctx.state.selective and (v := ctx.state.judge.decide(s, p)) is not None:
                decided.append(v)
            else:
                asked.append((s, p))
        return Selection(asked, decided)

    async def call(self, ctx: Context, item: Any) -> Verdict:
        return await ctx.state.judge.verdict(*item)

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        """A failed call on an answered output is no verdict (a figure counting it wrong would
        be a 0 the judge never gave): raised, nothing written. Otherwise by counts (the rule's
        decided ones too); most unusable warns."""
        asked, preds = ctx.made.asked, ctx.view.predictions
        answered = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None
                    and not p.error}  # fmt: skip
        lost = [v for v in asked if v.status == "failed" and (v.sample_id, v.run_index) in answered]
        if lost:
            raise CafeError(
                f"{len(lost)} of {len(asked)} answer-judge calls failed (first: sample "
                f"{lost[0].sample_id}: {lost[0].raw}); {SECTION} left as it was; run the same "
                "command again to retry them"
            )
        n = len(records)
        bad = sum(v.status in ("unparseable", "failed") for v in records)
        status = by_counts(n, n - bad, "answer-judge replies", "unusable")
        if status.status != "failed" and bad * 2 > n:
            warn(f"{bad} of {n} answer-judge replies unusable ({judged_statuses(records)})")
        return status

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any] | Output:
        view = ctx.view
        bench = (view.manifest.get("bench") or {}).get("name")
        section = self.builds(view.samples, view.predictions, list(records), ctx.state.judge,
                              bench_breakdowns(view.manifest), view.manifest.get("runs"),
                              choice_rule_for(bench))  # fmt: skip
        return {**section, **_calls(ctx)}


def _judge(ctx: Context, cls: type[Any], kind: str, model: str, **options: Any) -> Any:
    if not ctx.view.predictions:
        raise ValueError(f"{ctx.view.root}: no predictions.jsonl records to judge")
    return cls(kind, model, **options, **judge_calls(ctx))


def _calls(ctx: Context) -> dict[str, Any]:
    """The section's account of the calls (calls_of); with ``selective``, what the rule decided
    and the calls it saved. Its counters: the engine's, over every invocation under this spec."""
    made, asked = ctx.made, len(ctx.made.asked)
    sent = made.counts.get("calls", 0)
    out: dict[str, Any] = {"calls": calls_of(ctx, sent, ctx.state.judge.client, judged_now=asked),
                           "counters": None}  # fmt: skip
    if ctx.state.selective:  # the shared report shape (cafe.execution.Selection)
        out["selective"] = {**made.selection.report(len(ctx.view.predictions)),
                            **batching.saving(made.selection, ctx.plan, sent, asked)}  # fmt: skip
    return out


# its old name, for callers that import it (cafe.api.judge_accuracy: made from the registration)
judge_accuracy_run = step_function(JudgedAccuracyStep)


class OfficialStep(JudgedAccuracyStep):
    """The official LLM-judged figure of RUN_DIR, for a benchmark whose official
    rule is an LLM judge (SAKURA): written to metrics.json "official" as its headline, beside
    the labelled deterministic figures; every judge reply in RUN_DIR/official_judgements.jsonl.
    """

    # its paths: the LLM judge (VerdictJudge, the answer judge's machinery) and the embedding
    # match; a reply that does not parse counts as wrong; a path not run now keeps its rows

    name = "judge-official"
    help = "The official LLM-judged figure, for a benchmark whose official rule is an LLM judge."
    writes = Section("official", needs_samples=True)
    records = replace(JudgedAccuracyStep.records, file="official",
                      reads=(VERDICTS_FILE, EMBEDDING_FILE))  # fmt: skip
    positional = ("judge", "judge_model", "endpoints", "embedder")
    prints = staticmethod(format_official)
    options = (
        Option("judge", str, None, "Official LLM judge client: openai-compatible, openai, gemini."),
        Option("judge_model", str, None, "Judge model (default: the official script's)."),
        Option("embedder", str, None, "Embedding model (sentence-transformers name or folder) "
               "of an embedding path (MMAU-Pro's closed questions; the official one is the "
               "benchmark's official_embedder)."),
    )  # fmt: skip
    layout = ("judge", "embedder", "judge_model", JUDGE_SERVER, JUDGE_CACHE,
              Flags("batch", kw={"saving": False}))  # fmt: skip

    def setup(self, ctx: Context) -> Setup:
        """The paths asked for, checked against the benchmark's; the embedding path run first
        (an embedder that cannot load fails before a call); no judge: no calls."""
        view, judge, embedder = ctx.view, ctx.spec["judge"], ctx.spec["embedder"]
        name = (view.manifest.get("bench") or {}).get("name") or ""
        bench = benchmark_class(name)()
        vs = bench.official_judge
        if judge is not None and vs is None:
            raise ValueError(f"{name or 'this run'}: its official rule has no LLM judge")
        if embedder is not None and bench.official_embedder is None:
            raise ValueError(f"{name or 'this run'}: its official rule has no embedding path")
        if judge is None and embedder is None:
            raise ValueError("nothing to run: pass --judge (the official LLM judge) or --embedder "
                             "(the official embedding match)")  # fmt: skip
        embedded = (embedding_rows(view.samples, view.predictions, bench, embedder)
                    if embedder is not None else None)  # fmt: skip
        if judge is None:  # the kept verdicts, no calls
            return Setup({"step": self.name, "embedder": embedder},
                         Judging(bench=bench, embedded=embedded), calls=False)  # fmt: skip
        base = getattr(vs, "judge_class", VerdictJudge)  # a rule's own call (VoiceBench's)
        cls = type("BoundVerdictJudge", (base,), {"verdict_spec": vs})
        made = _judge(ctx, cls, judge, ctx.spec["judge_model"] or vs.model)
        state = Judging(made, selective=True, bench=bench, embedded=embedded)
        return Setup(made.spec.to_dict(), state)

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        if ctx.state.judge is not None:
            return super().status(ctx, records)
        n = len(ctx.view.predictions)  # no judge now: what the kept rows cover
        covered = _extras(ctx) or _kept(ctx.view)
        return by_counts(n, n if covered else 0, "predictions", "have no official verdict kept")

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any] | Output:
        st, view = ctx.state, ctx.view
        files = {EMBEDDING_FILE: st.embedded} if st.embedded is not None else {}
        runs = view.manifest.get("runs")
        official = partial(st.bench.official_section, view.samples, view.predictions, runs)
        if st.judge is None:
            return Output(official(**_extras(ctx), **_kept(view)), files=files)
        aj, vs = st.judge, st.judge.verdict_spec
        by_key = {(v.sample_id, v.run_index): v for v in records}
        section = official(verdicts=by_key, judge=aj.identity, **_extras(ctx))
        section["judge"] = {"judge": aj.identity, "template_hash": aj.template_hash,
                            "temperature": vs.temperature, "top_p": vs.top_p,
                            "thinking": aj.thinking}  # fmt: skip
        section["spec"] = aj.spec.to_dict()
        section["verdicts"] = judged_statuses(records)
        section["verdicts_file"] = VERDICTS_FILE
        by_pred = {(p.sample_id, p.run_index): p for p in view.predictions}
        files[VERDICTS_FILE] = [
            {"sample_id": v.sample_id, "run_index": v.run_index, "status": v.status,
             "value": getattr(v, "value", None), "raw_reply": v.raw, "judge": aj.identity,
             "output": output_hash(by_pred[(v.sample_id, v.run_index)])}
            for v in records if (v.sample_id, v.run_index) in by_pred
        ]  # fmt: skip
        return Output({**section, **_calls(ctx)}, files=files)


def _extras(ctx: Context) -> dict[str, Any]:
    """The embedding path's picks (run now, else kept) for the benchmark's section."""
    rows = ctx.state.embedded
    embedded = kept_rows(rows if rows is not None else ctx.view.files.get(EMBEDDING_FILE, []),
                         ctx.view.predictions)  # fmt: skip
    if not embedded:
        return {}
    return {"embedded": embedded, "embedder": next(iter(embedded.values()))["embedder"]}


def _kept(view: Any) -> dict[str, Any]:
    """The LLM judge's verdicts an earlier invocation kept, while their outputs stand."""
    kept = kept_rows(view.files.get(VERDICTS_FILE, []), view.predictions)
    if not kept:
        return {}
    verdicts = {k: Judged(k[0], k[1], None, r["status"], r.get("raw_reply"),
                          value=r.get("value")) for k, r in kept.items()}  # fmt: skip
    return {"verdicts": verdicts, "judge": next(iter(kept.values())).get("judge")}


# its old name, for callers that import it (cafe.api.judge_official: made from the registration)
official_judge_run = step_function(OfficialStep)
