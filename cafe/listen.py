"""Listening controls for a run: the same model and spec with the audio replaced (cafe.controls),
each control in its own run folder beside the real one (``<real>-ctl-<control>``, the control
in its run spec, its manifest linking back), then the listening gap in the real run's
metrics.json "listening" section. `cafe run --controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.controls import control_captions, parse_controls
from cafe.store import RunStore

SECTION = "listening"


def control_dir(real_dir: str | Path, control: str) -> Path:
    real = Path(real_dir)
    return real.with_name(f"{real.name}-ctl-{control}")


def rerun_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """RunRequest fields that rebuild a folder's spec, from its manifest (format 2: "spec")."""
    spec = manifest.get("spec")
    if not spec:
        raise ValueError(
            "the run folder has no run spec (written by an older cafe): run the controls with "
            "`cafe run … --controls LIST` and the real run's options instead"
        )
    from cafe.prompts import load_template

    prompt = manifest.get("prompt") or {}
    template = None
    try:
        packaged = load_template(spec["prompt_style"]).hash
    except (KeyError, FileNotFoundError, ValueError):
        packaged = None
    if spec["template_hash"] != packaged:
        template = prompt.get("template_source")
    gen = spec.get("generation") or {}
    return {
        "model": spec["model"],
        "bench": spec["bench"],
        "checkpoint": spec.get("checkpoint"),
        "data": (manifest.get("bench") or {}).get("source"),
        "version": spec["version"],
        "runs": spec["runs"],
        "limit": spec.get("limit"),
        "seed": spec["seed"],
        "prompt_style": spec["prompt_style"],
        "prompt_template": template,
        "max_new_tokens": gen.get("max_new_tokens"),
        "options": dict(spec.get("adapter_options") or {}),
    }


def control_captions_file(
    real_dir: Path, out: Path, control: str, seed: int, captions: str | Path
) -> str:
    """The captions a control run's LLM judge needs: the played clip's, or the silent truth."""
    from cafe.judge.captions import load_captions

    samples = RunStore(real_dir).samples()
    mapping = control_captions(samples, control, seed, load_captions(captions))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "control_captions.json"  # {sample_id: caption}, as load_captions reads it
    path.write_text(json.dumps(mapping, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def run_controls(
    real_dir: str | Path,
    controls: Sequence[str],
    *,
    control_seed: int = 0,
    run_options: dict[str, Any] | None = None,
    judge: str | None = None,
    judge_options: dict[str, Any] | None = None,
    **execution: Any,
) -> dict[str, Any]:
    """Run each control of the run in ``real_dir`` (its spec from ``run_options``, else from its
    manifest) and write the "listening" section; returns it. ``execution``: RunRequest fields
    that do not change a prediction (batch_size, concurrency, progress, cache, strict, cards)."""
    from dataclasses import replace

    from cafe.runner.main import run
    from cafe.runner.spec import RunRequest

    real = Path(real_dir)
    manifest = RunStore(real).read_manifest()  # a run folder, or FileNotFoundError
    opts = dict(run_options or rerun_options(manifest))
    opts.pop("out", None)
    base = RunRequest(**opts, judge=judge, **execution)
    results = {}
    for name in parse_controls(list(controls)):
        out = control_dir(real, name)
        jopts = dict(judge_options or {})
        if jopts.get("captions"):
            jopts["captions"] = control_captions_file(real, out, name, control_seed,
                                                       jopts["captions"])  # fmt: skip
        request = replace(base, out=out, control=name, control_seed=control_seed,
                          control_of=str(real), judge_options=jopts)  # fmt: skip
        results[name] = run(request)
    return write_listening(real, {n: r.run_dir for n, r in results.items()})


def write_listening(real_dir: str | Path, controls: dict[str, str | Path]) -> dict[str, Any]:
    """The real run's "listening" section from its control folders (on the step engine)."""
    from cafe.steps.listening import write_listening as write

    return write(real_dir, controls)
