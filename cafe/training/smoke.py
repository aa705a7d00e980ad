"""`cafe train smoke`: every MPAR² stage, the real code, at toy scale on a CPU."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _score(
    checkpoint: Path, out: Path, limit: int, version: str, max_new_tokens: int
) -> dict[str, Any]:
    """`cafe run --model CHECKPOINT --bench synth --limit K` through the runner API."""
    from cafe.runner import run

    result = run(
        str(checkpoint),
        "synth",
        version=version,
        limit=limit,
        out=out,
        prompt_style="mpar2",
        progress=False,
        cache=False,
        max_new_tokens=max_new_tokens,
    )
    acc = result.metrics.get("accuracy", {})
    return {
        "run_dir": str(result.run_dir),
        "acc": acc.get("total", {}).get("acc"),
        "parse_rate": acc.get("parse_rate"),
        "cafe_acc_per": (result.metrics.get("cafe") or {}).get("acc_per"),
        "cafe_err_omit": (result.metrics.get("cafe") or {}).get("err_omit"),
    }


def run_smoke(
    workdir: Path | None,
    *,
    limit: int = 8,
    recipe: dict[str, Any],
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    from cafe.testing.tiny_models import build_tiny_qwen2_audio
    from cafe.training.cli import make_judge
    from cafe.training.data.pipeline import run_pipeline
    from cafe.training.grpo import train_grpo
    from cafe.training.sft import train_sft

    work = workdir or Path(tempfile.mkdtemp(prefix="cafe-train-smoke-"))
    work.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[name] = round(now - t, 1)
        t = now
        echo(f"[smoke] {name} done in {timings[name]} s")

    base = build_tiny_qwen2_audio(work / "base")
    lap("tiny model")
    files = run_pipeline(recipe, workdir=work / "data", echo=lambda s: echo(f"[data] {s}"))
    lap("data pipeline")
    eval_version = f"n{max(limit, 1)}-seed{int(recipe.get('eval_seed', 1))}"
    max_new = int(recipe.get("eval_max_new_tokens", 256))
    before = _score(base, work / "runs" / "before", limit, eval_version, max_new)
    lap("score before")
    sft = train_sft(recipe, model_path=base, data=files["sft"], out=work / "sft")
    lap("SFT")
    final = train_grpo(
        recipe, model_path=sft, data=files["rl"], out=work / "grpo", judge=make_judge(recipe)
    )
    lap("GRPO")
    after = _score(final, work / "runs" / "after", limit, eval_version, max_new)
    lap("score after")
    echo(f"[smoke] checkpoint: {final}")
    echo(f"[smoke] synth {eval_version}, {limit} items, prompt style mpar2:")
    for name, s in (("before", before), ("after", after)):
        echo(
            f"[smoke]   {name:6s} acc {s['acc']}%  parse rate {s['parse_rate']}  "
            f"CAFE Acc_per {s['cafe_acc_per']} Err_omit {s['cafe_err_omit']}  ({s['run_dir']})"
        )
    return {"before": before, "after": after, "checkpoint": str(final), "timings": timings}
