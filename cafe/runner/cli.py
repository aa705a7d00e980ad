"""`cafe run`: parse options, call ``run()``, print the summary. Errors from the library come
back as exceptions and leave here as one line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from cafe.cli_options import (
    IN_FLIGHT,
    RUNS,
    SEED,
    ModelChoice,
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
from cafe.cluster.cli import engine_options
from cafe.errors import CafeError
from cafe.runner.spec import DEFAULT_BENCH, DEFAULT_MODEL, RunRequest


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
@engine_options
def run_command(model: ModelChoice, bench: str, **flags: Any) -> None:
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
    from cafe.controls import parse_controls

    try:
        control_names = parse_controls(flags.pop("controls"))
    except ValueError as e:
        raise click.UsageError(f"--controls: {e}") from None
    control_seed = flags.pop("control_seed")
    permute = None  # cafe.robustness: the orderings run after the run, like controls
    k, mode, pseed = (flags.pop(f) for f in ("permute_choices", "permute_mode", "permute_seed"))
    if k:
        permute = {"k": k, "mode": mode, "seed": pseed}
    request = run_request(model, flags)
    benches = [b.strip() for b in bench.split(",") if b.strip()]
    if len(benches) > 1 and (request.data or request.version):
        raise click.UsageError(
            "--data and --version name one benchmark's file and release: with several in "
            "--bench, each uses its own default (run one benchmark at a time to pass them)"
        )
    if len(benches) == 1:
        _run_one(replace(request, bench=benches[0]), control_names, control_seed, permute)
        return
    # several benchmarks in one command (the lmms-eval habit): a folder each, one summary
    done: list[tuple[str, Any]] = []
    failed: list[str] = []
    for b in benches:
        click.echo(f"== {b} ==")
        where = str(Path(request.out) / b) if request.out else None
        try:
            done.append((b, _run_one(replace(request, bench=b, out=where), control_names,
                                     control_seed, permute)))  # fmt: skip
        except (click.ClickException, CafeError) as e:  # this one failed; the next still runs
            msg = e.format_message() if isinstance(e, click.ClickException) else str(e)
            click.echo(f"error: {b}: {msg}", err=True)
            failed.append(b)
    click.echo(several_summary(done))
    if failed:
        raise click.ClickException(f"{', '.join(failed)} failed (reasons above); the others stand")


def run_request(model: ModelChoice, flags: dict[str, Any]) -> RunRequest:
    """The RunRequest `cafe run`'s flags ask for (the benchmark filled in per benchmark); the
    flags whose names differ from its fields are translated here, the rest pass as they are."""
    judge_options = judge_server_kwargs(
        *(flags.pop(k) for k in ("judge_model", "judge_endpoints", "judge_concurrency",
                                 "judge_api_key_env", "captions"))
    )  # fmt: skip
    return RunRequest(
        model=model.name,
        checkpoint=model.checkpoint,
        options={**model.adapter_options(), **flags.pop("engine")},  # placement: not identity
        cards=list(model.cards),
        version=flags.pop("bench_version"),
        cache=not flags.pop("no_cache"),
        progress=not flags.pop("no_progress"),
        judge_options=judge_options,
        **flags,
    )


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
    request: RunRequest, control_names: list[str], control_seed: int,
    permute: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """One benchmark: the run, its summary, its controls; ClickException when it failed."""
    from cafe.clients.ratelimit import format_call_stats
    from cafe.reports.summary import summary_table
    from cafe.runner.main import run

    result = run(request)
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
        from cafe.metrics.listening import format_listening
        from cafe.steps.listening import run_controls

        section = run_controls(
            result.run_dir, control_names, control_seed=control_seed,
            run_options=request.pick(RunRequest.SPEC_INPUTS), judge=request.judge,
            judge_options=dict(request.judge_options or {}),
            **request.pick(RunRequest.EXECUTION),
        )  # fmt: skip
        click.echo(format_listening(section))
    if permute and "accuracy" in result.metrics:
        from cafe.robustness.orderings import format_choices
        from cafe.robustness.steps import run_orderings

        section = run_orderings(
            result.run_dir, permute["k"], mode=permute["mode"], seed=permute["seed"],
            run_options=request.pick(RunRequest.SPEC_INPUTS),
            **request.pick(RunRequest.EXECUTION),
        )  # fmt: skip
        click.echo(format_choices(section))
        from cafe.robustness.order_free import order_free_line

        if line := order_free_line(result.run_dir):  # a perfect score that is no finding
            click.echo(line)
    if result.judge_failed:
        raise click.ClickException(
            "the model run is complete, but its CAFE judge failed (reason above)"
        )
    return result
