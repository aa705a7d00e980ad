"""A step's command, made from its declaration: RUN_DIR, one flag per option (``--name``, its
type and default), and the engine's own (--cache, --concurrency, --json, --no-progress)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from cafe.cli_options import (
    ITEMS,
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
    thinking_options,
)
from cafe.controls import CONTROLS, parse_controls
from cafe.errors import CafeError
from cafe.jsontext import strict_dumps
from cafe.steps.base import ENGINE_CONCURRENCY, JUDGE_CONCURRENCY, Flags, Step


def step_command(step: Step, help: str | None = None) -> click.Command:
    """`cafe NAME` of a step (a plugin's or cafe's own): RUN_DIR and its ``layout``, a flag per
    declared option and the shared flag groups (FLAGS) where it places them; without one, its
    options and, for a step that makes calls, the engine's --cache, --concurrency and
    --no-progress. It runs the step on the engine and prints its ``format`` (or --json)."""
    from cafe.steps import TABLE

    # a plugin's command keeps the engine's flags it has always had, calls or not
    builtin = any(e.command == step.name for e in TABLE)
    calls = bool(step.records or step.records_in_section) or not builtin
    layout = step.layout or (*(o.name for o in step.options),
                             *([Flags("engine")] if calls else []), Flags("json"),
                             *([Flags("progress")] if calls else []))  # fmt: skip
    by_name = {o.name: o for o in step.options}
    groups = [g for g in layout if isinstance(g, Flags)]

    def callback(run_dir: str, **given: Any) -> None:
        from cafe.steps.engine import run_step

        client: dict[str, Any] = {}  # the step's constructor's: how its calls are made
        run: dict[str, Any] = {"progress": False}  # the engine's
        for g in groups:
            FLAGS[g.group][1](g, run_dir, given, client, run)
        options = {o.name: o.value(given[o.cli or o.name]) for o in step.options}
        _refuse(step, options)
        as_json, ascii_json = run.pop("as_json", False), run.pop("ascii_json", True)
        try:
            res = run_step(type(step)(**client) if client else step, run_dir, **run, **options)
        except CafeError:
            raise  # its own line and exit code
        except (ValueError, FileNotFoundError, KeyError) as e:
            raise click.ClickException(str(e)) from None
        printer = PRINTS.get(step.name, Printer())
        if as_json:
            click.echo(strict_dumps(res.section, indent=2, ensure_ascii=ascii_json))
        elif client.get("dry_run"):  # the engine's dry report: calls, cache hits, cost
            from cafe.judge.batching import format_dry_run

            click.echo(format_dry_run(res.section))
        else:
            click.echo((printer.text or step.format)(res.section))
        if client.get("dry_run"):
            return  # nothing was sent: no costs, no failure
        for g in groups:
            FLAGS[g.group][2](g, run_dir, res.section, client)
        if printer.end is not None:
            printer.end(res.section)

    params = [FLAGS[x.group][0](x) if isinstance(x, Flags) else _flag(by_name[x]) for x in layout]
    with_params = compose(click.argument("run_dir", type=click.Path(exists=True, file_okay=False)),
                          *params)  # fmt: skip
    help_text = help or step.help or f"The {step.name} step over RUN_DIR."
    made = command(step.name, help=help_text)(with_params(callback))
    made.step = type(step)  # type: ignore[attr-defined]  # generated, not hand-written
    return made


def _refuse(step: Step, options: dict[str, Any]) -> None:
    """A value its flag cannot take, in click's usage line (exit 2) before anything runs."""
    import importlib

    flag = {o.name: o.flags or o.flag for o in step.options}
    for o in step.options:
        v = options[o.name]
        if o.names and v is not None:
            module, _, attr = o.names.partition(":")
            registry = getattr(importlib.import_module(module), attr)
            if v not in registry:
                raise click.UsageError(f"unknown {registry.kind} {v!r}; choose from "
                                       f"{', '.join(registry.names())}")  # fmt: skip
        if o.needs and v != o.default and not options[o.needs]:
            raise click.UsageError(f"{flag[o.name]} {v} needs {flag[o.needs]} NAME")


def _flag(o: Any) -> Any:
    """A declared option's click flag: its spelling, type, default and help."""
    name = o.cli or o.name
    shown = {"show_default": True} if o.show_default else {}
    text = o.help or None
    if o.switch is not None:
        return option(o.flags or o.flag, name, is_flag=True, help=text, **shown)
    if o.type is bool:
        return option(o.flags or f"{o.flag}/--no-{o.flag[2:]}", name, default=o.default,
                      help=text, **shown)  # fmt: skip
    kind: Any = o.type
    if o.bounds is not None:  # refused before anything runs, with the range in click's line
        ranged = click.FloatRange if o.type is float else click.IntRange
        kind = ranged(*o.bounds, min_open=o.open_min)
    elif isinstance(o.kind, tuple):
        kind = click.Choice(list(o.kind))
    elif o.kind is not None:  # a file the user names: it must be there
        kind = click.Path(exists=True, dir_okay=o.kind != "file")
    return option(o.flags or o.flag, name, type=kind, default=o.default, help=text,
                  required=o.required, **shown)  # fmt: skip


# the flag groups a step's layout places, declared once: (its click options, what the command
# takes from their values: the step's constructor's keywords and the engine's)
def _engine_flags(g: Flags) -> Any:
    return compose(
        option("--cache", default=None,
               help="Call cache file (default: $CAFE_CACHE/steps.sqlite)."),
        option("--concurrency", type=ITEMS, default=ENGINE_CONCURRENCY, show_default=True,
               help="Calls in flight."),
    )  # fmt: skip


def _engine_take(g: Flags, run_dir: str, given: dict[str, Any],
                 client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    run.update(cache=given.pop("cache"), concurrency=given.pop("concurrency"))


def _nothing_after(g: Flags, run_dir: str, section: dict[str, Any], client: dict[str, Any]) -> None:
    """What a group prints after the section: nothing."""


def _server_flags(g: Flags) -> Any:
    """--judge-endpoint (repeatable), --judge-concurrency, --judge-api-key-env, in the
    command's order (``kw["order"]``; one left out where it has none)."""
    n, kw = _server_names(g), g.kw
    made = {
        "endpoints": judge_endpoint_option(kw.get("endpoint_help", "Judge server base URL."),
                                           n["endpoints"], kw.get("endpoint_old", ())),
        "concurrency": judge_concurrency_option(
            kw.get("default", JUDGE_CONCURRENCY),
            kw.get("concurrency_help", "Judge calls in flight at once."),
            n["concurrency"], click.IntRange(1, kw.get("most", 10**8)),
            kw.get("concurrency_old", ())),
        "api_key_env": judge_api_key_env_option(n["api_key_env"]),
    }  # fmt: skip
    limit = option(
        "--limit", type=click.IntRange(1), default=None,
        help="Judge only the first N (item, run)s: try the judge on a few first (the section "
        "says it is partial; the same command without it goes on).",
    )  # fmt: skip
    return compose(*(made[k] for k in kw.get("order", ("endpoints", "concurrency"))), limit)


def _server_names(g: Flags) -> dict[str, str]:
    names = {"endpoints": "endpoints", "concurrency": "concurrency", "api_key_env": "api_key_env"}
    return {**names, **g.names}


def _server_take(g: Flags, run_dir: str, given: dict[str, Any],
                 client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    n = _server_names(g)
    client["endpoints"] = tuple(given.pop(n["endpoints"]))
    client["concurrency"] = run["concurrency"] = given.pop(n["concurrency"])
    run["limit"] = given.pop("limit")
    key = given.pop(n["api_key_env"], None)
    if key:  # not given: the client's own default variable
        _into(g, client, {"api_key_env": key})


def _cache_take(g: Flags, run_dir: str, given: dict[str, Any],
                client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    run["cache"] = given.pop("cache_path")  # the engine opens it; the judge caches its calls there


def _batch_take(g: Flags, run_dir: str, given: dict[str, Any],
                client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    batch = given.pop("batch")
    if not g.kw.get("plan"):  # the step makes its call plan from these (in RUN_DIR/batches/)
        client.update(batch.call_kwargs())
        return
    from cafe.caller import call_plan  # its judge's client takes the plan itself

    plan = client["calls"] = call_plan(run_dir, **batch.call_kwargs())
    client["concurrency"] = run["concurrency"] = plan.item_concurrency(client["concurrency"])


def _costs_after(g: Flags, run_dir: str, section: dict[str, Any], client: dict[str, Any]) -> None:
    """The batch counts, spend, server trouble and (unless ``saving`` is False) the selective
    saving of the calls; a step given the call plan (``plan``) has its costs written here."""
    calls = section.get("calls", {})
    if "calls" in client:  # the plan of a judge's client: its ledger into the manifest
        from cafe.execution import write_costs
        from cafe.store import RunStore

        cost = write_costs(RunStore(run_dir), client["calls"], calls["cache_hits"])
        calls = {**calls, **({"cost": cost} if cost else {})}
    echo_costs(calls, section.get("selective") if g.kw.get("saving", True) else None)


def _json_take(g: Flags, run_dir: str, given: dict[str, Any],
               client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    run["as_json"] = given.pop("as_json")
    run["ascii_json"] = g.kw.get("ascii", True)


def _thinking_take(g: Flags, run_dir: str, given: dict[str, Any],
                   client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    thinking, budget = given.pop("thinking"), given.pop("thinking_budget")
    if thinking:  # the judge's client's (``into``: the constructor's dict of them)
        _into(g, client, {"thinking": True, "thinking_budget": budget})


def _dry_run_take(g: Flags, run_dir: str, given: dict[str, Any],
                  client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    client["dry_run"] = given.pop("dry_run")


def _into(g: Flags, client: dict[str, Any], values: dict[str, Any]) -> None:
    """Client keywords as the step's constructor takes them: as they are, or gathered in its
    dict ``kw["into"]`` (the CAFE judge's judge_options)."""
    if "into" in g.kw:
        client[g.kw["into"]] = {**client.get(g.kw["into"], {}), **values}
    else:
        client.update(values)


def _progress_take(g: Flags, run_dir: str, given: dict[str, Any],
                   client: dict[str, Any], run: dict[str, Any]) -> None:  # fmt: skip
    run["progress"] = not given.pop("no_progress")


#: each group: (its click options, what the command takes from their values, what it prints
#: after the section)
FLAGS: dict[str, tuple[Any, Any, Any]] = {
    "engine": (_engine_flags, _engine_take, _nothing_after),
    "judge_server": (_server_flags, _server_take, _nothing_after),
    "cache": (lambda g: cache_option(g.kw.get("default_file")), _cache_take, _nothing_after),
    "batch": (lambda g: batch_click_options, _batch_take, _costs_after),
    "json": (
        lambda g: json_option(g.kw.get("help", "Print the section as JSON.")),
        _json_take,
        _nothing_after,
    ),
    "thinking": (
        lambda g: thinking_options(g.kw["help"], g.kw.get("budget_help")),
        _thinking_take,
        _nothing_after,
    ),
    "dry_run": (
        lambda g: option(
            "--dry-run",
            is_flag=True,
            help="Print calls, cache hits and estimated cost (direct and batch); send nothing.",
        ),
        _dry_run_take,
        _nothing_after,
    ),
    "progress": (lambda g: no_progress_option(), _progress_take, _nothing_after),
}


def _judged_accuracy(sec: dict[str, Any]) -> str:
    t = sec["total"]
    # over no item with an answer there is no figure (acc None), never 0.00
    shown = "absent (no item with an answer)" if t["acc"] is None else f"{t['acc']:.2f}"
    return (f"{sec['label']}\n  total {shown} ({t['correct']}/{t['total']}); "
            f"verdicts {sec['verdicts']}")  # fmt: skip


def _official(sec: dict[str, Any]) -> str:
    from cafe.benchmarks.official import format_official

    return format_official(sec)


def _rubric_end(sec: dict[str, Any]) -> None:
    failed = sec["status"].get("failed", 0)
    if failed:  # a score left absent must not look like success
        raise click.ClickException(
            f"{failed} of {sec['total']} items could not be rated (judge calls failed; "
            f"reasons in {sec['file']}): the score is absent; run the same command again "
            "to retry them"
        )


@dataclass(frozen=True)
class Printer:
    """What a generated command prints beyond the step's ``format`` hook: ``text`` in its
    place, ``end`` last (raising for a step that failed)."""

    text: Callable[[dict[str, Any]], str] | None = None
    end: Callable[[dict[str, Any]], None] | None = None


#: the steps whose ``format`` hook does not say it all yet (move each into its step once
#: cafe/steps/judged.py and rubric.py are free to edit)
PRINTS: dict[str, Printer] = {
    "rubric": Printer(end=_rubric_end),
    "judge-accuracy": Printer(_judged_accuracy),
    "judge-official": Printer(_official),
}


DECAY_HELP = """Perception decay of RUN_DIR: per reasoning-length bin the count, mean length,
reasoning accuracy and Acc_per, with Pearson r and p across bins. Uses the run's judgements (run
`cafe judge RUN_DIR` first for Acc_per) and writes the "decay" section of metrics.json."""


def _decay_command() -> click.Command:
    from cafe.steps.decay import DecayStep

    return step_command(DecayStep(), help=DECAY_HELP)


decay_command = _decay_command()  # made from DecayStep's declared options


CUES_HELP = """Cue recall of RUN_DIR (MMAR v2): the share of each item's ground-truth audio
cues that the model's reasoning mentions, by a documented offline matcher and optionally by the
CAFE judge, plus how the cues agree with the CAFE judge's required events (after `cafe judge`).

\b
cafe cues runs/x
cafe cues runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
    --judge-endpoint http://localhost:8000/v1
"""


JUDGE_ACCURACY_HELP = """Judged accuracy of RUN_DIR (the paper's † figures): an LLM names the option
each output chose; the benchmark's rule scores it. Written to metrics.json "judged_accuracy",
beside the official headline; tables print it in the † rows' place."""


def _judge_accuracy_command() -> click.Command:
    from cafe.steps.judged import JudgedAccuracyStep

    return step_command(JudgedAccuracyStep(), help=JUDGE_ACCURACY_HELP)


judge_accuracy_command = _judge_accuracy_command()  # made from JudgedAccuracyStep's options


JUDGE_OFFICIAL_HELP = """The official LLM-judged figure of RUN_DIR, for a benchmark whose official
rule is an LLM judge (SAKURA): written to metrics.json "official" as its headline, beside the
labelled deterministic figures; every judge reply in RUN_DIR/official_judgements.jsonl."""


def _judge_official_command() -> click.Command:
    from cafe.steps.judged import OfficialStep

    return step_command(OfficialStep(), help=JUDGE_OFFICIAL_HELP)


judge_official_command = _judge_official_command()  # made from OfficialStep's options


JUDGE_HELP = """Judge every prediction in RUN_DIR and write Acc_per, Err_per, Err_use and Err_omit
(micro by default) into its metrics.json, with judgements in judgements.<judge>.jsonl.

Resumable and cached: re-running skips what is judged and replays cached judge replies.

\b
cafe judge runs/x --judge rule
cafe judge runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
    --judge-endpoint http://localhost:8000/v1 --captions mmar_captions.jsonl
"""


def _judge_command() -> click.Command:
    from cafe.steps.cafe_judge import CafeJudgeStep

    return step_command(CafeJudgeStep(), help=JUDGE_HELP)


judge_command = _judge_command()  # made from CafeJudgeStep's declared options and layout


def _cues_command() -> click.Command:
    from cafe.steps.cues import CuesStep

    return step_command(CuesStep(), help=CUES_HELP)


cues_command = _cues_command()  # made from CuesStep's declared options and layout


RUBRIC_HELP = """Score RUN_DIR's MMAR predictions against each item's rubric, to the MMAR
authors' protocol: only correct answers are rated, RATERS judge calls per item, trimmed mean;
results by modality, category and sub-category go into metrics.json "rubric".

\b
cafe rubric runs/qwen2.5-omni-7b-mmar-v2                       # gpt-4o-2024-11-20, 5 raters
cafe rubric runs/x --judge openai-compatible --judge-model Qwen/Qwen3-32B \\
    --judge-endpoint http://localhost:8000/v1
"""


def _rubric_command() -> click.Command:
    from cafe.steps.rubric import RubricStep

    return step_command(RubricStep(), help=RUBRIC_HELP)


rubric_command = _rubric_command()  # made from RubricStep's declared options and layout


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
    from cafe.metrics.listening import format_listening
    from cafe.steps.listening import run_controls
    from cafe.steps.variants import rerun_options
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
