"""Listening controls: the same model and spec with the audio replaced (cafe.controls), each
control a variant run beside the real one (``<real>-ctl-<control>``, the control in its run
spec, its manifest linking back), then the "listening" section of the real run: its
predictions beside each control's, the gap with its interval (cafe.metrics.listening). `cafe run
--controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.folder.status import StepStatus, by_counts
from cafe.steps.base import Step, View
from cafe.steps.cues import bench_breakdowns
from cafe.steps.variants import Variant, run_variants
from cafe.store import RunStore


class ListeningStep(Step):
    name = "listen"
    help = "Listening controls for a run (silence, noise, shuffled, text-only) and the gap."
    section_name = "listening"
    needs_samples = True

    def __init__(self, controls: dict[str, str | Path] | None = None) -> None:
        self.controls = dict(controls or {})  # control -> its run folder

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        # a gap needs the real run's answers: none answered, nothing to compare
        answered = sum(p.error is None for p in view.predictions)
        return by_counts(len(view.predictions), answered, "items", "failed")

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        from cafe.metrics.listening import listening_section

        data = {}
        for name, d in self.controls.items():
            ctl = RunStore(d)
            data[name] = {"predictions": ctl.predictions(), "run_dir": str(Path(d).resolve()),
                          "cafe": ctl.read_metrics().get("cafe")}  # fmt: skip
        return listening_section(
            view.samples, view.predictions, data, bench_breakdowns(view.manifest)
        )


def control_captions_file(
    real_dir: Path, out: Path, control: str, seed: int, captions: str | Path
) -> str:
    """The captions a control run's LLM judge needs: the played clip's, or the silent truth."""
    from cafe.controls import control_captions
    from cafe.judge.captions import load_captions

    samples = RunStore(real_dir).samples()
    mapping = control_captions(samples, control, seed, load_captions(captions))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "control_captions.json"  # {sample_id: caption}, as load_captions reads it
    path.write_text(json.dumps(mapping, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def listening_variants(
    real: Path, controls: Sequence[str], seed: int, judge: str | None, judge_options: dict
) -> list[Variant]:
    """The control runs: each judged as the real run is (``judge``), with the captions of
    what it played where the judge reads captions."""
    from cafe.controls import parse_controls

    out = []
    for name in parse_controls(list(controls)):
        v = Variant(name, f"ctl-{name}", {"control": name, "control_seed": seed, "judge": judge})
        jopts = dict(judge_options)
        if jopts.get("captions"):
            jopts["captions"] = control_captions_file(real, v.folder(real), name, seed,
                                                       jopts["captions"])  # fmt: skip
        out.append(Variant(v.name, v.suffix, {**v.changes, "judge_options": jopts}))
    return out


def run_controls(
    real_dir: str | Path,
    controls: Sequence[str],
    *,
    control_seed: int = 0,
    run_options: dict[str, Any] | None = None,
    judge: str | None = None,
    judge_options: dict[str, Any] | None = None,
    model_call: dict[str, Any] | None = None,
    **execution: Any,
) -> dict[str, Any]:
    """Run each control of the run in ``real_dir`` (its spec from ``run_options``, else from its
    manifest) and write the "listening" section; returns it. ``execution``: RunRequest fields
    that do not change a prediction (batch_size, concurrency, progress, cache, strict, cards)."""
    from cafe.steps.engine import run_step

    real = Path(real_dir)
    RunStore(real).read_manifest()  # a run folder, or FileNotFoundError
    wanted = listening_variants(real, controls, control_seed, judge, dict(judge_options or {}))
    folders = run_variants(real, wanted, run_options=run_options, model_call=model_call,
                           **execution)  # fmt: skip
    return run_step(ListeningStep(folders), real).section
