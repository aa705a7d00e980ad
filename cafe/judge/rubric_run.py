"""`cafe rubric RUN_DIR`: MMAR rubric scores for a run folder, resumably.

Reads samples.jsonl (MMAR v2 items carry ``rubric`` and ``thinking``) and predictions.jsonl,
rates what is not yet rated (at most ``concurrency`` judge calls in flight), appends records to
``rubric.<judge>.jsonl`` in small fsynced batches, compacts it (one record per (item, run)) and
writes the metrics.json "rubric" section with the judge named. Failed items (transport) are
tried again on the next run; invalid ones are kept (their replies replay from the cache)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from cafe.cache import Cache, cache_file
from cafe.cli_options import command
from cafe.clients.base import call_stats_of
from cafe.counters import by_status, judge_counters
from cafe.judge.batching import (
    batch_click_options,
    batch_options,
    call_plan,
    echo_costs,
    write_costs,
)
from cafe.judge.pipeline import (
    _bench_breakdowns,
    _write_compact,
)
from cafe.judge.rubric import PAPER_JUDGE, RATERS, RETRIES, SEED, TEMPERATURE, TRIM, RubricJudge
from cafe.judge.stages import execute, merged, plan_judging
from cafe.locking import writes_folder
from cafe.metrics.rubric import format_rubric, rubric_section
from cafe.records import RubricScore
from cafe.store import RunStore, latest_records

SECTION = "rubric"


def rubric_file(store: RunStore, identity: str) -> Path:
    return store.judge_records("rubric", identity)


def read_scores(path: Path) -> list[RubricScore]:
    return latest_records(path, RubricScore)


@writes_folder("cafe rubric")
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
    **client_options: Any,
) -> dict[str, Any]:
    """Rate a run folder against its MMAR rubrics; returns (and writes) the "rubric" section.
    ``judge`` is a chat client kind (openai, gemini, openai-compatible)."""
    store = RunStore(run_dir)
    samples = store.samples()
    preds = store.predictions()
    if not preds:
        raise ValueError(f"{run_dir}: no predictions.jsonl records to rate")
    if not any(s.meta.get("rubric") for s in samples):
        raise ValueError(
            f"{store.root}: no sample carries a rubric; rubric scoring needs MMAR v2 metadata "
            "(MMAR-meta.jsonl from the MMAR GitHub repository)"
        )
    if not isinstance(cache, Cache):
        cache = Cache(cache if cache is not None else cache_file("judge.sqlite"))
    scorer = RubricJudge(
        judge, judge_model, endpoints, str(template) if template else None, cache,
        raters=raters, trim=trim, temperature=temperature, seed=seed, retries=retries,
        concurrency=concurrency, **client_options,
    )  # fmt: skip
    # plan: a record made under another template or other rater settings is rated again (the
    # calls it shares with this protocol replay from the cache)
    work = plan_judging(
        rubric_file(store, scorer.identity), scorer.spec, preds, samples, read_scores,
        lambda r: (r.judge, r.template_hash, r.protocol)
        == (scorer.identity, scorer.template_hash, scorer.protocol),
        lambda p, why: scorer.record(p, "failed", reason=why),
    )  # fmt: skip
    path = work.path
    t0 = time.perf_counter()
    with store.writer(path.name) as writer:
        writer.write_many(work.orphans)
        fresh = asyncio.run(execute(
            work.todo, lambda job: scorer.ascore(*job),
            lambda job, why: scorer.record(job[1], "failed", reason=why), writer,
            concurrency=scorer.concurrency, desc=f"rubric {scorer.identity}",
            progress=progress, aclose=scorer.aclose,
        ))  # fmt: skip
    wall = time.perf_counter() - t0
    records = merged(work, fresh)
    keys = work.keys
    # every item of every run is accounted for: an item with no prediction scores 0
    runs = sorted({p.run_index for p in preds})
    for s in samples:
        for r in runs:
            if (s.id, r) not in keys:
                records.append(
                    RubricScore(s.id, r, scorer.identity, scorer.template_hash, "no_prediction",
                                score=0.0, protocol=scorer.protocol,
                                reason="no prediction for this (item, run)")
                )  # fmt: skip
    _write_compact(path, [r for r in records if r.status != "no_prediction"])
    section = rubric_section(records, samples, _bench_breakdowns(store))
    section = {
        "judge": scorer.describe(),
        "spec": scorer.spec.to_dict(),
        "protocol": "MMAR code/evaluation_rubrics.py: official string match gates; "
        f"{raters} raters, drop {trim} lowest and highest, average the rest",
        **section,
        "file": path.name,
        "calls": {
            "sent": scorer.calls,
            "cache_hits": cache.hits,
            "rated_now": len(fresh),
            "wall_s": round(wall, 3),
            **call_stats_of(scorer._client),  # 429s, 5xx, retries, waits
        },
    }
    section["counters"] = judge_counters(store.read_metrics().get(SECTION), section["spec"], {
        "calls": scorer.calls, "cache_hits": cache.hits, "rated": len(fresh),
        "replies": by_status([r.status for r in fresh]),
    })  # fmt: skip
    store.update_metrics(SECTION, section)
    return section


@command("rubric")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--judge",
    default="openai",
    show_default=True,
    type=click.Choice(["openai", "gemini", "openai-compatible"]),
    help="Chat protocol of the judge (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
)
@click.option(
    "--judge-model", default=PAPER_JUDGE, show_default=True, help="Judge model (the authors')."
)
@click.option(
    "--judge-endpoint", "endpoints", multiple=True, help="Judge server base URL (repeatable)."
)
@click.option(
    "--judge-concurrency",
    type=click.IntRange(1, 10**8),
    default=16,
    show_default=True,
    help="Judge calls in flight at once.",
)
@click.option(
    "--judge-api-key-env",
    "api_key_env",
    metavar="NAME",
    help="Variable holding the --judge-endpoint server's key [CAFE_ENDPOINT_API_KEY; "
    "OpenAI's / Google's own endpoint: OPENAI_API_KEY / GEMINI_API_KEY].",
)
@click.option("--raters", type=click.IntRange(1, 10**8), default=RATERS, show_default=True)
@click.option(
    "--trim",
    type=click.IntRange(0, 10**8),
    default=TRIM,
    show_default=True,
    help="Drop this many lowest and highest rater scores before averaging.",
)
@click.option("--temperature", type=click.FloatRange(0, 10), default=TEMPERATURE, show_default=True)
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=SEED, show_default=True)
@click.option(
    "--retries",
    type=click.IntRange(0, 10**8),
    default=RETRIES,
    show_default=True,
    help="Extra attempts per rater after an invalid reply.",
)
@click.option(
    "--template",
    type=click.Path(exists=True, dir_okay=False),
    help="Your own rubric template (same '----- part -----' layout as the packaged one).",
)
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False), help="SQLite call cache.")
@batch_click_options
@click.option("--json", "as_json", is_flag=True, help="Print the section as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def rubric_command(
    run_dir: str,
    judge: str,
    judge_model: str,
    endpoints: tuple[str, ...],
    judge_concurrency: int,
    api_key_env: str | None,
    raters: int,
    trim: int,
    temperature: float,
    seed: int,
    retries: int,
    template: str | None,
    cache_path: str | None,
    as_json: bool,
    no_progress: bool,
    batch: bool = False,
    batch_retry: str = "resubmit",
    batch_poll: float = 30.0,
    batch_no_wait: bool = False,
    prices: str | None = None,
) -> None:
    """Score RUN_DIR's MMAR predictions against each item's rubric, to the MMAR authors'
    protocol: only correct answers are rated, RATERS judge calls per item, trimmed mean; results
    by modality, category and sub-category go into metrics.json "rubric".

    \b
    cafe rubric runs/qwen2.5-omni-7b-mmar-v2                       # gpt-4o-2024-11-20, 5 raters
    cafe rubric runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """
    # the batch transport and cost ledger (cafe.judge.batching): state in RUN_DIR/batches/
    opts = batch_options(batch_retry, batch_poll, batch_no_wait)
    plan = call_plan(run_dir, batch=batch, prices=prices, batch_options=opts)
    try:
        section = rubric_run(
            run_dir, judge, judge_model, endpoints, plan.item_concurrency(judge_concurrency),
            raters=raters, trim=trim, temperature=temperature, seed=seed, retries=retries,
            template=template, cache=cache_path, progress=not no_progress, calls=plan,
            **({"api_key_env": api_key_env} if api_key_env else {}),
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    cost = write_costs(RunStore(run_dir), plan, section["calls"]["cache_hits"])
    click.echo(json.dumps(section, indent=2) if as_json else format_rubric(section))
    echo_costs({**section["calls"], **({"cost": cost} if cost else {})})
    failed = section["status"].get("failed", 0)
    if failed:  # a score left absent must not look like success
        raise click.ClickException(
            f"{failed} of {section['total']} items could not be rated (judge calls failed; "
            f"reasons in {section['file']}): the score is absent; run the same command again "
            "to retry them"
        )
