"""`judge_run`: judge every (item, run) of a run folder, resumably, and write the CAFE metrics.

Reads samples.jsonl + predictions.jsonl, judges what is not yet judged (asynchronously, at most
``concurrency`` calls in flight, spread by the client over its endpoints), appends judgements to
``judgements.<judge>.jsonl`` in small fsynced batches (a kill loses at most one batch, which the
call cache then replays for free), compacts the file (one record per (item, run)), mirrors it to
``judgements.jsonl`` (the run's current judge) and writes the "cafe" and "decay" sections of
metrics.json. Invalid judgements are kept (re-judging replays them from the cache); failed ones
are tried again on the next run."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache, cache_file
from cafe.clients.base import call_stats_of
from cafe.clients.breaker import ServerUnreachable
from cafe.errors import CafeError, ConfigError, RunFolderError
from cafe.failures import most_failed, summary_lines
from cafe.judge import JUDGES, build_judge
from cafe.judge.base import Judge, JudgeItem
from cafe.metrics import compute_metrics
from cafe.metrics.cafe import cafe_section
from cafe.metrics.decay import decay_section
from cafe.records import Judgement, Prediction, Sample
from cafe.store import JUDGEMENTS, SAMPLES, RunStore, latest_records, rewrite_jsonl

FLUSH_EVERY = 32


class JudgeFailedError(CafeError):
    """Most judgements failed: the run's current judgements and CAFE metrics were left as they
    were (a failed judge never replaces a good one); the message gives the reasons with counts."""


def judge_slug(identity: str) -> str:
    """File-name form of a judge identity: judgements.<slug>.jsonl."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", identity).strip("-")


def judgements_file(store: RunStore, identity: str) -> Path:
    return store.path(f"judgements.{judge_slug(identity)}.jsonl")


def read_judgements(path: Path) -> list[Judgement]:
    return latest_records(path, Judgement)


def _write_compact(path: Path, records: Sequence[Judgement]) -> None:
    rewrite_jsonl(path, records)


async def _judge_all(
    judge: Judge, items: list[JudgeItem], writer: Any, concurrency: int, progress: bool
) -> list[Judgement]:
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(item: JudgeItem) -> Judgement:
        async with sem:
            try:
                return await judge.ajudge(item)
            except ServerUnreachable:  # a dead server stops the command (write_as_completed)
                raise
            except Exception as e:  # a bug in one item must not lose the rest
                return judge.failed(item, f"{type(e).__name__}: {e}")

    try:
        return await write_as_completed(
            [one(i) for i in items], writer, f"judge {judge.identity}", progress
        )
    finally:
        await judge.aclose()


async def write_as_completed(
    coros: Sequence[Any], writer: Any, desc: str, progress: bool
) -> list[Any]:
    """Await judge calls as they finish; append their records in fsynced batches of FLUSH_EVERY
    (a kill loses at most one batch, which the next run judges again). A judge server that
    stops answering (ServerUnreachable) ends it: what finished is written, the error says so."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(coros), desc=desc, unit="item")
    done: list[Any] = []
    buffer: list[Any] = []
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        for fut in asyncio.as_completed(tasks):
            record = await fut
            done.append(record)
            buffer.append(record)
            if len(buffer) >= FLUSH_EVERY:
                writer.write_many(buffer)
                buffer = []
            if bar is not None:
                bar.update(1)
        writer.write_many(buffer)
    except ServerUnreachable as e:
        writer.write_many(buffer)
        for t in tasks:  # the others would only fail the same way
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise e.stopped(f"{len(done)} records of this run kept") from None
    finally:
        if bar is not None:
            bar.close()
    return done


class _NoWriter:
    def write_many(self, records: Any) -> None:
        pass


def load_caption_map(samples: Sequence[Sample], captions: str | Path | None) -> dict[str, str]:
    out = {s.id: s.caption for s in samples if s.caption}
    if captions is not None:
        from cafe.judge.captions import load_captions

        out.update(load_captions(captions))
    return out


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
    samples = store.samples()
    preds: list[Prediction] = store.predictions()
    if not preds:
        raise RunFolderError(f"{run_dir}: no predictions.jsonl records to judge")
    by_id = {s.id: s for s in samples}
    caption_of = load_caption_map(samples, captions)
    judge_cls = JUDGES.get(judge)
    if getattr(judge_cls, "needs_caption", True) and not caption_of:
        raise ConfigError(
            f"{run_dir}: no sample has a caption; the {judge} judge needs ground-truth captions: "
            "write them with `cafe caption --bench NAME --captioner ... --out FILE` and pass "
            "--captions FILE (or use --judge rule on the synth benchmark)"
        )
    # events known (an empty list under a silence control is known: nothing happens)
    if getattr(judge_cls, "needs_events", False) and all(s.events is None for s in samples):
        raise ConfigError(
            f"{run_dir}: the {judge} judge needs ground-truth events, which no sample of this "
            "benchmark carries (synth has them); use an LLM judge with --captions FILE"
        )
    if not isinstance(cache, Cache):
        use = getattr(judge_cls, "uses_cache", True)
        cache = Cache((cache if cache is not None else cache_file("judge.sqlite")) if use else None)
    plan = batching.call_plan(store.root, batch=batch, dry_run=dry_run, prices=prices,
                              batch_options=batch_options)  # fmt: skip
    judge_options["calls"] = plan  # an LLM judge hands it to make_client
    try:
        judge_obj: Judge = build_judge(
            judge,
            model=judge_model,
            endpoints=tuple(endpoints),
            template=str(template) if template else None,
            cache=cache,
            concurrency=concurrency,  # the client may keep this many in flight per endpoint
            **judge_options,
        )
    except ValueError as e:  # no server named, no key: one line before any item is judged
        raise ConfigError(str(e)) from None

    path = judgements_file(store, judge_obj.identity)
    existing = [
        j
        for j in read_judgements(path)
        if j.judge == judge_obj.identity and j.template_hash == judge_obj.template_hash
    ]
    done_keys = {(j.sample_id, j.run_index) for j in existing if j.status != "failed"}
    items = []
    missing_sample: list[Judgement] = []
    for p in preds:
        if (p.sample_id, p.run_index) in done_keys:
            continue
        s = by_id.get(p.sample_id)
        if s is None:
            missing_sample.append(
                judge_obj.failed(
                    JudgeItem(Sample(p.sample_id, "", "", "", [], None, []), p, None),
                    f"{SAMPLES}: sample {p.sample_id} not found",
                )
            )
            continue
        items.append(JudgeItem(s, p, caption_of.get(s.id)))

    sel = batching.select_items(judge_obj, items, selective)
    in_flight = plan.item_concurrency(concurrency)
    if plan.mode == "dry-run":
        asyncio.run(_judge_all(judge_obj, sel.todo, _NoWriter(), in_flight, False))
        return batching.dry_run_report(
            plan, items=len(sel.todo), already_done=len(done_keys), cache_hits=cache.hits,
            selection=sel.report(len(items)) if selective else None,
        )  # fmt: skip
    t0 = time.perf_counter()
    with store.writer(path.name) as writer:
        writer.write_many([*missing_sample, *sel.decided])
        fresh = asyncio.run(_judge_all(judge_obj, sel.todo, writer, in_flight, progress))
        shared = batching.share_judgements(sel, fresh)
        writer.write_many(shared)
    judge_wall = time.perf_counter() - t0
    fresh = [*fresh, *sel.decided, *shared]
    costs = batching.write_costs(store, plan, cache.hits)

    health = reply_health(fresh)
    if health["warning"]:
        import click

        click.echo(f"warning: {health['warning']}", err=True)

    keys = {(p.sample_id, p.run_index) for p in preds}
    merged = {(j.sample_id, j.run_index): j for j in [*existing, *missing_sample, *fresh]}
    judgements = [j for k, j in merged.items() if k in keys]
    _write_compact(path, judgements)  # this judge's own file: failed ones retried next time
    attempted = [*missing_sample, *fresh]

    def said(j: Judgement) -> tuple[str, str]:  # one line naming the file and the item
        return f"{path.name}: sample {j.sample_id}: {j.reason or j.status}", j.sample_id

    failed = [said(j) for j in attempted if j.status == "failed"]
    reasons = summary_lines("judgements", failed, len(attempted))
    invalid = [said(j) for j in attempted if j.status == "invalid"]
    reasons += summary_lines("judge replies", invalid, len(attempted), verb="were unusable")
    # the judge's own record: of the predictions that have an output to judge, how many did it
    # fail on (a failed prediction's judgement fails whatever the judge)
    outputs = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None}
    judged = [j for j in judgements if (j.sample_id, j.run_index) in outputs]
    judge_failed = sum(j.status == "failed" for j in judged)
    # a batch left running (--batch-no-wait) or cancelled at the service is pending, not a judge
    # failure: the next run collects it or submits its items anew
    pending = sum(
        int(s.get("left_pending", 0)) + int(s.get("cancelled_items", 0))
        for s in plan.batch_stats().values()
    )
    if attempted and not pending and most_failed(judge_failed, len(judged)):
        raise JudgeFailedError(
            "\n".join([*reasons, f"judge {judge_obj.identity} failed: {run_dir}'s judgements.jsonl "
                        "and its CAFE metrics were left as they were; fix the cause and run the "
                        "same command again (failed judgements are retried)"])
        )  # fmt: skip
    _write_compact(store.path(JUDGEMENTS), judgements)

    section = cafe_section(judgements, samples, mode, breakdowns=_bench_breakdowns(store))
    n_correct = sum(p.correct for p in preds)
    section.update(
        judge=judge_obj.describe(),
        template_hash=judge_obj.template_hash,
        judgements_file=path.name,
        reasoning_accuracy={
            "correct": n_correct,
            "total": len(preds),
            "acc": round(100.0 * n_correct / len(preds), 2),
            "note": "share of all (item, run) predictions; the official accuracy is in 'accuracy'",
        },
        replies=health,
        calls={
            "sent": getattr(judge_obj, "calls", 0),
            "cache_hits": cache.hits,
            "judged_now": len(fresh),
            "judge_wall_s": round(judge_wall, 3),
            "mode": plan.mode,
            **call_stats_of(getattr(judge_obj, "_client", None)),  # 429s, 5xx, retries, waits
            **({"cost": costs} if costs is not None else {}),
        },
    )
    if reasons:
        section["failed_reasons"] = reasons
    if selective:
        section["selective"] = {
            **sel.report(len(items)),
            **batching.saving(sel, plan, getattr(judge_obj, "calls", 0), len(sel.todo)),
        }
    store.update_metrics("cafe", section)
    store.update_metrics("decay", decay_section(preds, judgements, mode=mode))
    compute_metrics(store.root)  # registered metrics (cafe.metrics.METRICS), each its own section
    return section


def reply_health(judgements: Sequence[Judgement]) -> dict[str, Any]:
    """Counts of this batch's judge replies by outcome, and a warning when most were not usable
    (a thinking judge out of budget, a wrong template, a dead server: never a quiet gap)."""
    out = {"judged": len(judgements), "ok": 0, "empty": 0, "unparseable": 0, "failed": 0}
    first: str | None = None
    for j in judgements:
        if j.status == "ok":
            out["ok"] += 1
            continue
        why = j.reason or ""
        kind = (
            "failed"
            if j.status == "failed"
            else "empty"
            if "empty reply" in why or "no answer after the thinking" in why
            else "unparseable"
        )
        out[kind] += 1
        first = first or why
    bad = out["judged"] - out["ok"]
    out["warning"] = (
        f"{bad} of {out['judged']} judge replies unusable ({out['empty']} empty or thinking only, "
        f"{out['unparseable']} unparseable, {out['failed']} failed calls); first: {first}"
        if out["judged"] and bad * 2 > out["judged"]
        else None
    )
    return out


def _bench_breakdowns(store: RunStore) -> dict[str, Any] | None:
    """The run's benchmark's own breakdowns (as its accuracy uses), else None (Sample.meta keys)."""
    from cafe.benchmarks import BENCHMARKS

    try:
        name = store.read_manifest().get("bench", {}).get("name")
        if not name:
            return None
        return dict(BENCHMARKS.get(name).breakdowns) or None
    except (FileNotFoundError, KeyError, ValueError, AttributeError):
        return None


def format_cafe(section: dict[str, Any]) -> str:
    """A short human summary of a "cafe" section."""

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    st = section["judgements"]
    runs = section.get("runs", {})
    lines = [
        f"CAFE: {section.get('headline', section['mode'])}; judge {section['judge']['judge']}, "
        f"template {section['template_hash'][:12]}, runs {runs.get('n', 1)}",
    ]
    for m, label in (
        ("acc_per", "Acc_per"),
        ("err_per", "Err_per"),
        ("err_use", "Err_use"),
        ("err_omit", "Err_omit"),
    ):
        ci = section.get("ci95", {}).get(m)
        sd = runs.get(m, {}).get("std")
        extra = f"  95% CI [{f(ci[0])}, {f(ci[1])}]" if ci else ""
        extra += f"  std over runs {f(sd)}" if runs.get("n", 1) > 1 else ""
        pooled = (section.get("pooled") or {}).get(m)
        extra += f"  (pooled over (item, run): {f(pooled)})" if runs.get("n", 1) > 1 else ""
        lines.append(f"  {label:<9}{f(section[m]):>7}{extra}")
    ms = section.get("macro_samples")
    if ms:
        lines.append(
            f"  macro = mean of per-(item, run) ratios; skipped: {ms['skipped_zero_pred']} with "
            f"no predicted events, {ms['skipped_zero_tgt']} with no required events"
        )
    lines.append(
        f"  judgements: {st['ok']} ok, {st['invalid']} invalid, {st['failed']} failed "
        f"(of {st['total']}); reasoning accuracy {f(section['reasoning_accuracy']['acc'])}"
    )
    lines += section.get("failed_reasons") or []
    return "\n".join(lines)


def dumps(section: dict[str, Any]) -> str:
    return json.dumps(section, indent=2, ensure_ascii=False)
