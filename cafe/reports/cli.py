"""`cafe report`: the paper's tables from leaderboard.yaml (plus any run folders), figures from
run folders, a full report/ for a run, and deltas of a run against a leaderboard row; `cafe
compare` and `cafe explain`: two run folders' numbers tested against each other, and a gap
between two figures taken apart step by step (cafe.reports.compare, cafe.reports.explain)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cafe.cli_options import command, format_option, group
from cafe.reports import paper
from cafe.reports.leaderboard import (
    GROUP_ORDER,
    Leaderboard,
    _fmt_metrics,
    _fmt_source,
    add_run,
    load_leaderboard,
)
from cafe.reports.paper import FIGURES, TABLES
from cafe.reports.tables import FORMATS
from cafe.store import RunStore

RUN_DIR = click.Path(exists=True, file_okay=False)


def leaderboard_option(dest: str, help: str = "Leaderboard file."):
    """--leaderboard FILE: one flag for every command that reads or writes the leaderboard."""
    return click.option("--leaderboard", dest, type=click.Path(dir_okay=False), help=help)


@command("report")
@click.argument("run_dirs", nargs=-1, type=RUN_DIR)
@click.option(
    "--table",
    type=click.Choice(TABLES),
    help="Print a paper table: 1 CAFE on MMAR, 2 MMAU (original) + MMAR, "
    "3 MMAU v05.15.25, 4 accuracy 3B vs 7B, 5 CAFE 3B vs 7B. RUN_DIRs join it.",
)
@format_option(FORMATS, "md", "Table file type: Markdown, LaTeX (booktabs) or CSV.")
@click.option(
    "--figure",
    type=click.Choice(FIGURES),
    help="Draw a figure: 1 the paper's RL vs RL† numbers (leaderboard.yaml, no RUN_DIR; "
    "written to --out or ./figures); from RUN_DIRs: 3 decay panels (one per run), 5 base vs "
    "trained (two runs), 6 attention ratio, 7 reasoning length by task group.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Output folder (default: stdout for tables, RUN_DIR/report otherwise).",
)
@leaderboard_option(
    "leaderboard_path",
    "Leaderboard file (default $CAFE_LEADERBOARD, ./leaderboard.yaml, "
    "then the paper's rows shipped with cafe).",
)
@click.option(
    "--group",
    type=click.Choice(GROUP_ORDER),
    help="Table group for run rows (default: the model card's, else Ours).",
)
@click.option("--no-figures", is_flag=True, help="Run reports: tables and summary only (fast).")
@click.option(
    "--compare",
    "compare_dir",
    type=RUN_DIR,
    help="Run folder to compare against a leaderboard row (needs --against).",
)
@click.option(
    "--against",
    help='Leaderboard model to compare with, e.g. "Qwen2.5-Omni-7B" (default: the paper\'s row '
    "for the run's model).",
)
@click.option(
    "--html/--no-html",
    default=None,
    help="Write report/index.html, one self-contained page (default: on). With two RUN_DIRs, "
    "--html adds a comparison of RUN_B against RUN_A to RUN_A's page.",
)
@click.option(
    "--embed-audio",
    "embed_audio",
    type=click.FloatRange(0, 86_400),
    help="Embed clips up to this many seconds in index.html (default: relative links).",
)
def report_command(
    run_dirs: tuple[str, ...],
    table: str | None,
    fmt: str,
    figure: str | None,
    out: str | None,
    leaderboard_path: str | None,
    group: str | None,
    no_figures: bool,
    compare_dir: str | None,
    against: str | None,
    html: bool | None,
    embed_audio: float | None,
) -> None:
    """Regenerate the paper's tables and figures, and write run reports.

    \b
    cafe report --table 1 --format csv        Table 1 from leaderboard.yaml
    cafe report RUN_DIR --table 2 --format tex  Table 2 with your run beside the paper's rows
    cafe report RUN_DIR                       RUN_DIR/report/: summary.md, index.html, tables/,
                                              figures/
    cafe report RUN_A RUN_B --html            RUN_A's index.html compares B against A
    cafe report runs/                         one table over the run folders inside runs/
    cafe report BASE TRAINED --figure 5       base vs trained decay
    cafe report --compare RUN_DIR --against "Qwen2.5-Omni-7B"
    cafe report --compare RUN_DIR              the paper's row for the run's model
    """
    if against and not compare_dir:
        raise click.UsageError(
            "--against MODEL and --compare RUN_DIR go together (--compare alone takes the "
            "paper's row for the run's model)"
        )
    if compare_dir:
        from cafe.reports.run_report import compare

        board = load_leaderboard(leaderboard_path)
        click.echo(compare(compare_dir, against, board), nl=False)
        return
    if table:
        _paper_table(table, run_dirs, fmt, out, leaderboard_path, group)
        return
    if figure == "1":  # the paper's own numbers: no run folder needed
        for p in paper.figure(figure, run_dirs, Path(out or "figures"), leaderboard_path):
            click.echo(f"wrote {p}")
        return
    if not run_dirs:
        raise click.UsageError("give RUN_DIR(s), --table N or --compare RUN_DIR [--against MODEL]")
    if len(run_dirs) == 1 and not RunStore(run_dirs[0]).has_manifest():
        from cafe.reports.folder import folder_table, run_folders

        if run_folders(run_dirs[0]):  # a folder of runs: one table over them
            click.echo(folder_table(run_dirs[0], fmt), nl=False)
            return
    if figure:
        target = Path(out) if out else Path(run_dirs[0]) / "report" / "figures"
        if not out:
            from cafe.safe_files import refuse_links_out

            refuse_links_out(Path(run_dirs[0]), target.parent)
        for p in paper.figure(figure, run_dirs, target, leaderboard_path):
            click.echo(f"wrote {p}")
        return
    if out and len(run_dirs) > 1:
        raise click.UsageError("--out takes one RUN_DIR (each run gets its own report/)")
    if html is True and len(run_dirs) > 2:
        raise click.UsageError("--html compares two RUN_DIRs (RUN_A RUN_B); give one or two")
    _run_reports(run_dirs, load_leaderboard(leaderboard_path), group, out, not no_figures, html,
                 embed_audio)  # fmt: skip


def _paper_table(
    table: str, run_dirs: tuple[str, ...], fmt: str, out: str | None,
    leaderboard_path: str | None, group: str | None,
) -> None:  # fmt: skip
    """`cafe report --table N`: to stdout, or OUT/tableN.FMT."""
    text = paper.table(table, run_dirs, fmt, leaderboard_path, group)
    if not out:
        click.echo(text, nl=False)
        return
    path = Path(out) / f"table{table}.{fmt}"
    from cafe.redaction import scrub_text
    from cafe.safe_files import write_file

    write_file(path, scrub_text(text))
    click.echo(f"wrote {path}")


def _run_reports(
    run_dirs: tuple[str, ...], board: Leaderboard, group: str | None, out: str | None, draw: bool,
    html: bool | None, embed_audio: float | None,
) -> None:  # fmt: skip
    """report/ of each run folder; with --html and two of them, the first page compares."""
    from cafe.reports.run_report import write_run_report

    pair = html is True and len(run_dirs) == 2
    for i, d in enumerate(run_dirs):
        folder = write_run_report(
            d,
            board,
            group=group,
            out=out,
            draw=draw,
            html=html is not False,
            compare_with=run_dirs[1] if pair and i == 0 else None,
            embed_audio_s=embed_audio,
        )
        click.echo(f"wrote {folder / 'summary.md'}")
        if html is not False:
            click.echo(f"wrote {folder / 'index.html'}")


@group("leaderboard")
def leaderboard_command() -> None:
    """Show leaderboard.yaml, add a run folder's row to it, or write it as one HTML page.

    The file is --leaderboard FILE, else $CAFE_LEADERBOARD, else ./leaderboard.yaml, else the
    paper's rows shipped with the package."""


@leaderboard_command.command("show")
@click.option("--bench", help="Only rows of this benchmark (mmar, mmau, synth, ...).")
@click.option("--version", "version", help="Only rows of this benchmark version.")
@leaderboard_option("path")
def show_command(bench: str | None, version: str | None, path: str | None) -> None:
    """List rows: index, model, group, benchmark/version, metrics, source."""
    board = load_leaderboard(path)
    rows = board.select(benchmark=bench, version=version)
    click.echo(f"# {board.path} ({len(rows)} of {len(board.rows)} rows)")
    for r in rows:
        marks = "".join(r.markers)
        click.echo(
            f"{r.index:3d}  {r.display + marks:<34} {r.group:<10} {r.benchmark}/{r.version:<12} "
            f"{_fmt_metrics(r.metrics)}  [{_fmt_source(r.source)}; {r.date}]"
        )


@leaderboard_command.command("add")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--group", type=click.Choice(GROUP_ORDER), help="Table group (default: the card's).")
@click.option("--name", help="Model name to print (default: the manifest's model name).")
@leaderboard_option(
    "path",
    "Your file to append to (default $CAFE_LEADERBOARD, else ./leaderboard.yaml; created "
    "from the paper's rows on first use; never the package's own).",
)
def add_command(run_dir: str, group: str | None, name: str | None, path: str | None) -> None:
    """Append RUN_DIR's row (metrics.json numbers, run path, manifest sha256, date)."""
    row, target = add_run(run_dir, group=group, name=name, path=path)
    click.echo(
        f"added {row.model} ({row.group}, {row.benchmark}/{row.version}) to {target}: "
        f"{_fmt_metrics(row.metrics)}"
    )
    from cafe.reports.protocol import paper_row_for
    from cafe.reports.run_report import compare

    board = load_leaderboard(target)
    if paper_row_for(board, row.model, row.benchmark, row.version) is not None:
        click.echo(compare(run_dir, None, board), nl=False)  # the gap to the paper, explained


@leaderboard_command.command("html")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default="leaderboard.html",
    show_default=True,
    help="Page to write.",
)
@leaderboard_option("path")
def html_command(out: str, path: str | None) -> None:
    """Write one self-contained page: Tables 1-5 and every row, sortable, with provenance."""
    from cafe.reports.leaderboard_html import write_leaderboard_html

    click.echo(f"wrote {write_leaderboard_html(load_leaderboard(path), out)}")


@leaderboard_command.command("verify")
@leaderboard_option("path")
def verify_command(path: str | None) -> None:
    """Recompute every row added from a run from its folder: verified, changed (which figure,
    by how much, or which input) or folder missing; exits 1 when a row changed. Paper rows are
    published figures. The outcome is kept in FILE.verified.json for `leaderboard html`."""
    from cafe.reports.verify import verify

    verdicts = verify(path)
    for v in verdicts:
        if v.status != "published":
            click.echo(v.line)
    paper = sum(v.status == "published" for v in verdicts)
    click.echo(f"{paper} paper row(s): published figures, not recomputable")
    if any(v.status == "changed" for v in verdicts):
        raise SystemExit(1)


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
@leaderboard_option("leaderboard")
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
