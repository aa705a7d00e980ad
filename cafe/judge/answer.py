"""Judged accuracy (the paper's † figures: an LLM reads each output and names the option chosen).

`judge_accuracy_run` asks an answer-extraction judge (any chat client kind: openai-compatible,
openai, gemini) to name the option each (item, run) output chose, maps its reply (final answer
only; thinking is kept raw, never parsed) to a choice, scores that choice with the benchmark's
rule, and writes the metrics.json "judged_accuracy" section: a separate, labelled accuracy with
the judge named, beside (never instead of) the official headline. Replies are cached like every
judge call; a retry appends a format reminder. Calls go direct or through the batch transport
with the cost ledger (cafe.judge.batching); ``selective`` asks the judge only where the official
rule cannot decide."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cafe.cache import Cache, cache_file, text_entry
from cafe.clients.base import call_stats_of
from cafe.clients.thinking import final_answer, judge_max_tokens
from cafe.counters import by_status, judge_counters
from cafe.folder.status import by_counts, require_usable
from cafe.judge.base import load_template
from cafe.judge.extraction import build_prompt
from cafe.judge.spec import JudgeSpec
from cafe.judge.stages import execute
from cafe.locking import writes_folder
from cafe.parsing import extract_answer
from cafe.records import Prediction, Sample
from cafe.reporting import note, warn
from cafe.store import RunStore

SECTION = "judged_accuracy"
MAX_TOKENS = 16
RETRIES = 1  # one retry, with a reminder: the same prompt again would give the same reply
REMINDER = "\n\nReply with one option letter (A, B, C, ...) or NONE, and nothing else."


@dataclass
class Verdict:
    sample_id: str
    run_index: int
    choice: str | None  # the option the judge says the model chose
    status: str  # ok | none (the model chose nothing) | unparseable | failed
    raw: str | None = None
    source: str = "judge"  # judge | rule (selective: the official rule decided, no call)


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


class AnswerJudge:
    def __init__(
        self,
        kind: str,
        model: str,
        endpoints: Sequence[str] = (),
        *,
        template: str | Path | None = None,
        cache: Cache | None = None,
        concurrency: int = 16,
        thinking: bool = False,
        thinking_budget: int | None = None,
        client: Any = None,
        calls: Any = None,
    ):
        """``calls``: a cafe.clients.calls.CallPlan (batch transport, cost ledger), handed to
        make_client."""
        self.kind, self.model = kind, model
        self.identity = f"{kind}:{model}"
        self.template, self.template_hash = load_template("answer", template)
        self.cache = cache or Cache(None)
        self.thinking = thinking
        self.max_tokens = judge_max_tokens(MAX_TOKENS, thinking, thinking_budget)
        self.calls = 0
        self.spec = JudgeSpec(
            task="answer-extraction", kind=kind, model=model, template_hash=self.template_hash,
            endpoint=JudgeSpec.endpoint_of(list(endpoints)),
            thinking=bool(thinking), max_tokens=self.max_tokens, temperature=0.0,
            retries=RETRIES,
        )  # fmt: skip
        if client is None:
            from cafe.clients import make_client

            client = make_client(kind, model, endpoints=list(endpoints) or None,
                                 concurrency=concurrency, thinking=thinking, calls=calls,
                                 server_option="--judge-endpoint")  # fmt: skip
        self.client = client

    @staticmethod
    def decide(sample: Sample, pred: Prediction) -> Verdict | None:
        """The verdict without a call where the official rule decides (its parse mapped the
        answer to one of the choices), else None: the judge is asked."""
        if pred.error or pred.parse_status != "ok" or pred.answer not in sample.choices:
            return None
        return Verdict(pred.sample_id, pred.run_index, pred.answer, "ok",
                       "decided by the official rule", source="rule")  # fmt: skip

    async def verdict(self, sample: Sample, pred: Prediction) -> Verdict:
        if pred.raw_output is None or pred.error:
            return Verdict(pred.sample_id, pred.run_index, None, "failed", pred.error)
        prompt = build_prompt(self.template, question=sample.question, output=pred.raw_output,
                              choices=lettered(sample.choices))  # fmt: skip
        raws: list[str] = []
        for attempt in range(RETRIES + 1):
            text_in = prompt if attempt == 0 else prompt + REMINDER
            key = self.spec.call_key(prompt=text_in)  # the reminder is in the prompt
            hit = self.cache.get(key, text_entry)
            if hit is not None:
                text = hit["text"]
            else:
                self.calls += 1
                reply = await self.client.achat(
                    [{"role": "user", "content": text_in}], temperature=0.0,
                    max_tokens=self.max_tokens,
                )  # fmt: skip
                if reply.error or reply.text is None:
                    return Verdict(pred.sample_id, pred.run_index, None, "failed", reply.error)
                text = reply.text
                self.cache.put(key, {"text": text})
            raws.append(text)
            choice, status = read_verdict(text, sample.choices)
            if status != "unparseable":
                return Verdict(pred.sample_id, pred.run_index, choice, status, "\n---\n".join(raws))
        return Verdict(pred.sample_id, pred.run_index, None, "unparseable", "\n---\n".join(raws))


class _Discard:
    def write_many(self, records: Any) -> None:
        pass


def judged_section(
    samples: Sequence[Sample],
    predictions: Sequence[Prediction],
    verdicts: Sequence[Verdict],
    judge: AnswerJudge,
    breakdowns: dict[str, Any] | None,
    runs: int | None,
    rule: Any,
) -> dict[str, Any]:
    """The "judged_accuracy" section: the benchmark's rule on the judge-named choice."""
    from cafe.benchmarks.scoring import accuracy_section

    by_key = {(v.sample_id, v.run_index): v for v in verdicts}
    judged = []
    for p in predictions:
        v = by_key.get((p.sample_id, p.run_index))
        choice = v.choice if v is not None else None
        judged.append(replace(p, answer=choice, answer_text=choice, parse_status="ok"))
    acc = accuracy_section(list(samples), judged, breakdowns, runs=runs, rule=rule)
    statuses = {k: 0 for k in ("ok", "none", "unparseable", "failed")}
    for v in verdicts:
        statuses[v.status] += 1
    return {
        "label": f"judged accuracy: {judge.identity} names the option each output chose, then "
        "the benchmark's rule (the paper's † figures; not the official headline)",
        "judge": {
            "judge": judge.identity,
            "template_hash": judge.template_hash,
            "temperature": 0.0,
            "thinking": judge.thinking,
        },  # fmt: skip
        "spec": judge.spec.to_dict(),
        "total": acc["total"],
        "breakdowns": acc["breakdowns"],
        "runs": acc["runs"],
        "verdicts": statuses,
    }


@writes_folder("cafe judge-accuracy")
def judge_accuracy_run(
    run_dir: str | Path,
    judge: str,
    judge_model: str,
    endpoints: Sequence[str] = (),
    *,
    concurrency: int = 16,
    template: str | Path | None = None,
    cache: Cache | str | Path | None = None,
    thinking: bool = False,
    thinking_budget: int | None = None,
    client: Any = None,
    batch: bool = False,
    selective: bool = False,
    prices: str | Path | None = None,
    batch_options: dict[str, Any] | None = None,
    make_judge: Any = None,
    build_section: Any = None,
    section_name: str = SECTION,
) -> dict[str, Any]:
    """Judge every (item, run) output of a run folder and write metrics.json "judged_accuracy".

    ``make_judge`` / ``build_section`` / ``section_name``: another judge of the same shape (an
    AnswerJudge subclass, built with the same arguments), the section it makes (judged_section's
    arguments) and its name: a benchmark's LLM-judged official rule (cafe.judge.verdict) reuses
    the cache, batch and cost machinery here.

    ``batch``: deliver through the service's batch endpoints (state in RUN/batches/);
    ``selective``: ask the judge only where the official rule cannot decide (its parse did not
    map the answer to a choice); ``prices``: your price table; the calls' cost goes into the
    manifest's ``costs`` (cafe.judge.batching.write_costs)."""
    from cafe.benchmarks.scoring import choice_rule_for
    from cafe.judge import batching
    from cafe.judge.pipeline import _bench_breakdowns

    store = RunStore(run_dir)
    samples = store.samples()
    preds = store.predictions()
    if not preds:
        raise ValueError(f"{run_dir}: no predictions.jsonl records to judge")
    by_id = {s.id: s for s in samples}
    cache_obj = cache if isinstance(cache, Cache) else Cache(cache or cache_file("judge.sqlite"))
    plan = batching.call_plan(store.root, batch=batch, prices=prices,
                              batch_options=batch_options)  # fmt: skip
    aj = (make_judge or AnswerJudge)(judge, judge_model, endpoints, template=template,
                                     cache=cache_obj, concurrency=concurrency,
                                     thinking=thinking, thinking_budget=thinking_budget,
                                     client=client, calls=plan)  # fmt: skip

    decided, todo = _split_rule_decided(aj, preds, by_id, selective)

    async def ask(p: Prediction) -> Verdict:
        s = by_id.get(p.sample_id)
        if s is None:
            return Verdict(p.sample_id, p.run_index, None, "failed", "sample not found")
        return await aj.verdict(s, p)

    def failed(p: Prediction, why: str) -> Verdict:  # a bug on one item: that item only
        return Verdict(p.sample_id, p.run_index, None, "failed", why)

    # batch mode lifts the bound: a batch collects every call that is waiting; verdicts are
    # kept in the section only (the cache replays them), so nothing is appended as they come
    asked = asyncio.run(execute(
        todo, ask, failed, _Discard(), concurrency=plan.item_concurrency(concurrency),
        desc="judge-accuracy", progress=False, aclose=aj.client.aclose,
    ))  # fmt: skip
    verdicts = [*decided, *asked]
    costs = batching.write_costs(store, plan, cache_obj.hits)
    manifest = store.read_manifest() if store.has_manifest() else {}
    bench = (manifest.get("bench") or {}).get("name") if isinstance(manifest, dict) else None
    section = (build_section or judged_section)(samples, preds, verdicts, aj,
                                                _bench_breakdowns(store), manifest.get("runs"),
                                                choice_rule_for(bench))  # fmt: skip
    _describe_calls(section, store, aj, asked, cache_obj.hits, plan.mode, costs, section_name)
    if selective:
        # the shared report shape (cafe.judge.batching.Selection): no prompt is shared here,
        # the rule decides instead of the judge
        sel = batching.Selection(todo=todo, decided=decided, copies={})  # type: ignore[arg-type]
        section["selective"] = {**sel.report(len(preds)),
                                **batching.saving(sel, plan, aj.calls, len(asked))}  # fmt: skip
    # calls left in a batch (--batch-no-wait) or cancelled at the service are not verdicts: a
    # figure with them counted as failed would mislead, so the section stays as it was
    pending = sum(int(st.get("left_pending", 0)) + int(st.get("cancelled_items", 0))
                  for st in plan.batch_stats().values())  # fmt: skip
    if pending:
        note(
            f"{pending} answer-judge calls still pending in a batch (or cancelled there): "
            f"{section_name} left as it was; run the same command again to collect"
        )
        return {**section, "pending": pending}
    # a call that failed is no verdict: a figure counting it wrong would be a 0 the judge never
    # gave, so the section stays as it was (the cache keeps the replies that came back)
    _refuse_lost_calls(preds, asked)
    _verdict_status(section, len(verdicts), f"the {section_name} judge on {store.root}")
    store.update_metrics(section_name, section)
    return section


def _verdict_status(section: dict[str, Any], n: int, who: str) -> None:
    """The section's status by counts; none usable raises (nothing written), most unusable
    warns."""
    bad = section["verdicts"]["unparseable"] + section["verdicts"]["failed"]
    status = by_counts(n, n - bad, "answer-judge replies", "unusable")
    require_usable(who, status)
    section["outcome"] = status.to_dict()
    if bad * 2 > n:
        warn(f"{bad} of {n} answer-judge replies unusable ({section['verdicts']})")


def _split_rule_decided(
    aj: AnswerJudge, preds: list[Prediction], by_id: dict[str, Sample], selective: bool
) -> tuple[list[Verdict], list[Prediction]]:
    """(verdicts the official rule decides, predictions left for the judge); with
    ``selective`` off every prediction goes to the judge."""
    decided: list[Verdict] = []
    todo: list[Prediction] = []
    for p in preds:
        s = by_id.get(p.sample_id)
        v = aj.decide(s, p) if selective and s is not None else None
        if v is None:
            todo.append(p)
        else:
            decided.append(v)
    return decided, todo


def _refuse_lost_calls(preds: list[Prediction], asked: list[Verdict]) -> None:
    """Raise when a judge call on an answered output failed: such a call is no verdict."""
    answered = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None
                and not p.error}  # fmt: skip
    lost = [v for v in asked if v.status == "failed" and (v.sample_id, v.run_index) in answered]
    if lost:
        from cafe.errors import CafeError

        raise CafeError(
            f"{len(lost)} of {len(asked)} answer-judge calls failed (first: sample "
            f"{lost[0].sample_id}: {lost[0].raw}); {SECTION} left as it was; run the same "
            "command again to retry them"
        )


def _describe_calls(
    section: dict[str, Any], store: RunStore, aj: AnswerJudge, asked: list[Verdict],
    cache_hits: int, mode: str, costs: Any, section_name: str = SECTION,
) -> None:  # fmt: skip
    """This invocation's calls, and the counters over every invocation under this spec."""
    section["calls"] = {
        "sent": aj.calls,
        "cache_hits": cache_hits,
        "judged_now": len(asked),
        "mode": mode,
        **call_stats_of(aj.client),  # 429s, 5xx, retries, waits
        **({"cost": costs} if costs is not None else {}),
    }
    section["counters"] = judge_counters(store.read_metrics().get(section_name), section["spec"], {
        "calls": aj.calls, "cache_hits": cache_hits, "judged": len(asked),
        "replies": by_status([v.status for v in asked]),
        **({"cost_usd": costs["total_cost_usd"]} if costs and "total_cost_usd" in costs else {}),
    })  # fmt: skip


def __getattr__(name: str) -> Any:
    # the command lives in the command-line layer (cafe.judge.cli); importable here
    if name == "judge_accuracy_command":
        from cafe.judge.cli import judge_accuracy_command

        return judge_accuracy_command
    raise AttributeError(name)
