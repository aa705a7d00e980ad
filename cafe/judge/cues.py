"""`cafe cues RUN_DIR`: cue recall for MMAR v2 runs (cafe.metrics.cues), offline always and by
the CAFE judge when one is named: the extraction judge (same JSON, same validation, retries and
cache as `cafe judge`) with the item's cue list in place of the required events it would pick
from a caption. Judgements go to ``cues.judgements.<judge>.jsonl``; the metrics.json "cues"
section also compares the cues with the run's own CAFE judgements' ``required_events``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from cafe.cache import Cache, cache_file
from cafe.cli_options import command
from cafe.judge.base import JudgeItem, load_template
from cafe.judge.extraction import LLMJudge, build_prompt
from cafe.judge.pipeline import (
    _bench_breakdowns,
    _item_without_sample,
    _judge_all,
    _write_compact,
    load_caption_map,
    read_judgements,
    same_judge,
)
from cafe.judge.stages import merged, plan_judging
from cafe.locking import writes_folder
from cafe.metrics.cues import cues_of, cues_section
from cafe.store import RunStore

SECTION = "cues"
NO_CAPTION = "(no caption: the cues above are all that is known about the clip)"


class CueJudge(LLMJudge):
    """The CAFE extraction judge told the required events: the item's MMAR cues."""

    needs_caption = False
    task = "cue-extraction"

    def __init__(self, kind: str, model: str | None = None, template: str | None = None, **kw: Any):
        super().__init__(kind, model, template=None, **kw)
        self.template, self.template_hash = load_template("cue_extraction", template)

    def prompt_for(self, item: JudgeItem) -> str:
        s = item.sample
        text = build_prompt(
            self.template,
            question=s.question,
            answer=s.answer or "",
            caption=item.caption,
            output=item.prediction.raw_output or "",
            choices="\n".join(s.choices),
        )
        return text.replace("{cues}", "\n".join(f"- {c}" for c in cues_of(s)))


def cue_judgements_file(store: RunStore, identity: str) -> Path:
    return store.judge_records("cues", identity)


@writes_folder("cafe cues")
def cues_run(
    run_dir: str | Path,
    judge: str | None = None,
    judge_model: str | None = None,
    endpoints: Sequence[str] = (),
    concurrency: int = 16,
    *,
    template: str | Path | None = None,
    captions: str | Path | None = None,
    cache: Cache | str | Path | None = None,
    progress: bool = True,
    **client_options: Any,
) -> dict[str, Any]:
    """Write (and return) the "cues" section; with ``judge`` (openai, gemini,
    openai-compatible) the cue judge runs too, resumably and cached."""
    store = RunStore(run_dir)
    samples = store.samples()
    preds = store.predictions()
    if not preds:
        raise ValueError(f"{run_dir}: no predictions.jsonl records")
    if not any(cues_of(s) for s in samples):
        raise ValueError(
            f"{store.root}: no sample carries cues; cue recall needs MMAR v2 metadata "
            "(MMAR-meta.jsonl, field 'cue')"
        )
    cue_judgements = None
    described = None
    if judge:
        if not isinstance(cache, Cache):
            cache = Cache(cache if cache is not None else cache_file("judge.sqlite"))
        cj = CueJudge(judge, judge_model, str(template) if template else None,
                      endpoints=tuple(endpoints), cache=cache, concurrency=concurrency,
                      **client_options)  # fmt: skip
        described = cj.describe()
        # a failed prediction has no reasoning to read: the offline recall counts it 0 of its
        # cues and the judge is not asked; nor is one whose sample is gone
        usable = [p for p in preds if p.error is None and p.raw_output is not None]
        work = plan_judging(
            cue_judgements_file(store, cj.identity), cj.spec, usable, samples, read_judgements,
            same_judge(cj), lambda p, why: cj.failed(_item_without_sample(p), why),
        )  # fmt: skip
        path = work.path
        caption_of = load_caption_map(samples, captions)
        items = [JudgeItem(s, p, caption_of.get(s.id) or NO_CAPTION)
                 for s, p in work.todo if cues_of(s)]  # fmt: skip
        with store.writer(path.name) as writer:
            fresh = asyncio.run(_judge_all(cj, items, writer, concurrency, progress))
        work.orphans = []  # a missing sample has no cues: nothing for the cue judge to record
        cue_judgements = merged(work, fresh)
        _write_compact(path, cue_judgements)
        described = {**described, "file": path.name, "calls_sent": cj.calls}
    cafe_judgements = [j for j in store.judgements() if j.status == "ok"] or None
    section = cues_section(
        samples, preds, _bench_breakdowns(store), cue_judgements, described, cafe_judgements
    )
    store.update_metrics(SECTION, section)
    return section


def format_cues(section: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines = []
    for who in ("offline", "judge"):
        b = section.get(who)
        if not b:
            continue
        name = "offline matcher" if who == "offline" else f"judge {b['judge']['judge']}"
        lines.append(
            f"cue recall ({name}): {f(b['recall'])} pooled over {b['cues']} cues, "
            f"{f(b['recall_macro'])} mean per item, {b['items']} (item, run)s; "
            f"{b['no_cues']} without cues"
        )
    ag = section.get("offline_vs_judge")
    if ag:
        lines.append(
            f"offline vs judge per cue: agreement {f(ag['agreement'])}, kappa {ag['kappa']}"
        )
    rq = section.get("cues_vs_required_events")
    if rq:
        lines.append(
            f"cues vs the CAFE judge's required events ({rq['items']} (item, run)s): precision "
            f"{f(rq['precision'])}, recall {f(rq['recall'])}, F1 {f(rq['f1'])}"
        )
    return "\n".join(lines)


@command("cues")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--judge",
    type=click.Choice(["openai", "gemini", "openai-compatible"]),
    help="Also ask this CAFE judge (cue list as required events); offline matcher only without.",
)
@click.option("--judge-model", help="Judge model name.")
@click.option("--judge-endpoint", "endpoints", multiple=True, help="Judge server URL (repeatable).")
@click.option("--judge-concurrency", type=click.IntRange(1, 10**8), default=16, show_default=True)
@click.option(
    "--judge-api-key-env",
    "api_key_env",
    metavar="NAME",
    help="Variable holding the --judge-endpoint server's key [CAFE_ENDPOINT_API_KEY; "
    "OpenAI's / Google's own endpoint: OPENAI_API_KEY / GEMINI_API_KEY].",
)
@click.option(
    "--captions", type=click.Path(exists=True, dir_okay=False), help="Captions file (optional)."
)
@click.option("--template", type=click.Path(exists=True, dir_okay=False), help="Own template.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False), help="SQLite call cache.")
@click.option("--json", "as_json", is_flag=True, help="Print the section as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def cues_command(
    run_dir: str,
    judge: str | None,
    judge_model: str | None,
    endpoints: tuple[str, ...],
    judge_concurrency: int,
    api_key_env: str | None,
    captions: str | None,
    template: str | None,
    cache_path: str | None,
    as_json: bool,
    no_progress: bool,
) -> None:
    """Cue recall of RUN_DIR (MMAR v2): the share of each item's ground-truth audio cues that the
    model's reasoning mentions, by a documented offline matcher and optionally by the CAFE judge,
    plus how the cues agree with the CAFE judge's required events (after `cafe judge`).

    \b
    cafe cues runs/x
    cafe cues runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """
    if judge and not judge_model:
        raise click.UsageError(f"--judge {judge} needs --judge-model NAME")
    try:
        section = cues_run(
            run_dir, judge, judge_model, endpoints, judge_concurrency, template=template,
            captions=captions, cache=cache_path, progress=not no_progress,
            **({"api_key_env": api_key_env} if api_key_env else {}),
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(json.dumps(section, indent=2) if as_json else format_cues(section))
