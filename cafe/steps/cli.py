"""A step's command, made from its declaration: RUN_DIR, one flag per option (``--name``, its
type and default), and the engine's own (--cache, --concurrency, --json, --no-progress)."""

from __future__ import annotations

import json
from typing import Any

import click

from cafe.cli_options import Command
from cafe.steps.base import Step


def step_command(step: Step) -> click.Command:
    def callback(run_dir: str, cache: str | None, concurrency: int, as_json: bool,
                 no_progress: bool, **options: Any) -> None:  # fmt: skip
        from cafe.steps.engine import run_step

        res = run_step(step, run_dir, cache=cache, concurrency=concurrency,
                       progress=not no_progress, **options)  # fmt: skip
        click.echo(json.dumps(res.section, indent=2) if as_json else step.format(res.section))

    params: list[click.Parameter] = [click.Argument(["run_dir"], type=click.Path(
        exists=True, file_okay=False))]  # fmt: skip
    for o in step.options:
        if o.type is bool:
            flags = [f"{o.flag}/--no-{o.flag[2:]}", o.name]
            params.append(click.Option(flags, default=o.default, show_default=True, help=o.help))
        else:
            params.append(click.Option([o.flag, o.name], type=o.type, default=o.default,
                                       show_default=True, help=o.help))  # fmt: skip
    params += [
        click.Option(
            ["--cache"], default=None, help="Call cache file (default: $CAFE_CACHE/steps.sqlite)."
        ),  # fmt: skip
        click.Option(
            ["--concurrency"],
            type=click.IntRange(min=1),
            default=8,
            show_default=True,
            help="Calls in flight.",
        ),  # fmt: skip
        click.Option(["--json", "as_json"], is_flag=True, help="Print the section as JSON."),
        click.Option(["--no-progress"], is_flag=True, help="No progress bar."),
    ]
    help_text = step.help or f"The {step.name} step over RUN_DIR."
    return Command(step.name, callback=callback, params=params, help=help_text)
