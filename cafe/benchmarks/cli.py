"""The command-line layer of the benchmarks: `cafe score`, `cafe export` and `cafe bench`
(list, synth, spoken). The library functions score, export and generate and return values or
raise cafe.errors exceptions; these commands print them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from cafe.benchmarks.export import export
from cafe.benchmarks.scoring import format_table, score_file
from cafe.benchmarks.set_version import MAX_N, MAX_SEED
from cafe.benchmarks.spoken import DEFAULT_N as SPOKEN_N
from cafe.benchmarks.spoken import DEFAULT_SEED as SPOKEN_SEED
from cafe.benchmarks.spoken.generator import generate as generate_spoken
from cafe.benchmarks.synth import DEFAULT_N, DEFAULT_SEED
from cafe.benchmarks.synth.generator import generate
from cafe.cli_options import command, data_option, group, no_progress_option, option
from cafe.errors import CafeError, CafeUsageError
from cafe.jsontext import strict_dumps


@command("score")
@click.option(
    "--bench",
    type=str,
    required=True,
    help="Benchmark whose rule, breakdowns and prediction keys apply (mmau, mmar, or any "
    "registered one).",
)
@data_option(
    required=True,
    type=click.Path(exists=True),
    help="Official metadata (JSON/JSONL file, folder holding it, or local HF copy).",
    old=("--meta",),
)
@click.option(
    "--predictions",
    required=True,
    type=click.Path(exists=True),
    help="Predictions in the official format: JSON list or JSONL of objects with the item's id "
    "(`id`; AIR-Bench `uniq_id`) and the prediction under model_output (MMAU), answer_prediction "
    "/ model_prediction (MMAR) or response (MMSU, AIR-Bench); MMAU-Pro's test.parquet with "
    "`model_output`; SAKURA's results JSON (one per track x hop, or a folder of them; the "
    "judge's judgements files too).",
)
@click.option("--key", default=None, help="Read the prediction from this key instead.")
@click.option("--version", default=None, help="Force the metadata version name.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def score_command(
    bench: str, data: str, predictions: str, key: str | None, version: str | None, as_json: bool
) -> None:
    """Score a predictions file with its benchmark's official rule.

    Predictions are matched to the metadata by id (a file whose ids match no item is an error).
    Items without a prediction count as wrong in `total` (and are counted under `unanswered`);
    `official_denominator` leaves them out, which is the figure the MMAU / MMAR scripts print.
    A benchmark whose official figure is another (MMSU, AIR-Bench, SAKURA, MMAU-Pro) prints it
    under the table, with its labelled variants."""
    section, problems = score_file(bench, data, predictions, key, version)
    # a benchmark scored by its own evaluators, not against answers (VoiceBench), says so
    own = (section.get("official") or {}).get("needs_no_answers")
    if section["total"]["total"] == 0 and section["unscorable"] and not own:
        raise CafeError(
            f"{section['bench']['source']}: the metadata has no answers "
            f"({section['bench']['name']} {section['bench']['version']}); it cannot be scored "
            "locally: submit the predictions to the benchmark's leaderboard"
        )
    for p in problems:
        click.echo(f"warning: {p}", err=True)
    chosen = section["bench"].get("chosen_by")
    if chosen:
        fit = "; ".join(
            f"{v}: {f['unknown_ids']} unknown ids, {f['different_answers']} different answers"
            for v, f in chosen["fit"].items()
        )
        click.echo(
            f"note: scored against {section['bench']['name']} {section['bench']['version']}, "
            f"the release the predictions match ({fit}); --version chooses another",
            err=True,
        )
    if section.get("non_string_predictions"):
        click.echo(
            f"warning: {section['non_string_predictions']} null or non-string prediction(s) "
            "counted unanswered (each named above)",
            err=True,
        )
    if as_json:
        click.echo(strict_dumps(section, ensure_ascii=False))
    else:
        b = section["bench"]
        click.echo(f"{b['name']} {b['version']} ({b['source']})")
        click.echo(format_table(section))
        if section.get("official"):
            from cafe.benchmarks.official import format_official

            click.echo("\n" + format_official(section["official"]))


@command("export")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@option(
    "--bench",
    default=None,
    help="Benchmark whose official script to feed (default: the run's benchmark).",
    old=("--format",),
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Output file: .jsonl writes JSON lines, anything else a JSON list.",
)
@click.option(
    "--run-index",
    default=0,
    show_default=True,
    type=click.IntRange(0, 999),
    help="Which sampled run to export.",
)
@click.option(
    "--field",
    type=click.Choice(["answer", "choice", "raw"]),
    default=None,
    help="answer: the model's answer text (what the headline scores; the default); choice: the "
    "answer mapped to a choice (the lenient figure); raw: the whole model output (the default of "
    "SAKURA and MMAU-Pro, whose official scripts read the whole response).",
)
@click.option(
    "--skip-unanswered",
    is_flag=True,
    help="Leave the prediction key out for unanswered items (the official scripts then skip "
    "them) instead of an empty prediction (counted wrong).",
)
def export_command(
    run_dir: str,
    bench: str | None,
    out: str,
    run_index: int,
    field: str | None,
    skip_unanswered: bool,
) -> None:
    """Export RUN_DIR's predictions as its benchmark's official evaluation script's input."""
    counts = export(run_dir, out, bench, run_index, field, skip_unanswered)
    click.echo(
        f"wrote {counts['items']} items to {out} ({counts['answered']} answered, "
        f"{counts['unanswered']} unanswered)"
    )


def set_command(
    bench: str,
    make: Callable[..., Path],
    default_n: int,
    default_seed: int,
    doc: str,
    *,
    n_type: click.ParamType | None = None,
    seed_type: click.ParamType | None = None,
    old: tuple[str, ...] = (),
) -> click.Command:
    """`cafe bench <bench> --out DIR --limit N --seed S`: ``make(out, n=, seed=, progress=)``
    writes the set; ``doc`` is the command's help."""

    def write(out: str, n: int, seed: int, no_progress: bool) -> None:
        if n < 1:
            raise CafeUsageError("--limit must be at least 1")
        path = make(out, n=n, seed=seed, progress=not no_progress)
        click.echo(f"wrote {n} items to {path}")

    write.__doc__ = doc
    write = no_progress_option()(write)
    write = click.option(
        "--seed", default=default_seed, show_default=True, help="Generator seed.", type=seed_type
    )(write)
    write = option("--limit", "n", default=default_n, show_default=True,
                   help="Number of items.", old=old, type=n_type)(write)  # fmt: skip
    write = click.option(
        "--out",
        "out",
        required=True,
        type=click.Path(file_okay=False),
        help=f"Folder to write {bench}.jsonl, {bench}-info.json and audio/*.wav into.",
    )(write)
    return command(bench)(write)


@group("bench")
def bench_command() -> None:
    """List benchmarks (`cafe bench list`) or generate one (`cafe bench synth --out DIR`)."""


synth_command = set_command(
    "synth",
    generate,
    DEFAULT_N,
    DEFAULT_SEED,
    """Write N synthetic multiple-choice audio questions (counting, pitch, rhythm, temporal
    order, timbre; easy/medium/hard) with 16 kHz WAVs, captions and ground-truth events. The
    same seed always gives byte-identical files.""",
    n_type=click.IntRange(max=MAX_N),
    seed_type=click.IntRange(0, MAX_SEED),
    old=("--n",),
)
bench_command.add_command(synth_command)


@bench_command.command("list")
def list_command() -> None:
    """Every registered benchmark: name, versions with their items, licence, and the scoring
    rule it declares (``Benchmark.official_rule``)."""
    from cafe.benchmarks import BENCHMARKS

    rows = [("name", "versions (items)", "licence", "scoring (the benchmark's own rule)")]
    broken = []
    for name in BENCHMARKS.names():
        try:  # one broken plugin is one line; the rest are listed
            cls = BENCHMARKS.get(name)
            versions = ", ".join(
                f"{v} ({'any' if n is None else n})" for v, n in cls.version_items.items()
            )
            rows.append((name, versions or "-", str(cls.licence), str(cls.official_rule)))
        except (CafeError, AttributeError, TypeError, ValueError) as e:
            rows.append((name, "-", "-", "cannot be loaded (below)"))
            broken.append(str(e) if isinstance(e, CafeError) else f"benchmark {name!r}: {e}")
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        click.echo("  ".join(f"{c:<{w}}" for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    for line in broken:
        click.echo(f"warning: {line}", err=True)


spoken_command = set_command(
    "spoken",
    generate_spoken,
    SPOKEN_N,
    SPOKEN_SEED,
    """Write N spoken multiple-choice questions (who, how many, what, where, which day) with
    sentences spoken by espeak-ng, captions and ground-truth facts. Needs espeak-ng; the same
    seed and espeak-ng version give byte-identical files.""",
    n_type=click.IntRange(max=MAX_N),
    seed_type=click.IntRange(0, MAX_SEED),
)
bench_command.add_command(spoken_command)
