"""`cafe report`: the paper's tables from leaderboard.yaml (plus any run folders), figures from
run folders, a full report/ for a run, and deltas of a run against a leaderboard row."""

from __future__ import annotations

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
