"""Every analysis after the run as a step (cafe.steps.base.Step) run by one engine
(cafe.steps.engine). Register your own with ``@STEPS.register("name")`` (or the ``cafe.steps``
entry-point group): `cafe NAME RUN_DIR`, ``cafe.api.step("name")`` (a function made from its
declaration) and ``cafe.api.run_step("name", RUN_DIR)`` find it, with its options as flags and
keywords (docs/extending.md, "A judging protocol").

cafe's own are registered below, one line each (``STEPS.builtin``): its command, cafe.api
function and cafe.commands.TABLE row are made from that line (``Builtin``) and its declaration."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from cafe.registry import Registry
from cafe.steps.base import Calls, Flags, Option, Step, StepRecord, View, concurrency_default


@dataclass(frozen=True)
class Builtin:
    """A registration of cafe's own step: what `cafe --help` and cafe.commands.TABLE need of it
    without importing its module (its command's long help: the class's docstring; its cafe.api
    function: ``name`` with underscores)."""

    name: str  # `cafe NAME`
    target: str  # "module:StepClass", imported on first use
    help: str  # its line in `cafe --help`
    section: str | None = None  # the metrics.json section it writes


class StepRegistry(Registry[Any]):
    """Steps are registered as classes and used as instances."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.builtins: dict[str, Builtin] = {}

    def step(self, name: str) -> Step:
        return self.get(name)()

    def builtin(self, name: str, target: str, help: str, section: str | None = None) -> None:
        """Register one of cafe's own steps in one line (``Builtin``)."""
        self.add_lazy(name, target)
        self.builtins[name] = Builtin(name, target, help, section)


STEPS: StepRegistry = StepRegistry("step", entry_point_group="cafe.steps", base=Step)
STEPS.builtin("judge", "cafe.steps.cafe_judge:CafeJudgeStep",
              "Run the CAFE judge on a run folder and compute perception metrics.",
              "cafe")  # fmt: skip
STEPS.builtin("judge-accuracy", "cafe.steps.judged:JudgedAccuracyStep",
              "Judged accuracy (the paper's † figures): an LLM names each chosen option.",
              "judged_accuracy")  # fmt: skip
STEPS.builtin("judge-official", "cafe.steps.judged:OfficialStep",
              "A benchmark's official LLM-judged figure (SAKURA's judge).", "official")  # fmt: skip
STEPS.builtin("rubric", "cafe.steps.rubric:RubricStep",
              "Score MMAR predictions against each item's rubric (the MMAR authors' protocol).",
              "rubric")  # fmt: skip
STEPS.builtin("cues", "cafe.steps.cues:CuesStep",
              "Cue recall of MMAR runs: offline matcher and CAFE judge, vs required events.",
              "cues")  # fmt: skip
STEPS.builtin("decay", "cafe.steps.decay:DecayStep",
              "Perception decay curves: accuracy and Acc_per by reasoning length.",
              "decay")  # fmt: skip
# its row in cafe.commands.TABLE is written out (its cafe.api function: run_controls)
STEPS.add_lazy("listen", "cafe.steps.listening:ListeningStep")


def run_step(name: str, run_dir: Any, **options: Any) -> Any:
    """Run the registered step ``name`` on a run folder (cafe.steps.engine.run_step)."""
    from cafe.steps.engine import run_step as run

    return run(STEPS.step(name), run_dir, **options)


#: the Calls each flag group of a step's layout sets, {Calls keyword: the command's parameter
#: that sets it} (a group's ``names`` respell them): its API function takes the keywords, its
#: command reads them (--batch's BatchChoice sets three, --no-progress turns ``progress`` off)
GROUP_CALLS: dict[str, dict[str, str]] = {
    "engine": {"cache": "cache", "concurrency": "concurrency"},
    "judge_server": {k: k for k in ("endpoints", "concurrency", "limit", "api_key_env")},
    "cache": {"cache": "cache_path"},
    "batch": {"batch": "batch", "batch_options": "batch", "prices": "batch"},
    "thinking": {"thinking": "thinking", "thinking_budget": "thinking_budget"},
    "dry_run": {"dry_run": "dry_run"},
    "progress": {"progress": "no_progress"},
}


def step_function(step_cls: Any, name: str | None = None) -> Any:
    """The Python function of a step, made from its declaration: ``(run_dir, <positional>, *,
    <its options>, <the calls its flags set>, cache, concurrency, progress, limit,
    **client | **runs) -> its section``; each default its command's (one default per option)."""
    from cafe.steps.engine import run_step as run

    step = step_cls()
    defaults = Calls(concurrency=concurrency_default(step))
    groups = [g.group for g in step.layout or () if isinstance(g, Flags)]
    made = step.records or (groups and step.variants is None)  # a variant step's: its runs
    calls = ["cache", "concurrency", "progress", "limit"] if made else []
    calls += [c for g in groups for c in GROUP_CALLS.get(g, ())]
    opts = {o.name: o.default for o in step.options}
    given = {**opts, **{c: getattr(defaults, c) for c in calls if c not in opts}}
    pos, kw = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("run_dir", pos)]
    params += [inspect.Parameter(n, pos, default=given[n]) for n in step.positional]
    params += [inspect.Parameter(n, kw, default=v) for n, v in given.items()
               if n not in step.positional]  # fmt: skip
    if "judge_server" in groups:  # further options of its judge's client (timeout_s...)
        params.append(inspect.Parameter("client", inspect.Parameter.VAR_KEYWORD))
    elif step.variants is not None:  # how its variant runs are made (run_variants' keywords)
        params.append(inspect.Parameter("runs", inspect.Parameter.VAR_KEYWORD))
    signature = inspect.Signature(params)

    def function(*args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)  # an unknown keyword: its TypeError
        bound.apply_defaults()
        return run(step_cls(), **bound.arguments).section  # run_dir, options, calls, client

    label = name or step.name
    function.__name__ = function.__qualname__ = label.replace("-", "_")
    function.__module__ = step_cls.__module__  # its home: the step's module
    args = ", ".join(["run_dir", *step.positional])
    names = ", ".join(str(p.replace(default=p.empty)) for p in params[len(step.positional) + 1 :])
    said = (step.help or f"The {label} step over a run folder").rstrip(".")
    function.__doc__ = (f"{said} -> the metrics.json {step.writes.name!r} section. Arguments: "
                        f"{args}; options: {names}.")  # fmt: skip
    function.__signature__ = signature  # type: ignore[attr-defined]
    return function


__all__ = ["STEPS", "Option", "Step", "StepRecord", "View", "run_step", "step_function"]
