"""The "listening" section on the step engine: the real run's predictions beside each of its
listening controls' (their own run folders, made by `cafe listen` / `cafe run --controls`), the
gap per control with its interval (cafe.metrics.listening holds the maths)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.folder.status import StepStatus, by_counts
from cafe.steps.base import Context, Section, Step
from cafe.steps.cues import bench_breakdowns
from cafe.store import RunStore


class ListeningStep(Step):
    name = "listen"
    help = "Listening controls for a run (silence, noise, shuffled, text-only) and the gap."
    writes = Section("listening", needs_samples=True)

    def __init__(self, controls: dict[str, str | Path] | None = None) -> None:
        self.controls = dict(controls or {})

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        view = ctx.view
        # a gap needs the real run's answers: none answered, nothing to compare
        answered = sum(p.error is None for p in view.predictions)
        return by_counts(len(view.predictions), answered, "items", "failed")

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        from cafe.metrics.listening import listening_section

        data = {}
        for name, d in self.controls.items():  # each control is a run folder of its own
            ctl = RunStore(d)
            data[name] = {"predictions": ctl.predictions(), "run_dir": str(Path(d).resolve()),
                          "cafe": ctl.read_metrics().get("cafe")}  # fmt: skip
        return listening_section(
            view.samples, view.predictions, data, bench_breakdowns(view.manifest)
        )


def write_listening(real_dir: str | Path, controls: dict[str, str | Path]) -> dict[str, Any]:
    """The real run's "listening" section from its control folders."""
    from cafe.steps.engine import run_step

    return run_step(ListeningStep(controls), real_dir).section
