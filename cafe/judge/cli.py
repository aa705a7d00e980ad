"""`cafe judge-agreement` (two judges on one run compared) and `cafe caption` (captions)."""

from __future__ import annotations

from typing import Any

import click

from cafe.caller import call_plan
from cafe.cli_options import (
    BatchChoice,
    batch_click_options,
    cache_option,
    command,
    concurrency_option,
    echo_costs,
    json_option,
    limit_option,
    template_option,
)
from cafe.failures import most_failed, summary_lines
from cafe.jsontext import strict_dumps
from cafe.judge.captions import caption


@command("judge-agreement")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--judges", nargs=2, required=True, metavar="A B",
              help="Two judge names (judgements.<name>.jsonl in RUN_DIR) or judgement "
              "files.")  # fmt: skip
@click.option("--macro", is_flag=True, help="Metric deltas from per-sample means.")
@json_option("Print JSON.")
def agreement_command(run_dir: str, judges: tuple[str, str], macro: bool, as_json: bool) -> None:
    """Compare two judges on the same run: Cohen's kappa over event labels (overall and per
    category) and the CAFE metric deltas B - A."""
    from cafe.judge.agreement import judge_agreement
    from cafe.metrics.cafe import METRICS, fmt

    res = judge_agreement(run_dir, judges[0], judges[1], "macro" if macro else "micro")
    if as_json:
        click.echo(strict_dumps(res, indent=2))
        return
    click.echo(
        f"A = {res['a']}, B = {res['b']}: {res['items_compared']} items, "
        f"{res['events_aligned']} events aligned"
    )
    click.echo(f"kappa {fmt(res['kappa'], 3)}, raw agreement {fmt(res['raw_agreement'], 3)}")
    for c, k in res["kappa_per_category"].items():
        click.echo(f"  kappa {c:<13}{fmt(k, 3):>7}")
    for m in METRICS:
        click.echo(
            f"  {m:<9} A {fmt(res['metrics_a'][m], 2):>7}  B {fmt(res['metrics_b'][m], 2):>7}"
            f"  B-A {fmt(res['delta_b_minus_a'][m], 2):>7}"
        )


@command("caption")
@click.option("--bench", required=True, help="Benchmark name (mmar, mmau).")
@click.option("--data", default=None, help="Benchmark metadata file or folder.")
@click.option("--version", "version", default=None, help="Benchmark version.")
@click.option("--audio-root", type=click.Path(file_okay=False), default=None,
              help="Folder the metadata's audio paths are relative to and must stay "
              "inside.")  # fmt: skip
@click.option("--captioner", required=True,
              help="Client kind of an audio-capable model: gemini, openai, "
              "openai-compatible.")  # fmt: skip
@click.option("--model", "model", default=None, help="Captioner model name (e.g. gemini-3-pro).")
@click.option("--endpoint", "endpoints", multiple=True, help="Server base URL; repeatable.")
@click.option("--api-key-env", metavar="NAME", default=None,
              help="Variable holding the --endpoint server's key "
              "[CAFE_ENDPOINT_API_KEY].")  # fmt: skip
@template_option("Your own caption instruction file.")
@concurrency_option(8, help="Captioner calls in flight.")
@limit_option(help="First N samples only.")
@cache_option("captions.sqlite")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Captions JSONL (appended to; done clips are skipped).")  # fmt: skip
@batch_click_options
def caption_command(
    model: str | None, cache_path: str | None, out: str, batch: BatchChoice, **options: Any
) -> None:
    """Write a ground-truth caption for each clip of a benchmark with an audio-capable model,
    for `cafe judge --captions FILE`. Resumable: clips already captioned with the same captioner,
    template and audio content are skipped. Keys come from the environment: GEMINI_API_KEY /
    OPENAI_API_KEY for Google's / OpenAI's own endpoint, CAFE_ENDPOINT_API_KEY (or
    --api-key-env NAME) for a server named with --endpoint."""
    # batch state beside the captions file: <out>.batches/
    plan = call_plan(f"{out}.", **batch.call_kwargs())
    # the other options carry caption()'s names
    res = caption(out=out, model=model or "", cache=cache_path, calls=plan, **options)
    for p in res["problems"][:20]:
        click.echo(str(p), err=True)
    failed = res["problems"][len(res["problems"]) - res["failed"] :]  # the captioning ones
    for line in summary_lines("clips", [(str(p), p.sample_id) for p in failed], res["attempted"]):
        click.echo(line, err=True)
    click.echo(  # on stdout, the problems above on stderr
        f"{res['written']} captions written to {out}, {res['skipped_done']} already there, "
        f"{len(res['problems'])} problems"
    )
    echo_costs({"cost": {**plan.ledger.summary(), "batches": plan.batch_stats()}})
    if res["attempted"] and most_failed(res["failed"], res["attempted"]):
        raise click.ClickException(
            f"{res['failed']} of {res['attempted']} clips were not captioned (reasons above); "
            "run the same command again to retry them"
        )
