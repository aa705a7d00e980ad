"""The command-line layer of the benchmarks: `cafe bench list` and `cafe bench synth` (the
library generates and lists; these print)."""

from __future__ import annotations

import click

from cafe.benchmarks.synth import DEFAULT_N, DEFAULT_SEED, generate
from cafe.cli_options import group, option
from cafe.errors import CafeUsageError


@group("bench")
def bench_command() -> None:
    """List benchmarks (`cafe bench list`) or generate one (`cafe bench synth --out DIR`)."""


@bench_command.command("synth")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write synth.jsonl, synth-info.json and audio/*.wav into.",
)
@option("--limit", "n", default=DEFAULT_N, show_default=True, help="Number of items.", old=("--n",))
@click.option("--seed", default=DEFAULT_SEED, show_default=True, help="Generator seed.")
def synth_command(out: str, n: int, seed: int) -> None:
    """Write N synthetic multiple-choice audio questions (counting, pitch, rhythm, temporal
    order, timbre; easy/medium/hard) with 16 kHz WAVs, captions and ground-truth events. The
    same seed always gives byte-identical files."""
    if n < 1:
        raise CafeUsageError("--limit must be at least 1")
    path = generate(out, n=n, seed=seed, progress=True)
    click.echo(f"wrote {n} items to {path}")


@bench_command.command("list")
def list_command() -> None:
    """Every registered benchmark: name, versions with their items, scoring rule, licence."""
    from cafe.benchmarks import BENCHMARKS

    rows = [("name", "versions (items)", "scoring", "licence")]
    for name in BENCHMARKS.names():
        cls = BENCHMARKS.get(name)
        versions = ", ".join(
            f"{v} ({'any' if n is None else n})" for v, n in cls.version_items.items()
        )
        rows.append((name, versions or "-", cls.scoring, cls.licence))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        click.echo("  ".join(f"{c:<{w}}" for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
