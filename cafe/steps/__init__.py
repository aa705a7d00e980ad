"""Every analysis after the run as a step (cafe.steps.base.Step) run by one engine
(cafe.steps.engine). Register your own with ``@STEPS.register("name")`` (or the ``cafe.steps``
entry-point group): `cafe NAME RUN_DIR` and ``cafe.api.run_step("name", RUN_DIR)`` find it,
with its options as flags and keywords (docs/extending.md, "A judging protocol").

``TABLE`` lists cafe's own post-run commands: the command, the cafe.api function, the module
that implements each, the section it writes and whether it runs on the engine; the CLI and API
tables are checked against it (tests/test_steps.py), so they cannot drift."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


TABLE: tuple[StepEntry, ...] = (
    StepEntry("judge", "judge", "cafe.steps.cafe_judge:judge_run", "cafe.judge.cli:judge_command",
              "cafe", True),
    StepEntry("judge-accuracy", "judge_accuracy", "cafe.steps.judged:judge_accuracy_run",
              "cafe.judge.cli:judge_accuracy_command", "judged_accuracy", True),
    StepEntry("judge-official", "judge_official", "cafe.steps.judged:official_judge_run",
              "cafe.judge.cli:judge_official_command", "official", True),
    StepEntry("rubric", "rubric", "cafe.steps.rubric:rubric_run", "cafe.steps.cli:rubric_command",
              "rubric", True),
    StepEntry("cues", "cues", "cafe.steps.cues:cues_run", "cafe.steps.cli:cues_command",
              "cues", True),
    # the controls run through `cafe run`; the section they make runs on the engine
    StepEntry("listen", "listen", "cafe.listen:run_controls", "cafe.steps.cli:listen_command",
              "listening", True),
    StepEntry("decay", "decay", "cafe.steps.decay:decay", "cafe.steps.cli:decay_command",
              "decay", True),
    StepEntry("caption", "caption", "cafe.judge.captions:caption",
              "cafe.judge.cli:caption_command", None, False),
    StepEntry("attention", "attention", "cafe.metrics.attention:attention",
              "cafe.metrics.cli:attention_command", None, False),
)  # fmt: skip


def run_step(name: str, run_dir: Any, **options: Any) -> Any:
    """Run the registered step ``name`` on a run folder (cafe.steps.engine.run_step)."""
    from cafe.steps.engine import run_step as run

    return run(STEPS.step(name), run_dir, **options)


__all__ = ["STEPS", "TABLE", "Option", "Step", "StepEntry", "StepRecord", "View", "run_step"]
