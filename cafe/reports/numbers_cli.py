"""`cafe compare` and `cafe explain`: two run folders' numbers tested against each other, and a
gap between two figures taken apart step by step (cafe.reports.compare, cafe.reports.explain)."""

from __future__ import annotations

import json

import click

from cafe.cli_options import command

RUN_DIR = click.Path(exists=True, file_okay=False)


def _seed_options(f):  # type: ignore[no-untyped-def]
    f = click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of the bootstrap's item resampling.")(f)  # fmt: skip
    return click.option("--resamples", type=click.IntRange(100, 100_000), default=2000,
                        show_default=True, help="Bootstrap resamples.")(f)  # fmt: skip


@command("compare")
@click.argument("run_a", type=RUN_DIR)
@click.argument("run_b", type=RUN_DIR)
@click.argument("more", nargs=-1, type=RUN_DIR, metavar="[RUN_C]...")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--fail-if-worse",
    "points",
    type=click.FloatRange(0),
    metavar="POINTS",
    help="Exit 1 when a later run's accuracy is below RUN_A's by more than POINTS with its "
    "95% interval entirely below zero (a CI gate).",
)
@_seed_options
def compare_command(
    run_a: str, run_b: str, more: tuple[str, ...], as_json: bool, points: float | None,
    seed: int, resamples: int,
) -> None:  # fmt: skip
    """Is RUN_B (and RUN_C …) really better than RUN_A? Paired over the (item, run) units both
    hold: accuracy difference with a bootstrap interval over items, McNemar's exact test (one
    run) or Wilcoxon over items (several runs), each breakdown cell (Holm-corrected), and CAFE,
    listening gap and decay r where both runs have them.

    \b
    cafe compare runs/base runs/trained
    cafe compare runs/base runs/trained --json > compare.json
    cafe compare runs/base runs/candidate --fail-if-worse 1.0   # CI: exit 1 on a regression
    """
    from cafe.reports.compare import compare, format_compare, regressions

    result = compare(run_a, run_b, *more, resamples=resamples, seed=seed)
    click.echo(json.dumps(result, indent=2) if as_json else format_compare(result), nl=not as_json)
    if points is not None:
        bad = regressions(result, points)
        for c in bad:
            h = c["headline"]
            click.echo(f"worse: {c['b']} is {h['diff']:+.2f} points against {c['a']} "
                       f"(interval [{h['ci95'][0]:+.2f}, {h['ci95'][1]:+.2f}]), beyond "
                       f"--fail-if-worse {points}", err=True)  # fmt: skip
        if bad:
            raise SystemExit(1)


@command("explain")
@click.argument("run_dir", type=RUN_DIR)
@click.option(
    "--against",
    required=True,
    help="A run folder, or a leaderboard row: #N (its index in `cafe leaderboard show`) or a "
    "model name (that model's row of RUN's benchmark).",
)
@click.option(
    "--protocol",
    help="RUN's figure, if not its headline: key=value,… of rule=official|lenient, "
    "failed=counted|dropped, denominator=every|answered, runs=pooled|mean, n_runs=N.",
)
@click.option("--against-protocol", help="The other figure's settings, as --protocol.")
@click.option("--leaderboard", type=click.Path(dir_okay=False), help="Leaderboard file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Folder for explain.json, explain.md and the waterfall figure (default "
    "RUN_DIR/report/explain).",
)
@click.option("--no-figure", is_flag=True, help="Table and JSON only.")
@_seed_options
def explain_command(
    run_dir: str, against: str, protocol: str | None, against_protocol: str | None,
    leaderboard: str | None, as_json: bool, out: str | None, no_figure: bool, seed: int,
    resamples: int,
) -> None:  # fmt: skip
    """Why RUN's accuracy differs from another figure: the gap taken apart into the protocol
    differences cafe can replay, in a fixed order (items in common, benchmark version, failed
    items, denominator, scoring rule, runs aggregation, then what remains: the model's
    outputs), each with its paired interval; the steps add up to the gap.

    \b
    cafe explain runs/mine --against runs/theirs
    cafe explain runs/mine --against "Qwen2.5-Omni-7B"    the leaderboard's row (row only)
    cafe explain runs/mine --against runs/theirs --against-protocol denominator=answered
    """
    from cafe.reports.explain import explain, format_explain, write_explain

    result = explain(run_dir, against, protocol=protocol, against_protocol=against_protocol,
                     leaderboard=leaderboard, resamples=resamples, seed=seed)  # fmt: skip
    click.echo(json.dumps(result, indent=2) if as_json else format_explain(result), nl=not as_json)
    for p in write_explain(result, out, figure=not no_figure):
        click.echo(f"wrote {p}", err=as_json)
