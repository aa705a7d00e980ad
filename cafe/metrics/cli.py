"""Command-line layer of the metrics that run a model themselves: `cafe attention`."""

from __future__ import annotations

import click

from cafe.cli_options import (
    ModelChoice,
    command,
    data_option,
    limit_option,
    max_new_tokens_option,
    model_options,
    no_progress_option,
)
from cafe.metrics.attention import attention


@command("attention")
@model_options(required=True)
@click.option("--bench", required=True, help="Benchmark name.")
@data_option()
@limit_option(
    default=20, help="Items to trace (one forward pass with attentions per generated token)."
)
@click.option("--prompt-style", default=None, help="Override the card's prompt style.")
@max_new_tokens_option(default=128)
@click.option(
    "--min-items",
    type=click.IntRange(1, 10**8),
    default=1,
    show_default=True,
    help="Drop token indices fewer items reached.",
)
@click.option(
    "--out",
    type=click.Path(),
    default="attention.json",
    show_default=True,
    help="Output JSON file, or a run folder (writes RUN/attention.json).",
)
@no_progress_option()
def attention_command(
    model: ModelChoice,
    bench: str,
    data: str | None,
    limit: int,
    prompt_style: str | None,
    max_new_tokens: int,
    min_items: int,
    out: str,
    no_progress: bool,
) -> None:
    """Audio attention share per generated token, averaged over the first LIMIT items of a
    benchmark (Figure 6). Needs a transformers adapter (eager attention is used for tracing)."""
    result = attention(
        model.name,
        bench,
        data=data,
        limit=limit,
        prompt_style=prompt_style,
        max_new_tokens=max_new_tokens,
        min_items=min_items,
        out=out,
        **model.load_kwargs(),
        progress=not no_progress,
    )
    click.echo(
        f"{result['items']} items traced; mean audio share {result['overall_mean']}; "
        f"-> {result['path']}"
    )
