"""Every analysis after the run as a step (cafe.steps.base.Step) run by one engine
(cafe.steps.engine). Register your own with ``@STEPS.register("name")`` (or the ``cafe.steps``
entry-point group): `cafe NAME RUN_DIR`, ``cafe.api.step("name")`` (a function made from its
declaration) and ``cafe.api.run_step("name", RUN_DIR)`` find it, with its options as flags and
keywords (docs/extending.md, "A judging protocol").

``TABLE`` lists cafe's own post-run commands (the command, the cafe.api function, the module
that implements each, the section it writes, whether it runs on the engine): the rows of the one
table of commands (cafe.commands.TABLE) that cafe.cli and cafe.api are made from too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cafe import commands
from cafe.registry import Registry
from cafe.steps.base import Option, Step, StepRecord, View


class StepRegistry(Registry[Any]):
    """Steps are registered as classes and used as instances."""

    def step(self, name: str) -> Step:
        return self.get(name)()


STEPS: StepRegistry = StepRegistry("step", entry_point_group="cafe.steps", base=Step)
STEPS.add_lazy("judge", "cafe.steps.cafe_judge:CafeJudgeStep")
STEPS.add_lazy("decay", "cafe.steps.decay:DecayStep")
STEPS.add_lazy("cues", "cafe.steps.cues:CuesStep")
STEPS.add_lazy("rubric", "cafe.steps.rubric:RubricStep")
STEPS.add_lazy("listen", "cafe.steps.listening:ListeningStep")
STEPS.add_lazy("judge-accuracy", "cafe.steps.judged:JudgedAccuracyStep")
STEPS.add_lazy("judge-official", "cafe.steps.judged:OfficialStep")


@dataclass(frozen=True)
class StepEntry:
    command: str  # `cafe COMMAND`
    api: str  # cafe.api.API
    target: str  # "module:function" cafe.api calls
    click: str  # "module:click_command"
    section: str | None  # the metrics.json section it writes (None: a file of its own)
    engine: bool  # runs on cafe.steps.engine


#: cafe's own post-run commands: the rows of the one table (cafe.commands.TABLE) that are steps
TABLE: tuple[StepEntry, ...] = tuple(
    StepEntry(c.name, c.step, c.api[c.step], c.click, c.section, c.engine)
    for c in commands.TABLE
    if c.step
)


def run_step(name: str, run_dir: Any, **options: Any) -> Any:
    """Run the registered step ``name`` on a run folder (cafe.steps.engine.run_step)."""
    from cafe.steps.engine import run_step as run

    return run(STEPS.step(name), run_dir, **options)


def api_function(name: str) -> Any:
    """The cafe.api function of the registered step ``name``, made from its declaration:
    ``(run_dir, *, <its options>, cache, concurrency, progress, limit) -> its section``, its
    concurrency default its command's (one default per option)."""
    import inspect

    from cafe.steps.base import concurrency_default

    step = STEPS.step(name)
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("run_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(o.name, kw, default=o.default, annotation=o.type)
               for o in step.options]  # fmt: skip
    params += [inspect.Parameter("cache", kw, default=None),
               inspect.Parameter("concurrency", kw, default=concurrency_default(step),
                                 annotation=int),
               inspect.Parameter("progress", kw, default=False, annotation=bool),
               inspect.Parameter("limit", kw, default=None, annotation=int | None)]  # fmt: skip
    signature = inspect.Signature(params)

    def function(run_dir: Any, **options: Any) -> dict[str, Any]:
        given = signature.bind(run_dir, **options)  # an unknown keyword: its TypeError
        given.apply_defaults()
        return run_step(name, **given.arguments).section

    function.__name__ = function.__qualname__ = name.replace("-", "_")
    function.__doc__ = step.help or f"The {name} step over a run folder -> its section."
    function.__signature__ = signature  # type: ignore[attr-defined]
    return function


__all__ = ["STEPS", "TABLE", "Option", "Step", "StepEntry", "StepRecord", "View", "api_function",
           "run_step"]  # fmt: skip
