"""`cafe necessity` and `cafe sweep` (and `cafe run --permute-choices`, in cafe.runner.cli):
parse options, call cafe.robustness.steps, print the section. docs/robustness.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cafe.cli_options import (
    ModelChoice,
    command,
    data_option,
    limit_option,
    model_options,
    no_progress_option,
    option,
)
from cafe.errors import CafeError
from cafe.runner.spec import DEFAULT_BENCH, DEFAULT_MODEL


@command("necessity")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@option(
    "--captions",
    type=click.Path(exists=True, dir_okay=False),
    help="Captions for caption-only (a `cafe caption` file, named in the identity) [the "
    "benchmark's reference captions].",
)
@option(
    "--export",
    type=click.Path(dir_okay=False),
    help="Write the ids of the items with --label, one a line (`cafe run --ids FILE` reads it).",
)
@option(
    "--label",
    "labels",
    multiple=True,
    default=("needs the audio",),
    show_default=True,
    help="Label(s) --export keeps: needs the audio, recoverable from a caption, answerable "
    "from text, never right.",
)
@model_options(required=False)
@no_progress_option()
def necessity_command(
    run_dir: str, captions: str | None, export: str | None, labels: tuple[str, ...],
    model: ModelChoice, no_progress: bool,
) -> None:  # fmt: skip
    """Label every item of a finished run by whether answering it needs the audio.

    Runs (or reuses) caption-only, text-only and silence on the run's items, each its own
    folder RUN_DIR-ctl-NAME, and writes metrics.json "necessity": the label per item (needs the
    audio / recoverable from a caption / answerable from text / never right) and the accuracy on
    the items that need the audio with its 95% interval.

    \b
    The model is the run's; what its folder does not keep about reaching it is given as to
    `cafe run`: --endpoint (a served model), --api-key-env, --cards (a model of your own
    cards), --checkpoint, -o (--model, if given, must be the run's).

    \b
    cafe necessity runs/RUN --export needs-audio.txt
    cafe necessity runs/RUN --endpoint http://127.0.0.1:8000/v1
    cafe run --bench synth --ids needs-audio.txt     the benchmark filtered to those items"""
    from cafe.robustness.necessity import format_necessity, item_list
    from cafe.robustness.steps import run_necessity

    try:
        section = run_necessity(run_dir, captions=captions, progress=not no_progress,
                                model_call=_model_call(run_dir, model))  # fmt: skip
        text = item_list(section, labels) if export else None
    except (CafeError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(format_necessity(section))
    if export:
        from cafe.safe_files import write_file

        try:
            write_file(export, text or "")
        except CafeError as e:
            raise click.ClickException(str(e)) from None
        n = len((text or "").splitlines())
        click.echo(f"wrote {export}: {n} ids ({', '.join(labels)})")


def _model_call(run_dir: str, model: ModelChoice) -> dict[str, Any]:
    """The model-call options of `cafe run` for the run's own model (--model: only the run's)."""
    if model.name is not None:
        from cafe.store import RunStore

        ran = (RunStore(run_dir).read_manifest().get("spec") or {}).get("model")
        if model.name != ran:
            raise click.UsageError(
                f"--model {model.name}: {run_dir} is a run of {ran}; necessity reruns the "
                "run's own model (leave --model out)"
            )
    return model.load_kwargs()


@command("sweep")
@model_options(required=False, default=DEFAULT_MODEL)
@option("--bench", default=DEFAULT_BENCH, show_default=True, help="Benchmark name.")
@data_option()
@option("--version", "bench_version", help="Benchmark version (default: detected).")
@limit_option()
@option(
    "--budgets",
    required=True,
    help="Reasoning budgets in tokens, comma-separated (e.g. 0,256,1024,4096).",
)
@option(
    "--out",
    type=click.Path(file_okay=False),
    help="Sweep folder: OUT/budget-N per budget, OUT/sweep.json|md|png [runs/sweep-MODEL-BENCH].",
)
@option("--judge", help="CAFE judge of each run (the benchmark's default; none: skip).")
@option(
    "--leaderboard",
    "leaderboard_path",
    type=click.Path(dir_okay=False),
    help="Also add a row per budget (MODEL @ budget N) to this leaderboard file "
    "(`cafe leaderboard add`; `cafe leaderboard show` lists them).",
)
@no_progress_option()
def sweep_command(
    model: ModelChoice, bench: str, data: str | None, bench_version: str | None,
    limit: int | None, budgets: str,
    out: str | None, judge: str | None, leaderboard_path: str | None, no_progress: bool,
) -> None:  # fmt: skip
    """Run one model at several reasoning budgets: accuracy and CAFE perception against budget.

    Each budget is its own run folder (OUT/budget-N) with the budget in its identity: local
    models by budget forcing (reasoning cut at N tokens, then the answer forced), API models by
    the provider's thinking budget. Then OUT/sweep.json, sweep.md and the figure sweep.png.

    \b
    cafe sweep --budgets 0,8,16,64                    the reference listener on synth
    cafe sweep --model whisper-tiny-smollm2 --bench spoken --budgets 0,32,128 \\
        -o answer_by=generate"""
    from cafe.robustness.budgets import format_sweep, parse_budgets
    from cafe.robustness.steps import run_sweep

    try:
        points = parse_budgets(budgets)
    except ValueError as e:
        raise click.UsageError(f"--budgets: {e}") from None
    where = out or str(Path("runs") / f"sweep-{model.name}-{bench}")
    kwargs: dict[str, Any] = {
        "data": data, "version": bench_version, "limit": limit, "judge": judge,
        "checkpoint": model.checkpoint, "progress": not no_progress,
    }  # fmt: skip
    try:
        section = run_sweep(model.name, bench, points, out=where,
                            options=model.adapter_options(), cards=list(model.cards),
                            **kwargs)  # fmt: skip
    except (CafeError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(format_sweep(section))
    click.echo(f"wrote {where}/sweep.json, sweep.md, " + ", ".join(section["figure"]))
    if leaderboard_path:
        from cafe.reports.leaderboard import add_run

        for row in section["rows"]:
            _, path = add_run(row["run_dir"], name=f"{section['model']} @ budget {row['budget']}",
                              path=leaderboard_path)  # fmt: skip
        click.echo(f"added {len(section['rows'])} rows (one per budget) to {path}")
