"""The Python API: the same operations as the command line, as functions.

Each delegates to the module that owns the operation, imported on first call, so
``import cafe.api`` stays light and a missing optional extra only fails the function that
needs it (with an error naming the module). Example::

    from cafe import api

    result = api.run("reference", "synth", limit=50)
    print(result.metrics["accuracy"]["total"])
    api.judge(result.run_dir)               # CAFE perception metrics ("cafe" section)
    section, problems = api.score("mmar", "MMAR-meta.json", "predictions.jsonl")
"""

from __future__ import annotations

import importlib
from typing import Any

#: operation -> "module:function" that implements it
TARGETS: dict[str, str] = {
    "run": "cafe.runner.main:run",
    "score": "cafe.benchmarks.scoring:score_file",
    "judge": "cafe.judge.pipeline:judge_run",
    "report": "cafe.reports.run_report:write_run_report",
    "train": "cafe.training.api:train",
}


def _target(name: str) -> Any:
    module, _, attr = TARGETS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ImportError(
            f"cafe.api.{name} needs {TARGETS[name]}, which this install lacks ({e}); "
            "install the matching extra (pip install 'cafe-audio-eval[all]')"
        ) from e


def run(model: str = "reference", bench: str = "synth", /, **options: Any) -> Any:
    """Run a model on a benchmark into a resumable run folder -> RunResult (run_dir, metrics).
    Options as cafe.runner.run (checkpoint, data, runs, limit, out, prompt_style, judge…;
    adapter options go in options={...})."""
    return _target("run")(model, bench, **options)


def score(bench: str, meta: str, predictions: str, **options: Any) -> Any:
    """Score an official-format predictions file -> (accuracy section, problems)."""
    return _target("score")(bench, meta, predictions, **options)


def judge(run_dir: str, **options: Any) -> Any:
    """CAFE judge over a run folder -> the metrics.json "cafe" section."""
    return _target("judge")(run_dir, **options)


def report(run_dir: str, *args: Any, **options: Any) -> Any:
    """Tables and figures for a run folder (report/)."""
    return _target("report")(run_dir, *args, **options)


def train(*args: Any, **options: Any) -> Any:
    """MPAR² training (data pipeline, SFT, GRPO) from a recipe."""
    return _target("train")(*args, **options)


__all__ = ["TARGETS", "judge", "report", "run", "score", "train"]
