"""Listening controls: the same model and spec with the audio replaced (cafe.controls), each a
variant run ``<real>-ctl-<control>`` (the control in its spec, its manifest linking back), then
the real run's "listening" section: the gap per control with its interval
(cafe.metrics.listening). `cafe run --controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.steps.base import Context, Section
from cafe.steps.cues import bench_breakdowns
from cafe.steps.variants import Variant, VariantStep, run_beside
from cafe.store import RunStore


class ListeningStep(VariantStep):
    name = "listen"
    help = "Listening controls for a run (silence, noise, shuffled, text-only) and the gap."
    writes = Section("listening", needs_samples=True)

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        from cafe.metrics.listening import listening_section

        data = {}
        for name, d in self.folders.items():
            ctl = RunStore(d)
            data[name] = {"predictions": ctl.predictions(), "run_dir": str(Path(d).resolve()),
                          "cafe": ctl.read_metrics().get("cafe")}  # fmt: skip
        return listening_section(view.samples, view.predictions, data,
                                 bench_breakdowns(view.manifest))  # fmt: skip


def control_captions_file(real: Path, out: Path, control: str, seed: int, captions: Any) -> str:
    """The captions a control run's LLM judge needs: the played clip's, or the silent truth."""
    from cafe.controls import control_captions
    from cafe.judge.captions import load_captions

    mapping = control_captions(RunStore(real).samples(), control, seed, load_captions(captions))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "control_captions.json"  # {sample_id: caption}, as load_captions reads it
    path.write_text(json.dumps(mapping, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def listening_variants(real: Path, controls: Sequence[str], seed: int, judge: str | None,
                       judge_options: dict[str, Any]) -> list[Variant]:  # fmt: skip
    """The control runs, judged as the real run is, with the captions of what each played."""
    from cafe.controls import parse_controls

    out = []
    for c in parse_controls(list(controls)):
        jopts, suffix = dict(judge_options), f"ctl-{c}"
        if jopts.get("captions"):
            where = Variant(c, suffix).folder(real)
            jopts["captions"] = control_captions_file(real, where, c, seed, jopts["captions"])
        out.append(Variant(c, suffix, {"control": c, "control_seed": seed, "judge": judge,
                                       "judge_options": jopts}))  # fmt: skip
    return out


def run_controls(
    real_dir: str | Path, controls: Sequence[str], *, control_seed: int = 0,
    judge: str | None = None, judge_options: dict[str, Any] | None = None, **options: Any,
) -> dict[str, Any]:  # fmt: skip
    """Run each control of the run in ``real_dir`` and write its "listening" section; returns
    it. ``options``: run_variants' (run_options: the spec, else the run's manifest; model_call;
    the execution options batch_size, concurrency, progress, cache, strict, cards)."""
    real = Path(real_dir)
    wanted = listening_variants(real, controls, control_seed, judge, dict(judge_options or {}))
    return run_beside(ListeningStep, real, wanted, **options)
