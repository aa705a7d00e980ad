"""A step's command, made from its declaration: RUN_DIR, one flag per option (``--name``, its
type and default), and the engine's own (--cache, --concurrency, --json, --no-progress)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pkgutil import resolve_name
from typing import Any

import click

from cafe.cli_options import (
    IN_FLIGHT,
    ITEMS,
    batch_click_options,
    cache_option,
    cards_option,
    command,
    compose,
    concurrency_option,
    echo_costs,
    endpoint_option,
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
from cafe.commands import TABLE as COMMANDS
from cafe.errors import CafeError
from cafe.jsontext import strict_dumps
from cafe.steps import GROUP_CALLS, STEPS
from cafe.steps.base import ENGINE_CONCURRENCY, JUDGE_CONCURRENCY, Flags, Step


@dataclass(frozen=True)
class StepEntry:
    command: str  # `cafe COMMAND`
    api: str  # cafe.api.API
    target: str  # "module:function" cafe.api calls (a registered step: "module:StepClass")
    click: str  # "module:click_command"
    section: str | None  # the metrics.json section it writes (None: a file of its own)
    engine: bool  # runs on cafe.steps.engine


#: cafe's own post-run commands: the rows of the one table (cafe.commands.TABLE) that are steps
TABLE: tuple[StepEntry, ...] = tuple(
    StepEntry(c.name, c.step, c.api.get(c.step) or STEPS.builtins[c.name].target, c.click,
              c.section, c.engine)
    for c in COMMANDS
    if c.step
)  # fmt: skip


def step_command(step: Step) -> click.Command:
    """`cafe NAME` of a step (a plugin's or cafe's own): RUN_DIR and its ``layout`` (a flag per
    declared option, the shared flag groups, FLAGS, where it places them), --help its class's
    docstring. It runs the step on the engine (the groups' values: how its calls are made,
    cafe.steps.base.Calls) and prints its ``prints`` of the section (or --json)."""
    # no layout: its options and, for a step that makes calls, the engine's flags (a plugin's
    # command keeps the engine's flags it has always had, calls or not)
    calls = step.records is not None or step.name not in STEPS.builtins
    layout = step.layout or (*(o.name for o in step.options),
                             *([Flags("engine")] if calls else []), Flags("json"),
                             *([Flags("progress")] if calls else []))  # fmt: skip
    by_name = {o.name: o for o in step.options}
    groups = [g for g in layout if isinstance(g, Flags)]

    # each group's parameters, by the Calls keyword it sets (its ``names``: their spelling)
    takes = {k: g.names.get(k, p) for g in groups for k, p in GROUP_CALLS.get(g.group, {}).items()}
    ascii_json = all(g.kw.get("ascii", True) for g in groups)  # the json group's ``ascii``

    def callback(run_dir: str, **given: Any) -> None:
        from cafe.steps.engine import run_step

        how = {k: given[p] for k, p in takes.items() if p in given}  # cafe.steps.base.Calls
        if "batch" in how:  # the engine's call plan (in RUN_DIR/batches/)
            how.update(how["batch"].call_kwargs())
        how["progress"] = not how.get("progress", True)  # --no-progress's; no bar without it
        options = {o.name: o.value(given[o.cli or o.name]) for o in step.options}
        try:
            for g in groups:  # a group whose flags make values together (VALUES)
                options.update(VALUES[g.group](given) if g.group in VALUES else {})
            _refuse(step, options)
            res = run_step(type(step)(), run_dir, **how, **options)
        except CafeError:
            raise  # its own line and exit code
        except (ValueError, FileNotFoundError, KeyError) as e:
            raise click.ClickException(str(e)) from None
        if given.get("as_json"):
            click.echo(strict_dumps(res.section, indent=2, ensure_ascii=ascii_json))
        elif how.get("dry_run"):  # the engine's dry report: calls, cache hits, cost
            from cafe.clients.calls import format_dry_run

            click.echo(format_dry_run(res.section))
        elif step.prints:
            click.echo(step.prints(res.section))
        else:  # its status line
            st = res.section.get("outcome") or {}
            usable = f"({st.get('usable')} of {st.get('total')} usable)"
            click.echo(f"{step.name}: {st.get('status')} {usable}")
        if how.get("dry_run"):
            return  # nothing was sent: no costs, no failure
        for g in groups:  # a batch group: the batch counts, spend, server trouble and (unless
            # its ``saving`` is False) the selective saving of the calls; beside --json on
            # stderr, so that stdout stays one JSON document
            if g.group == "batch":
                saving = res.section.get("selective") if g.kw.get("saving", True) else None
                echo_costs(res.section.get("calls", {}), saving, err=bool(given.get("as_json")))

    params = [_flag(by_name[x]) if isinstance(x, str) else FLAGS[x.group](x) for x in layout]
    with_params = compose(click.argument("run_dir", type=click.Path(exists=True, file_okay=False)),
                          *params)  # fmt: skip
    help_text = vars(type(step)).get("__doc__") or step.help or f"The {step.name} step."
    made = command(step.name, help=help_text)(with_params(callback))
    made.step = type(step)  # type: ignore[attr-defined]  # generated, not hand-written
    return made


def _refuse(step: Step, options: dict[str, Any]) -> None:
    """A value its flag cannot take, in click's usage line (exit 2) before anything runs."""
    flag = {o.name: o.flags or o.flag for o in step.options}
    for o in step.options:
        v = options[o.name]
        if o.names and v is not None:
            registry = resolve_name(o.names)  # "module:REGISTRY"
            if v not in registry:
                raise click.UsageError(f"unknown {registry.kind} {v!r}; choose from "
                                       f"{', '.join(registry.names())}")  # fmt: skip
        if o.needs and v != o.default and not options[o.needs]:
            raise click.UsageError(f"{flag[o.name]} {v} needs {flag[o.needs]} NAME")


def _flag(o: Any) -> Any:
    name, shown = o.cli or o.name, {"help": o.help or None, "show_default": o.show_default}
    flag = o.flags or o.flag
    if o.switch is not None:
        return option(flag, name, is_flag=True, **shown)
    if o.type is bool:
        return option(o.flags or f"{o.flag}/--no-{o.flag[2:]}", name, default=o.default, **shown)
    kind: Any = str if o.type is object else o.type  # a list in Python: "a,b" here
    if o.bounds is not None:  # refused before anything runs, with the range in click's line
        ranged = click.FloatRange if o.type is float else click.IntRange
        kind = ranged(*o.bounds, min_open=o.open_min)
    elif isinstance(o.kind, tuple):
        kind = click.Choice(list(o.kind))
    elif o.kind is not None:  # a file the user names: it must be there
        kind = click.Path(exists=True, dir_okay=o.kind != "file")
    return option(flag, name, type=kind, default=o.default, required=o.required, **shown)


def _engine_flags(g: Flags) -> Any:
    return compose(
        option("--cache", default=None,
               help="Call cache file (default: $CAFE_CACHE/steps.sqlite)."),
        option("--concurrency", type=ITEMS, default=ENGINE_CONCURRENCY, show_default=True,
               help="Calls in flight."),
    )  # fmt: skip


def _server_flags(g: Flags) -> Any:
    """--judge-endpoint (repeatable), --judge-concurrency, --judge-api-key-env, in the
    command's order (``kw["order"]``; one left out where it has none)."""
    n, kw = {k: g.names.get(k, k) for k in ("endpoints", "concurrency", "api_key_env")}, g.kw
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


#: the flag groups a step's layout places, declared once: their click options (the Calls each
#: sets: cafe.steps.GROUP_CALLS)
FLAGS: dict[str, Callable[[Flags], Any]] = {
    "engine": _engine_flags,
    "judge_server": _server_flags,
    "cache": lambda g: cache_option(g.kw.get("default_file")),
    "batch": lambda g: batch_click_options,
    "json": lambda g: json_option(g.kw.get("help", "Print the section as JSON.")),
    "thinking": lambda g: thinking_options(g.kw["help"], g.kw.get("budget_help")),
    "dry_run": lambda g: option(
        "--dry-run",
        is_flag=True,
        help="Print calls, cache hits and estimated cost (direct and batch); send nothing.",
    ),
    "progress": lambda g: no_progress_option(),
    "run_judge": lambda g: compose(
        judge_server_options(),
        option("--captions", type=click.Path(exists=True), help="The real run's captions file."),
    ),
    "runs": lambda g: _run_flags(),
}


def _run_flags() -> Any:
    """How variant runs are made, as `cafe run` takes it: the model's server and cards, and
    the execution options (no prediction changes with them)."""
    return compose(
        endpoint_option(),
        cards_option(),
        concurrency_option(help="generate() calls in flight [adapter default]."),
        option(
            "--batch-size", type=IN_FLIGHT, help="Requests per generate() call [adapter default]."
        ),
        option("--no-cache", is_flag=True, help="Neither read nor write the model call cache."),
        no_progress_option(),
    )


def _variant_runs(given: dict[str, Any]) -> dict[str, Any]:
    """The runs group's flags as run_variants' keywords (the run's spec: its manifest)."""
    call = {"options": {"endpoints": list(given["endpoints"])}} if given["endpoints"] else None
    runs = {k: given[k] for k in ("concurrency", "batch_size")}
    runs.update(model_call=call, cards=list(given["cards"]) or None, cache=not given["no_cache"])
    return {"runs": {**runs, "progress": not given["no_progress"]}}


def _run_judge(given: dict[str, Any]) -> dict[str, Any]:
    keys = ("judge_model", "judge_endpoints", "judge_concurrency", "judge_api_key_env", "captions")
    return {"judge_options": judge_server_kwargs(*(given[k] for k in keys))}


#: the groups whose flags make an option or a Calls value together, {group: given -> keywords}
VALUES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "run_judge": _run_judge,
    "runs": _variant_runs,
}

#: ``judge_command``, ``decay_command``…: the commands of cafe's registered steps, under the
#: names cafe.commands.TABLE gives them, generated from their declarations
globals().update({c.click.partition(":")[2]: step_command(STEPS.step(c.name))
                  for c in COMMANDS if c.engine})  # fmt: skip
