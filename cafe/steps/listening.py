"""Listening controls: the same model and spec with the audio replaced (cafe.controls), each a
variant run ``<real>-ctl-<control>`` (the control in its spec, its manifest linking back), then
the real run's "listening" section: the gap per control with its interval
(cafe.metrics.listening). `cafe run --controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.records import Sample
from cafe.steps import step_function
from cafe.steps.base import Context, Option, Section
from cafe.steps.judged import bench_breakdowns
from cafe.steps.variants import Variant, VariantStep
from cafe.store import CONTROL_CAPTIONS


def control_captions_text(samples: Sequence[Sample], control: str, seed: int, captions: Any
                          ) -> str:  # fmt: skip
    """The captions a control run's LLM judge needs, the played clip's or the silent truth:
    {sample_id: caption} as load_captions reads it."""
    from cafe.controls import control_captions
    from cafe.judge.captions import load_captions

    mapping = control_captions(list(samples), control, seed, load_captions(captions))
    return json.dumps(mapping, ensure_ascii=False, indent=1)


def listening_variants(real: Path, controls: Sequence[str], seed: int, judge: str | None,
                       judge_options: dict[str, Any], samples: Sequence[Sample] = ()
                       ) -> list[Variant]:  # fmt: skip
    """The control runs, judged as the real run is, with the captions of what each played (of
    the run's ``samples``)."""
    from cafe.controls import parse_controls

    out = []
    for c in parse_controls(controls):
        jopts, suffix, files = dict(judge_options), f"ctl-{c}", {}
        if jopts.get("captions"):
            files[CONTROL_CAPTIONS] = control_captions_text(samples, c, seed, jopts["captions"])
            jopts["captions"] = str(Variant(c, suffix).folder(real) / CONTROL_CAPTIONS)
        out.append(Variant(c, suffix, {"control": c, "control_seed": seed, "judge": judge,
                                       "judge_options": jopts}, files=files))  # fmt: skip
    return out


class ListeningStep(VariantStep):
    name = "listen"
    help = "Listening controls for a run (silence, noise, shuffled, text-only) and the gap."
    writes = Section("listening", needs_samples=True)
    options = (
        Option("controls", object, "all", "Controls: silence, noise, shuffled, text-only, all."),
        Option("control_seed", int, 0, "Seed of noise and shuffling."),
        Option("judge", str, None, "CAFE judge on the controls (None: the benchmark's)."),
        Option("judge_options", dict, None, "Its --judge-* and --captions.", cli="judge_model"),
    )
    positional = ("controls",)
    variants = staticmethod(lambda ctx: listening_variants(
        ctx.view.root, ctx.spec["controls"], ctx.spec["control_seed"], ctx.spec["judge"],
        dict(ctx.spec["judge_options"] or {}), ctx.view.samples))  # fmt: skip

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        from cafe.metrics.listening import listening_section

        view = ctx.view
        data = {name: {"predictions": v.predictions, "run_dir": str(v.root.resolve()),
                       "cafe": v.metrics.get("cafe")}
                for name, v in ctx.variants.items()}  # fmt: skip
        return listening_section(view.samples, view.predictions, data,
                                 bench_breakdowns(view.manifest))  # fmt: skip


#: the controls of the run in ``run_dir`` and its "listening" section; ``runs``: run_variants'
#: (run_options: the spec, else the run's manifest; model_call; the execution options)
run_controls = step_function(ListeningStep, "run_controls")
