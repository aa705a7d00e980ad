"""`cafe judge RUN_DIR --judge NAME`: CAFE event extraction and perception metrics for a run."""

from __future__ import annotations

import click

from cafe.cli_options import command, judge_server_options, no_progress_option
from cafe.judge import JUDGES
from cafe.judge.batching import batch_click_options


@command("judge")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--judge",
    "judge",
    default="rule",
    show_default=True,
    help="rule (synth, offline), openai-compatible (e.g. `vllm serve "
    "Qwen/Qwen3-32B`), openai or gemini (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
)
@judge_server_options(16, endpoint_old=("--endpoint",), concurrency_old=("--concurrency",))
@click.option(
    "--template",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Your own extraction template ({question} {answer} {caption} {output}).",
)
@click.option(
    "--captions",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Captions file from `cafe caption` (needed for MMAU/MMAR).",
)
@click.option("--macro", is_flag=True, help="Average per-sample ratios instead of pooling counts.")
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="SQLite call cache (default $CAFE_CACHE/judge.sqlite).",
)
@click.option(
    "--thinking/--no-thinking",
    default=False,
    show_default=True,
    help="Let a thinking judge think (OpenAI-compatible servers are otherwise sent "
    "chat_template_kwargs enable_thinking=false). Its reasoning is kept, never parsed.",
)
@click.option(
    "--thinking-budget",
    type=click.IntRange(0, 10**8),
    default=None,
    help="Tokens a thinking judge may spend before its reply [4096], added to the reply's.",
)
@batch_click_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print calls, cache hits and estimated cost (direct and batch); send nothing.",
)
@click.option(
    "--selective",
    is_flag=True,
    help="Judge each distinct judge prompt once (runs that answered alike share a "
    "judgement) and skip what the judge decides without a call; saving reported.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics section as JSON.")
@no_progress_option()
def judge_command(
    run_dir: str,
    judge: str,
    judge_model: str | None,
    judge_api_key_env: str | None,
    judge_endpoints: tuple[str, ...],
    judge_concurrency: int,
    template: str | None,
    captions: str | None,
    macro: bool,
    cache_path: str | None,
    thinking: bool,
    thinking_budget: int | None,
    as_json: bool,
    no_progress: bool,
    batch: bool = False,
    batch_retry: str = "resubmit",
    batch_poll: float = 30.0,
    batch_no_wait: bool = False,
    dry_run: bool = False,
    selective: bool = False,
    prices: str | None = None,
) -> None:
    """Judge every prediction in RUN_DIR and write Acc_per, Err_per, Err_use and Err_omit (micro
    by default) into its metrics.json, with judgements in judgements.<judge>.jsonl.

    Resumable and cached: re-running skips what is judged and replays cached judge replies.

    \b
    cafe judge runs/x --judge rule
    cafe judge runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1 --captions mmar_captions.jsonl
    """
    from cafe.judge.batching import batch_options, echo_costs, format_dry_run
    from cafe.judge.pipeline import dumps, format_cafe, judge_run

    if judge not in JUDGES:
        raise click.UsageError(f"unknown judge {judge!r}; choose from {', '.join(JUDGES.names())}")
    if judge != "rule" and not judge_model:
        raise click.UsageError(f"--judge {judge} needs --judge-model NAME")
    section = judge_run(
        run_dir,
        judge=judge,
        judge_model=judge_model,
        endpoints=judge_endpoints,
        concurrency=judge_concurrency,
        template=template,
        mode="macro" if macro else "micro",
        progress=not no_progress,
        captions=captions,
        cache=cache_path,
        **({"api_key_env": judge_api_key_env} if judge_api_key_env else {}),
        batch=batch,
        dry_run=dry_run,
        selective=selective,
        prices=prices,
        batch_options=batch_options(batch_retry, batch_poll, batch_no_wait),
        **({"thinking": True, "thinking_budget": thinking_budget} if thinking else {}),
    )
    if dry_run:
        click.echo(dumps(section) if as_json else format_dry_run(section))
        return
    click.echo(dumps(section) if as_json else format_cafe(section))
    echo_costs(section.get("calls", {}), section.get("selective"))
