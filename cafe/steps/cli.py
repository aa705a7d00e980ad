"""A step's command, made from its declaration: RUN_DIR, one flag per option (``--name``, its
type and default), and the engine's own (--cache, --concurrency, --json, --no-progress)."""

from __future__ import annotations

from typing import Any

import click

from cafe.cli_options import (
    COUNT,
    ITEMS,
    BatchChoice,
    batch_click_options,
    cache_option,
    command,
    compose,
    concurrency_option,
    echo_costs,
    json_option,
    judge_api_key_env_option,
    judge_concurrency_option,
    judge_endpoint_option,
    judge_server_kwargs,
    judge_server_options,
    no_progress_option,
    option,
    template_option,
)
from cafe.controls import CONTROLS, parse_controls
from cafe.jsontext import strict_dumps
from cafe.judge.rubric import PAPER_JUDGE, RATERS, RETRIES, SEED, TEMPERATURE, TRIM
from cafe.steps.base import Step


def step_command(step: Step, help: str | None = None) -> click.Command:
    """`cafe NAME` of a step (a plugin's or cafe's own): RUN_DIR, a flag per declared option,
    and, for a step that makes calls, the engine's --cache, --concurrency and --no-progress."""
    from cafe.steps import TABLE

    # a plugin's command keeps the engine's flags it has always had, calls or not
    builtin = any(e.command == step.name for e in TABLE)
    calls = bool(step.records or step.records_in_section) or not builtin

    def callback(run_dir: str, as_json: bool, cache: str | None = None, concurrency: int = 8,
                 no_progress: bool = True, **given: Any) -> None:  # fmt: skip
        from cafe.steps.engine import run_step

        options = {o.name: o.value(given[o.cli or o.name]) for o in step.options}
        res = run_step(step, run_dir, cache=cache, concurrency=concurrency,
                       progress=not no_progress, **options)  # fmt: skip
        click.echo(strict_dumps(res.section, indent=2) if as_json else step.format(res.section))

    engine = [
        option(
            "--cache", default=None, help="Call cache file (default: $CAFE_CACHE/steps.sqlite)."
        ),
        option("--concurrency", type=ITEMS, default=8, show_default=True, help="Calls in flight."),
    ]  # fmt: skip
    with_params = compose(
        click.argument("run_dir", type=click.Path(exists=True, file_okay=False)),
        *(_flag(o) for o in step.options),
        *(engine if calls else []),
        json_option(),
        *([no_progress_option()] if calls else []),
    )
    help_text = help or step.help or f"The {step.name} step over RUN_DIR."
    return command(step.name, help=help_text)(with_params(callback))


def _flag(o: Any) -> Any:
    """A declared option's click flag: its spelling, type, default and help."""
    name = o.cli or o.name
    shown = {"show_default": True} if o.show_default else {}
    if o.switch is not None:
        return option(o.flags or o.flag, name, is_flag=True, help=o.help, **shown)
    if o.type is bool:
        return option(o.flags or f"{o.flag}/--no-{o.flag[2:]}", name, default=o.default,
                      help=o.help, **shown)  # fmt: skip
    kind: Any = o.type
    if o.bounds is not None:  # refused before anything runs, with the range in click's line
        ranged = click.FloatRange if o.type is float else click.IntRange
        kind = ranged(*o.bounds, min_open=o.open_min)
    return option(o.flags or o.flag, name, type=kind, default=o.default, help=o.help,
                  **shown)  # fmt: skip


DECAY_HELP = """Perception decay of RUN_DIR: per reasoning-length bin the count, mean length,
reasoning accuracy and Acc_per, with Pearson r and p across bins. Uses the run's judgements (run
`cafe judge RUN_DIR` first for Acc_per) and writes the "decay" section of metrics.json."""


def _decay_command() -> click.Command:
    from cafe.steps.decay import DecayStep

    return step_command(DecayStep(), help=DECAY_HELP)


decay_command = _decay_command()  # made from DecayStep's declared options


@command("cues")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--judge",
    type=click.Choice(["openai", "gemini", "openai-compatible"]),
    help="Also ask this CAFE judge (cue list as required events); offline matcher only without.",
)
@click.option("--judge-model", help="Judge model name.")
@judge_endpoint_option("Judge server URL (repeatable).", "endpoints")
@judge_concurrency_option(16, None, bound=ITEMS)
@judge_api_key_env_option("api_key_env")
@click.option(
    "--captions", type=click.Path(exists=True, dir_okay=False), help="Captions file (optional)."
)
@template_option("Own template.")
@cache_option()
@json_option()
@no_progress_option()
def cues_command(
    run_dir: str,
    judge: str | None,
    judge_model: str | None,
    endpoints: tuple[str, ...],
    judge_concurrency: int,
    api_key_env: str | None,
    captions: str | None,
    template: str | None,
    cache_path: str | None,
    as_json: bool,
    no_progress: bool,
) -> None:
    """Cue recall of RUN_DIR (MMAR v2): the share of each item's ground-truth audio cues that the
    model's reasoning mentions, by a documented offline matcher and optionally by the CAFE judge,
    plus how the cues agree with the CAFE judge's required events (after `cafe judge`).

    \b
    cafe cues runs/x
    cafe cues runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """
    if judge and not judge_model:
        raise click.UsageError(f"--judge {judge} needs --judge-model NAME")
    from cafe.steps.cues import cues_run

    try:
        section = cues_run(
            run_dir, judge, judge_model, endpoints, judge_concurrency, template=template,
            captions=captions, cache=cache_path, progress=not no_progress,
            **({"api_key_env": api_key_env} if api_key_env else {}),
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    from cafe.judge.cues import format_cues

    click.echo(strict_dumps(section, indent=2) if as_json else format_cues(section))


@command("rubric")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--judge",
    default="openai",
    show_default=True,
    type=click.Choice(["openai", "gemini", "openai-compatible"]),
    help="Chat protocol of the judge (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
)
@click.option(
    "--judge-model", default=PAPER_JUDGE, show_default=True, help="Judge model (the authors')."
)
@judge_endpoint_option("Judge server base URL (repeatable).", "endpoints")
@judge_concurrency_option(16, "Judge calls in flight at once.", bound=ITEMS)
@judge_api_key_env_option("api_key_env")
@click.option("--raters", type=ITEMS, default=RATERS, show_default=True)
@click.option(
    "--trim",
    type=COUNT,
    default=TRIM,
    show_default=True,
    help="Drop this many lowest and highest rater scores before averaging.",
)
@click.option("--temperature", type=click.FloatRange(0, 10), default=TEMPERATURE, show_default=True)
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=SEED, show_default=True)
@click.option(
    "--retries",
    type=COUNT,
    default=RETRIES,
    show_default=True,
    help="Extra attempts per rater after an invalid reply.",
)
@template_option("Your own rubric template (same '----- part -----' layout as the packaged one).")
@cache_option()
@batch_click_options
@json_option()
@no_progress_option()
def rubric_command(
    run_dir: str,
    judge: str,
    judge_model: str,
    endpoints: tuple[str, ...],
    judge_concurrency: int,
    api_key_env: str | None,
    raters: int,
    trim: int,
    temperature: float,
    seed: int,
    retries: int,
    template: str | None,
    cache_path: str | None,
    as_json: bool,
    no_progress: bool,
    batch: BatchChoice,
) -> None:
    """Score RUN_DIR's MMAR predictions against each item's rubric, to the MMAR authors'
    protocol: only correct answers are rated, RATERS judge calls per item, trimmed mean; results
    by modality, category and sub-category go into metrics.json "rubric".

    \b
    cafe rubric runs/qwen2.5-omni-7b-mmar-v2                       # gpt-4o-2024-11-20, 5 raters
    cafe rubric runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
        --judge-endpoint http://localhost:8000/v1
    """
    from cafe.execution import write_costs
    from cafe.judge.batching import call_plan
    from cafe.metrics.rubric import format_rubric
    from cafe.steps.rubric import rubric_run
    from cafe.store import RunStore

    # the batch transport and cost ledger (cafe.judge.batching): state in RUN_DIR/batches/
    plan = call_plan(run_dir, **batch.call_kwargs())
    try:
        section = rubric_run(
            run_dir, judge, judge_model, endpoints, plan.item_concurrency(judge_concurrency),
            raters=raters, trim=trim, temperature=temperature, seed=seed, retries=retries,
            template=template, cache=cache_path, progress=not no_progress, calls=plan,
            **({"api_key_env": api_key_env} if api_key_env else {}),
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    cost = write_costs(RunStore(run_dir), plan, section["calls"]["cache_hits"])
    click.echo(strict_dumps(section, indent=2) if as_json else format_rubric(section))
    echo_costs({**section["calls"], **({"cost": cost} if cost else {})})
    failed = section["status"].get("failed", 0)
    if failed:  # a score left absent must not look like success
        raise click.ClickException(
            f"{failed} of {section['total']} items could not be rated (judge calls failed; "
            f"reasons in {section['file']}): the score is absent; run the same command again "
            "to retry them"
        )


@command("listen")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@option(
    "--controls",
    default="all",
    show_default=True,
    help=f"Comma-separated controls: {', '.join(CONTROLS)} (or all).",
)
@option("--control-seed", default=0, show_default=True, help="Seed of noise and shuffling.")
@option("--judge", help="CAFE judge on the controls (default: the real run's judge; none: skip).")
@judge_server_options()
@option("--captions", type=click.Path(exists=True), help="The real run's captions file.")
@option(
    "--endpoint",
    "endpoints",
    multiple=True,
    help="Model server base URL for served models (repeat to shard the work).",
)
@option("--cards", multiple=True, type=click.Path(exists=True), help="Extra model cards YAML.")
@concurrency_option(help="generate() calls in flight [adapter default].")
@option(
    "--batch-size",
    type=click.IntRange(1, 100_000),
    help="Requests per generate() call [adapter default].",
)
@option("--no-cache", is_flag=True, help="Neither read nor write the model call cache.")
@no_progress_option()
def listen_command(
    run_dir: str,
    controls: str,
    control_seed: int,
    judge: str | None,
    judge_model: str | None,
    judge_api_key_env: str | None,
    judge_endpoints: tuple[str, ...],
    judge_concurrency: int | None,
    captions: str | None,
    endpoints: tuple[str, ...],
    cards: tuple[str, ...],
    concurrency: int | None,
    batch_size: int | None,
    no_cache: bool,
    no_progress: bool,
) -> None:
    """Is RUN_DIR's model listening? Run the same model and spec with the audio replaced by
    silence of the same length, noise at the clip's level, another item's clip (seeded
    derangement) and no audio, each in its own run folder RUN_DIR-ctl-CONTROL; write the
    listening gap (real minus control accuracy, paired bootstrap 95% interval over items) into
    RUN_DIR/metrics.json and print it.

    \b
    cafe listen runs/qwen2.5-omni-7b-mmar-v2
    cafe listen runs/reference-synth-v2-n200-seed0 --controls silence,shuffled
    """
    from cafe.listen import rerun_options, run_controls
    from cafe.metrics.listening import format_listening
    from cafe.store import RunStore

    try:
        names = parse_controls(controls)
        manifest = RunStore(run_dir).read_manifest()
        opts = rerun_options(manifest)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    if endpoints:
        opts["options"] = {**opts["options"], "endpoints": list(endpoints)}
    jopts = judge_server_kwargs(
        judge_model, judge_endpoints, judge_concurrency, judge_api_key_env, captions
    )
    if judge is None and manifest.get("judge"):  # the real run's judge (keys: environment)
        recorded = dict(manifest["judge"])
        judge = recorded.pop("name", None)
        jopts = {**recorded, **jopts}
    section = run_controls(
        run_dir, names, control_seed=control_seed, run_options=opts, judge=judge,
        judge_options=jopts, concurrency=concurrency, batch_size=batch_size,
        cards=list(cards) or None, cache=not no_cache, progress=not no_progress,
    )  # fmt: skip
    click.echo(format_listening(section))
