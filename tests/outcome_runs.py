"""Run folders whose per-(item, run) outcomes are chosen by hand, for `cafe compare`, `cafe
explain` and `leaderboard verify`: written through RunStore like a real run, with the accuracy
section the runner writes (cafe.benchmarks.scoring.bench_accuracy, stamped by the store).

An outcome per (item, run) is one letter:
  R right (the answer text is the right option), W wrong (another option),
  L lenient only (the answer text is "(A)": wrong for the official match, right once mapped),
  U unanswered (no answer text), F failed (the call errored), - missing (no prediction line)."""

from __future__ import annotations

from pathlib import Path

from cafe.records import Prediction, Sample
from cafe.store import PREDICTIONS, RunStore

CHOICES = ["dog barking", "car horn"]


def prediction(sid: str, run: int, code: str, model: str) -> Prediction | None:
    base = {"sample_id": sid, "run_index": run, "model": model, "prompt_style": "lalm",
            "template_hash": "abc123", "reasoning_tokens": 50}  # fmt: skip
    if code == "-":
        return None
    if code == "F":
        return Prediction(**base, raw_output=None, parse_status="failed", error="timeout")
    if code == "U":
        return Prediction(**base, raw_output="hmm", parse_status="no_answer")
    text, answer = {"R": (CHOICES[0], CHOICES[0]), "W": (CHOICES[1], CHOICES[1]),
                    "L": ("(A)", CHOICES[0])}[code]  # fmt: skip
    return Prediction(**base, raw_output=text, answer=answer, answer_text=text,
                      correct=code == "R", correct_lenient=code in "RL")  # fmt: skip


def make_outcome_run(
    root: Path,
    outcomes: dict[str, str],
    *,
    model: str = "Tiny-LALM",
    version: str = "v1",
    modality: dict[str, str] | None = None,
    answers: dict[str, str] | None = None,
) -> Path:
    """``outcomes``: item id -> one letter per run ("RRW": right, right, wrong over 3 runs).
    ``answers``: item id -> the answer key's option index ("1": the second option is right)."""
    from cafe.benchmarks.base import benchmark_class
    from cafe.benchmarks.scoring import bench_accuracy

    runs = max(len(v) for v in outcomes.values())
    store = RunStore(root).create()
    store.write_manifest({
        "model": {"name": model, "group": "LALM", "adapter": "reference"},
        "bench": {"name": "mmar", "version": version, "source": "test", "sha256": "0" * 64},
        "spec": {"model": model, "bench": "mmar", "version": version, "runs": runs},
        "prompt": {"style": "lalm", "template_hash": "abc123"},
        "runs": runs,
    })  # fmt: skip
    samples = [
        Sample(
            id=sid,
            bench="mmar",
            version=version,
            question="What is heard?",
            choices=list(CHOICES),
            answer=CHOICES[int((answers or {}).get(sid, "0"))],
            audio=[f"/a/{sid}.wav"],
            meta={"modality": (modality or {}).get(sid, "sound")},
        )  # fmt: skip
        for sid in outcomes
    ]
    store.write_samples(samples)
    preds = [
        p
        for sid, codes in outcomes.items()
        for r, code in enumerate(codes)
        if (p := prediction(sid, r, code, model)) is not None
    ]
    with store.writer(PREDICTIONS) as w:
        w.write_many(preds)
    section = bench_accuracy(benchmark_class("mmar")(), samples, preds, runs)
    store.update_metrics("accuracy", section)
    return root
