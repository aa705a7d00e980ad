"""`cafe judge`'s orchestration (the CAFE judge of cafe.judge): judge every (item, run) of a
run folder, resumably, and write the CAFE metrics. The folder is read by the step engine's
reader (cafe.steps.engine.read_view) and the sections written through its writer; the judge
modules (cafe.judge.pipeline: resume, refusal, reply health; cafe.judge.stages: plan, execute)
compute from records and open no folder.

Judges what is not yet judged (at most ``concurrency`` calls in flight), appends judgements to
``judgements.<judge>.jsonl`` in small fsynced batches (a kill loses at most one batch, which the
call cache then replays for free), compacts the file, mirrors it to ``judgements.jsonl`` (the
run's current judge) only when the judge did its job, and writes the "cafe" and "decay"
sections. Not yet a Step: its batch transport, selective sharing and dry runs stay here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache, cache_file
from cafe.clients.base import call_stats_of
from cafe.counters import judge_counters
from cafe.errors import ConfigError, RunFolderError
from cafe.judge import JUDGES, build_judge
from cafe.judge.base import Judge, JudgeItem
from cafe.judge.pipeline import (
    _bench_breakdowns,
    _check_ground_truth,
    _item_without_sample,
    _judge_all,
    _NoWriter,
    _refuse_a_failed_judge,
    _write_compact,
    judgements_file,
    load_caption_map,
    read_judgements,
    reply_health,
    same_judge,
)
from cafe.judge.stages import merged, plan_judging
from cafe.locking import writes_folder
from cafe.metrics import compute_metrics
from cafe.metrics.cafe import cafe_section
from cafe.metrics.decay import decay_section
from cafe.records import Judgement, Prediction
from cafe.reporting import warn
from cafe.steps.engine import read_view, write_sections
from cafe.store import JUDGEMENTS, RunStore


@writes_folder("cafe judge")
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
    **judge_options: Any,
) -> dict[str, Any]:
    """Judge a run folder and return the metrics.json "cafe" section (also written there).

    ``cache``: a Cache, a path to the SQLite file, or None for ``$CAFE_CACHE/judge.sqlite``.
    ``batch``: deliver through the service's batch endpoints (state in RUN/batches/);
    ``dry_run``: count calls, cache hits and estimated cost, send and write nothing (returns
    that report); ``selective``: judge each distinct judge prompt once (see
    cafe.judge.batching); ``prices``: your price table (cafe/clients/prices.yaml's shape)."""
    from cafe.judge import batching

    store = RunStore(run_dir)
    view = read_view(store)  # the step engine's one read of the folder
    samples = view.samples or store.samples()  # none: the one-line error, and how to get it
    preds: list[Prediction] = view.predictions
    if not preds:
        raise RunFolderError(f"{run_dir}: no predictions.jsonl records to judge")
    caption_of = load_caption_map(samples, captions)
    judge_cls = JUDGES.get(judge)
    _check_ground_truth(run_dir, judge, judge_cls, samples, caption_of)
    if not isinstance(cache, Cache):
        use = getattr(judge_cls, "uses_cache", True)
        cache = Cache((cache if cache is not None else cache_file("judge.sqlite")) if use else None)
    plan = batching.call_plan(store.root, batch=batch, dry_run=dry_run, prices=prices,
                              batch_options=batch_options)  # fmt: skip
    judge_options["calls"] = plan  # an LLM judge hands it to make_client
    try:
        judge_obj: Judge = build_judge(
            judge, model=judge_model, endpoints=tuple(endpoints),
            template=str(template) if template else None, cache=cache,
            concurrency=concurrency,  # the client may keep this many in flight per endpoint
            **judge_options,
        )  # fmt: skip
    except ValueError as e:  # no server named, no key: one line before any item is judged
        raise ConfigError(str(e)) from None

    # plan: what this judge's spec has not judged yet
    work = plan_judging(
        judgements_file(store, judge_obj.identity), judge_obj.spec, preds, samples,
        read_judgements, same_judge(judge_obj),
        lambda p, why: judge_obj.failed(_item_without_sample(p), why),
        write=plan.mode != "dry-run",
    )  # fmt: skip
    items = [JudgeItem(s, p, caption_of.get(s.id)) for s, p in work.todo]
    sel = batching.select_items(judge_obj, items, selective)
    in_flight = plan.item_concurrency(concurrency)
    if plan.mode == "dry-run":
        return _dry_run(judge_obj, sel, work, items, in_flight, cache, plan, selective)
    # execute: calls in flight, records appended as they come
    t0 = time.perf_counter()
    with store.writer(work.path.name) as writer:
        writer.write_many([*work.orphans, *sel.decided])
        fresh = asyncio.run(_judge_all(judge_obj, sel.todo, writer, in_flight, progress))
        shared = batching.share_judgements(sel, fresh)
        writer.write_many(shared)
    wall = time.perf_counter() - t0
    fresh = [*fresh, *sel.decided, *shared]
    costs = batching.write_costs(store, plan, cache.hits)
    # store: this judge's file compacted; the run's current judgements only if it did its job
    judgements = merged(work, fresh)
    _write_compact(work.path, judgements)  # failed ones are retried next time
    reasons = _refuse_a_failed_judge(run_dir, judge_obj, work, fresh, preds, judgements, plan)
    _write_compact(store.path(JUDGEMENTS), judgements)
    store.invalidate(changed=("judgements",))  # what the earlier judgements fed goes
    # metrics
    section = cafe_section(judgements, samples, mode, breakdowns=_bench_breakdowns(store))
    _describe_judging(section, store, judge_obj, preds, fresh, cache.hits, wall, plan, costs)
    if reasons:
        section["failed_reasons"] = reasons
    if selective:
        section["selective"] = {
            **sel.report(len(items)),
            **batching.saving(sel, plan, getattr(judge_obj, "calls", 0), len(sel.todo)),
        }
    counter = view.manifest.get("token_counter")
    decay = decay_section(preds, judgements, mode=mode, counter=counter)
    write_sections(store, {"cafe": section, "decay": decay})
    compute_metrics(store.root)  # registered metrics (cafe.metrics.METRICS), each its own section
    return section


def _dry_run(
    judge: Judge, sel: Any, work: Any, items: list[Any], in_flight: int, cache: Cache, plan: Any,
    selective: bool,
) -> dict[str, Any]:  # fmt: skip
    """Count calls, cache hits and the estimated cost: nothing sent, nothing written."""
    from cafe.judge import batching

    asyncio.run(_judge_all(judge, sel.todo, _NoWriter(), in_flight, False))
    return batching.dry_run_report(
        plan, items=len(sel.todo), already_done=len(work.done), cache_hits=cache.hits,
        selection=sel.report(len(items)) if selective else None,
    )  # fmt: skip


def _describe_judging(
    section: dict[str, Any], store: RunStore, judge: Judge, preds: list[Prediction],
    fresh: list[Judgement], cache_hits: int, wall: float, plan: Any, costs: Any,
) -> None:  # fmt: skip
    """What the "cafe" section says about the judge and this invocation: its spec, reasoning
    accuracy, reply health, calls, and the counters over every invocation under this spec."""
    health = reply_health(fresh)
    if health["warning"]:
        warn(health["warning"])
    n_correct = sum(p.correct for p in preds)
    sent = getattr(judge, "calls", 0)
    section.update(
        judge=judge.describe(),
        spec=judge.spec.to_dict(),
        template_hash=judge.template_hash,
        judgements_file=store.judge_records("cafe", judge.identity).name,
        reasoning_accuracy={
            "correct": n_correct,
            "total": len(preds),
            "acc": round(100.0 * n_correct / len(preds), 2),
            "note": "share of all (item, run) predictions; the official accuracy is in 'accuracy'",
        },
        replies=health,
        calls={
            "sent": sent,
            "cache_hits": cache_hits,
            "judged_now": len(fresh),
            "judge_wall_s": round(wall, 3),
            "mode": plan.mode,
            **call_stats_of(getattr(judge, "_client", None)),  # 429s, 5xx, retries, waits
            **({"cost": costs} if costs is not None else {}),
        },
    )
    section["counters"] = judge_counters(store.read_metrics().get("cafe"), section["spec"], {
        "calls": sent, "cache_hits": cache_hits, "judged": len(fresh),
        "replies": {k: health[k] for k in ("ok", "empty", "unparseable", "failed")},
        **({"cost_usd": costs["total_cost_usd"]} if costs and "total_cost_usd" in costs else {}),
    })  # fmt: skip
