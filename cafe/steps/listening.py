"""Listening controls: the same model and spec with the audio replaced (cafe.controls), each a
variant run ``<real>-ctl-<control>`` (the control in its spec, its manifest linking back), then
the real run's "listening" section: the gap per control with its interval
(cafe.metrics.listening). `cafe run --controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.controls import CONTROLS, control_captions, parse_controls
from cafe.metrics.listening import format_listening, listening_section
from cafe.records import Sample
from cafe.steps import step_function
from cafe.steps.base import Context, Flags, Option, Section
from cafe.steps.judged import bench_breakdowns
from cafe.steps.variants import Variant, VariantStep
from cafe.store import CONTROL_CAPTIONS


def control_captions_text(samples: Sequence[Sample], control: str, seed: int, captions: Any
                          ) -> str:  # fmt: skip
    """The captions a control run's LLM judge needs, the played clip's or the silent truth:
    {sample_id: caption} as load_captions reads it."""
    from cafe.judge.captions import load_captions

    mapping = control_captions(list(samples), control, seed, load_captions(captions))
    return json.dumps(mapping, ensure_ascii=False, indent=1)


def listening_variants(real: Path, controls: Sequence[str], seed: int, judge: str | None,
                       judge_options: dict[str, Any] | None, samples: Sequence[Sample] = (),
                       recorded: dict[str, Any] | None = None) -> list[Variant]:  # fmt: skip
    """The control runs, judged as the real run is (without ``judge``: its ``recorded`` judge,
    its options under those given; keys: environment), with the captions of what each played
    (of the run's ``samples``)."""
    judge_options = dict(judge_options or {})
    if judge is None and recorded:
        recorded = dict(recorded)
        judge, judge_options = recorded.pop("name", None), {**recorded, **judge_options}
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
    """Is RUN_DIR's model listening? Run the same model and spec with the audio replaced by
    silence of the same length, noise at the clip's level, another item's clip (seeded
    derangement) and no audio, each in its own run folder RUN_DIR-ctl-CONTROL; write the
    listening gap (real minus control accuracy, paired bootstrap 95% interval over items) into
    RUN_DIR/metrics.json and print it.

    \b
    cafe listen runs/qwen2.5-omni-7b-mmar-v2
    cafe listen runs/reference-synth-v2-n200-seed0 --controls silence,shuffled
    """

    name = "listen"
    help = "Listening controls for a run (silence, noise, shuffled, text-only) and the gap."
    writes = Section("listening", needs_samples=True)
    options = (
        Option(
            "controls", object, "all", f"Comma-separated controls: {', '.join(CONTROLS)} (or all)."
        ),
        Option("control_seed", int, 0, "Seed of noise and shuffling."),
        Option(
            "judge",
            str,
            None,
            "CAFE judge on the controls (default: the real run's judge; none: skip).",
        ),
        Option("judge_options", dict, None, "Its --judge-* and --captions.", cli="judge_model"),
    )
    positional = ("controls",)
    # the run's judge (as `cafe run` takes it) and how the control runs are made
    layout = ("controls", "control_seed", "judge", Flags("run_judge"), Flags("runs"))
    variants = staticmethod(lambda ctx: listening_variants(
        ctx.view.root, ctx.spec["controls"], ctx.spec["control_seed"], ctx.spec["judge"],
        ctx.spec["judge_options"], ctx.view.samples, ctx.view.manifest.get("judge")))  # fmt: skip
    prints = staticmethod(format_listening)

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        data = {name: {"predictions": v.predictions, "run_dir": str(v.root.resolve()),
                       "cafe": v.metrics.get("cafe")}
                for name, v in ctx.variants.items()}  # fmt: skip
        return listening_section(view.samples, view.predictions, data,
                                 bench_breakdowns(view.manifest))  # fmt: skip


#: the controls of the run in ``run_dir`` and its "listening" section; ``runs``: run_variants'
#: (run_options: the spec, else the run's manifest; model_call; the execution options)
run_controls = step_function(ListeningStep, "run_controls")
