"""The paper's tables and figures as functions (what `cafe report --table N / --figure N` runs):
tables from leaderboard.yaml plus any run folders, figures from run folders."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cafe.errors import CafeUsageError

TABLES = ("1", "2", "3", "4", "5")
FIGURES = ("1", "3", "5", "6", "7")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")


def table(
    number: int | str,
    run_dirs: Sequence[str | Path] = (),
    fmt: str = "md",
    leaderboard: str | Path | None = None,
    group: str | None = None,
) -> str:
    """Paper table ``number`` (1-5) as Markdown, LaTeX ("tex") or CSV text, with a row for each
    run folder beside the leaderboard's rows."""
    from cafe.reports.leaderboard import load_leaderboard
    from cafe.reports.run_report import RunData, run_row
    from cafe.reports.tables import render_table

    if str(number) not in TABLES:
        raise CafeUsageError(f"table {number!r}: the paper has tables {', '.join(TABLES)}")
    board = load_leaderboard(leaderboard)
    extra = [run_row(RunData.load(d), group) for d in run_dirs]
    return render_table(int(number), board, fmt, extra=extra)


def figure(
    number: int | str,
    run_dirs: Sequence[str | Path],
    out: str | Path,
    leaderboard: str | Path | None = None,
) -> list[Path]:
    """Draw paper figure ``number`` into ``out`` -> the files written. 1: the paper's RL vs RL†
    numbers from leaderboard.yaml (no run needed); from run folders: 3 decay panels (one per
    run); 5 base vs trained (two runs); 6 attention ratio; 7 reasoning length by task group
    (one figure per run)."""
    from cafe.reports import figures
    from cafe.reports.run_report import RunData

    number = str(number)
    if number not in FIGURES:
        raise CafeUsageError(f"figure {number!r}: cafe draws figures {', '.join(FIGURES)}")
    out = Path(out)
    if number == "1":
        from cafe.reports.leaderboard import load_leaderboard

        board = load_leaderboard(leaderboard)
        if "1" not in board.figures:
            raise CafeUsageError(f"{board.path}: no figures.1 block (the paper's Figure 1)")
        return figures.figure1(board.figures["1"], out)
    runs = [RunData.load(d) for d in run_dirs]
    if number == "3":
        return figures.figure3([(r.model, r.section("decay")) for r in runs], out)
    if number == "5":
        if len(runs) != 2:
            raise CafeUsageError("--figure 5 takes two run folders: BASE_RUN TRAINED_RUN")
        return figures.figure5(
            (runs[0].model, runs[0].section("decay")),
            (runs[1].model, runs[1].section("decay")),
            out,
        )
    if number == "6":
        return figures.figure6([(r.model, r.attention()) for r in runs], out)
    paths: list[Path] = []
    for r in runs:  # Figure 7: one figure per run (its own task groups)
        lengths = figures.reasoning_length_by_group(r.samples(), r.predictions())
        stem = "figure7_reasoning_length" + (f"_{_slug(r.model)}" if len(runs) > 1 else "")
        counter = r.manifest.get("token_counter")
        paths += figures.figure7(f"{r.model} ({r.bench[0]})", lengths, out, stem, counter)
    return paths
