"""`cafe run`: parse options, call ``run()``, print the summary. Errors from the library come
back as exceptions and leave here as one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cafe.cli_options import (
    IN_FLIGHT,
    RUNS,
    SEED,
    ModelChoice,
    adapter_options,
    command,
    concurrency_option,
    data_option,
    judge_server_kwargs,
    judge_server_options,
    limit_option,
    max_new_tokens_option,
    model_options,
    no_progress_option,
    option,
)
from cafe.errors import CafeError
from cafe.runner.spec import DEFAULT_BENCH, DEFAULT_MODEL


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """-o KEY=VALUE pairs; values are YAML scalars (numbers, booleans, lists)."""
    return adapter_options(pairs)


@command("run")
@model_options(required=False, default=DEFAULT_MODEL)
@option(
    "--bench",
    default=DEFAULT_BENCH,
    show_default=True,
    help="Benchmark name, or several comma-separated (a folder each); `cafe bench list`.",
)
@data_option()
@option("--version", "bench_version", help="Benchmark version (default: detected).")
@option("--runs", default=1, show_default=True, type=RUNS, help="Sampled generations per item.")
@limit_option()
@option("--batch-size", type=IN_FLIGHT, help="Requests per generate() call [adapter default].")
@concurrency_option(help="generate() calls in flight [adapter default].")
@option("--seed", default=0, show_default=True, type=SEED, help="Seed of run 0; run k: seed+k.")
@option(
    "--out",
    type=click.Path(),
    help="Run folder [runs/<model>[-<served model>]-<bench>-<version>[-<hash of other choices>]].",
)
@option("--prompt-style", help="Override the card's prompt style (`cafe adapters show`).")
@option(
    "--prompt-template",
    type=click.Path(exists=True, dir_okay=False),
    help="Template file ({question}, {choices}) replacing the style's text.",
)
@max_new_tokens_option(default=None, help="Token budget per answer [the card's].")
@option("--judge", help="CAFE judge after the run (the benchmark's default; none: skip).")
@judge_server_options()
@option(
    "--audio-root",
    type=click.Path(file_okay=False),
    help="Folder the metadata's audio paths are relative to and must stay inside [the metadata "
    "file's folder]; paths resolving outside it fail their item.",
)
@option(
    "--retry-failed",
    is_flag=True,
    help="Also retry items whose adapter raised (after fixing it); server failures are always "
    "retried, unreadable audio once its file changed.",
)
@option(
    "--captions",
    type=click.Path(exists=True),
    help="Ground-truth captions JSONL for an LLM judge (`cafe caption`); synth needs none.",
)
@option("--strict", is_flag=True, help="Stop with an error at the first bad input.")
@option("--no-cache", is_flag=True, help="Neither read nor write the model call cache.")
@option(
    "--controls",
    help="Listening controls after the run: silence, noise, shuffled, text-only (comma-"
    "separated, or all); each its own folder RUN_DIR-ctl-NAME, the gap in metrics.json.",
)
@option("--control-seed", default=0, show_default=True, type=SEED, help="Seed of noise, shuffling.")
@option(
    "--permute-choices",
    type=click.IntRange(min=2),
    help="Choice-order robustness after the run: K orderings of every multiple-choice item "
    "(the original is ordering 0; each other its own folder RUN_DIR-perm-MODEKofK); circular "
    'accuracy, consistency and positional bias in metrics.json "choices" (docs/robustness.md).',
)
@option(
    "--permute-mode",
    type=click.Choice(["rotate", "shuffle"]),
    default="rotate",
    show_default=True,
    help="rotate: cyclic rotations of the options; shuffle: seeded permutations per item.",
)
@option(
    "--ids",
    type=click.Path(exists=True, dir_okay=False),
    help="Run only the items listed in FILE, one id a line (`cafe necessity --export`); the "
    "list is part of the run's identity.",
)
@option(
    "--permute-seed", default=0, show_default=True, type=SEED, help="Seed of shuffle orderings."
)
@no_progress_option(old=("--quiet",))
def run_command(
    model: ModelChoice,
    bench: str,
    data: str | None,
    bench_version: str | None,
    runs: int,
    limit: int | None,
    batch_size: int | None,
    concurrency: int | None,
    seed: int,
    out: str | None,
    prompt_style: str | None,
    prompt_template: str | None,
    max_new_tokens: int | None,
    judge: str | None,
    judge_model: str | None,
    judge_endpoints: tuple[str, ...],
    judge_concurrency: int | None,
    judge_api_key_env: str | None,
    audio_root: str | None,
    retry_failed: bool,
    captions: str | None,
    strict: bool,
    no_cache: bool,
    controls: str | None,
    control_seed: int,
    permute_choices: int | None,
    permute_mode: str,
    permute_seed: int,
    ids: str | None,
    no_progress: bool,
) -> None:
    """Run a model on a benchmark into a resumable run folder.

    With no options: the reference listener on the synthetic benchmark (generated on first
    use), judged by the rule judge. Kill it at any time and run the same command again to
    finish; a finished run re-run makes no model call. A folder holding another run (another
    model, -o option, prompt, data…) is refused with the differing fields named: pass --out for
    a separate run. Results: manifest.json, predictions.jsonl, samples.jsonl, metrics.json (and
    judgements.jsonl after judging).

    \b
    Generation settings override the card's with -o KEY=VALUE, e.g.
      cafe run --model NAME -o temperature=0.7 -o top_p=0.95 -o do_sample=true \\
          --max-new-tokens 2048 --runs 3
    (keys: do_sample, temperature, top_p, top_k, min_p, repetition_penalty).
    Several benchmarks in one command: --bench synth,mmar (each in OUT/<bench> with --out,
    one summary table at the end)."""
    from cafe.runner.main import run

    judge_options = judge_server_kwargs(
        judge_model, judge_endpoints, judge_concurrency, judge_api_key_env, captions
    )
    from cafe.controls import parse_controls

    try:
        control_names = parse_controls(controls)
    except ValueError as e:
        raise click.UsageError(f"--controls: {e}") from None
    # what the real run is; its controls are the same with the audio replaced (cafe.listen)
    spec_options = {
        "checkpoint": model.checkpoint, "data": data, "version": bench_version, "runs": runs,
        "limit": limit, "seed": seed, "prompt_style": prompt_style,
        "prompt_template": prompt_template, "max_new_tokens": max_new_tokens,
        "options": model.adapter_options(),
        **({"ids": ids} if ids else {}),
    }  # fmt: skip
    execution = {
        "batch_size": batch_size, "concurrency": concurrency, "strict": strict,
        "progress": not no_progress, "cache": not no_cache, "cards": list(model.cards),
    }  # fmt: skip
    permute = None
    if permute_choices:  # cafe.robustness: the orderings run after the run, like controls
        permute = {"k": permute_choices, "mode": permute_mode, "seed": permute_seed}
    benches = [b.strip() for b in bench.split(",") if b.strip()]
    if len(benches) > 1 and (data or bench_version):
        raise click.UsageError(
            "--data and --version name one benchmark's file and release: with several in "
            "--bench, each uses its own default (run one benchmark at a time to pass them)"
        )
    if len(benches) == 1:
        _run_one(benches[0], out, run, spec_options, execution, judge, judge_options,
                 audio_root, retry_failed, control_names, control_seed, model.name,
                 permute=permute)  # fmt: skip
        return
    # several benchmarks in one command (the lmms-eval habit): a folder each, one summary
    done: list[tuple[str, Any]] = []
    failed: list[str] = []
    for b in benches:
        click.echo(f"== {b} ==")
        where = str(Path(out) / b) if out else None
        try:
            done.append((b, _run_one(b, where, run, spec_options, execution, judge,
                                     judge_options, audio_root, retry_failed, control_names,
                                     control_seed, model.name, permute=permute)))  # fmt: skip
        except (click.ClickException, CafeError) as e:  # this one failed; the next still runs
            msg = e.format_message() if isinstance(e, click.ClickException) else str(e)
            click.echo(f"error: {b}: {msg}", err=True)
            failed.append(b)
    click.echo(several_summary(done))
    if failed:
        raise click.ClickException(f"{', '.join(failed)} failed (reasons above); the others stand")


def several_summary(done: list[tuple[str, Any]]) -> str:
    """One table over the benchmarks of a `--bench a,b` run: accuracy, items, folder."""
    lines = ["benchmark  accuracy  correct/total  run folder"]
    for b, result in done:
        total = (result.metrics.get("accuracy") or {}).get("total") or {}
        acc = total.get("acc")
        shown = "–" if acc is None else f"{acc:.2f}"
        lines.append(f"{b:<9}  {shown:>8}  {total.get('correct')}/{total.get('total'):<11}  "
                     f"{result.run_dir}")  # fmt: skip
    return "\n".join(lines)


def _run_one(
    bench: str, out: str | None, run: Any, spec_options: dict[str, Any],
    execution: dict[str, Any], judge: str | None, judge_options: dict[str, Any],
    audio_root: str | None, retry_failed: bool, control_names: list[str], control_seed: int,
    model: str, permute: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """One benchmark: the run, its summary, its controls; ClickException when it failed."""
    from cafe.clients.ratelimit import format_call_stats
    from cafe.reports.summary import summary_table

    result = run(
        model, bench, **spec_options, out=out, judge=judge, judge_options=judge_options,
        audio_root=audio_root, retry_failed=retry_failed, **execution,
    )  # fmt: skip
    for note in result.notes:
        click.echo(note, err=True)
    click.echo(summary_table(result.metrics))
    if result.metrics.get("official"):  # the benchmark's official figure and its variants
        from cafe.benchmarks.official import format_official

        click.echo(format_official(result.metrics["official"]))
    state = "model loaded" if result.model_loaded else "nothing left to run, no model loaded"
    click.echo(f"{result.new_predictions} new predictions ({state}); run folder: {result.run_dir}")
    calls = format_call_stats(result.manifest.get("usage") or {})  # totals over the folder's runs
    if calls:
        click.echo(calls)
    for line in result.failure_lines:
        click.echo(line, err=True)
    if result.status == "failed":  # nothing usable: never "complete 0.00"
        n = result.manifest.get("counts", {}).get("predictions", 0)
        raise click.ClickException(
            f"the run produced nothing usable: all {n} items failed (reasons above); "
            f"{result.run_dir} is marked failed"
        )
    if result.most_failed:  # a run that produced (almost) nothing must not look like success
        raise click.ClickException(
            "most items failed (reasons above); the run folder keeps what succeeded"
        )
    if control_names and "accuracy" in result.metrics:
        from cafe.listen import run_controls
        from cafe.metrics.listening import format_listening

        section = run_controls(
            result.run_dir, control_names, control_seed=control_seed,
            run_options={"model": model, "bench": bench, **spec_options}, judge=judge,
            judge_options=judge_options, **execution,
        )  # fmt: skip
        click.echo(format_listening(section))
    if permute and "accuracy" in result.metrics:
        from cafe.robustness.orderings import format_choices
        from cafe.robustness.steps import run_orderings

        section = run_orderings(
            result.run_dir, permute["k"], mode=permute["mode"], seed=permute["seed"],
            run_options={"model": model, "bench": bench, **spec_options}, **execution,
        )  # fmt: skip
        click.echo(format_choices(section))
    if result.judge_failed:
        raise click.ClickException(
            "the model run is complete, but its CAFE judge failed (reason above)"
        )
    return result
