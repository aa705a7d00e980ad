"""The command-line layer of cafe.adapters: `cafe adapters list|show` and `cafe doctor` (the
library functions return values; these print them)."""

from __future__ import annotations

import click

from cafe.adapters import list_models, show_model
from cafe.cli_options import (
    ModelChoice,
    command,
    data_option,
    group,
    limit_option,
    max_new_tokens_option,
    model_options,
)
from cafe.runner.doctor import doctor


@group("adapters")
def adapters_command() -> None:
    """List model adapters and model cards, or show one."""


@adapters_command.command("list")
@click.option("--cards", multiple=True, type=click.Path(exists=True), help="Extra cards YAML.")
def list_command(cards: tuple[str, ...]) -> None:
    """Every model card (name, engine, group, checkpoint, prompt style), then registered
    adapters that no card uses (run them with --model ADAPTER)."""
    header = ("name", "adapter", "engine", "group", "prompt style", "decoding", "checkpoint")
    rows = [header, *(tuple(r.values()) for r in list_models(cards))]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    for r in rows:
        click.echo("  ".join(f"{v!s:{w}}" for v, w in zip(r, widths, strict=True)).rstrip())


@adapters_command.command("show")
@click.argument("name")
@click.option("--cards", multiple=True, type=click.Path(exists=True), help="Extra cards YAML.")
def show_command(name: str, cards: tuple[str, ...]) -> None:
    """One model card (or an adapter's default card) as YAML, with its prompt template hash."""
    import yaml

    data = show_model(name, cards)
    click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())


@command("doctor")
@model_options(required=True)
@click.option("--bench", default="synth", show_default=True, help="Benchmark to take items from.")
@data_option()
@limit_option(default=3, help="How many items to send.", old=("--n",))
@max_new_tokens_option(default=64)
@click.option(
    "--strict", is_flag=True, help="Exit with status 1 when the audio seems not to be heard."
)
def doctor_command(
    model: ModelChoice,
    bench: str,
    data: str | None,
    limit: int,
    max_new_tokens: int,
    strict: bool,
) -> None:
    """Check that MODEL hears its audio: each item is sent with its real clip and with silence
    of the same length; unchanged outputs (and, for transformers models, unchanged first-token
    logits) mean the audio is being dropped. A served model: --model CARD --endpoint URL."""
    report = doctor(
        model.name,
        bench,
        data=data,
        limit=limit,
        max_new_tokens=max_new_tokens,
        **model.load_kwargs(),
    )
    for line in report.lines():
        click.echo(line)
    if strict and not report.ok:
        raise SystemExit(1)
