"""Small run folders for the report tests, written through cafe.store.RunStore like a real run.

An MMAR-shaped run: 8 items x 2 runs; metrics.json sections in the runner/judge/decay contract."""

from __future__ import annotations

import json
from pathlib import Path

from cafe.records import Prediction, Sample
from cafe.store import PREDICTIONS, RunStore

# (id, modality, layer, correct in run 0, correct in run 1, reasoning tokens run 0, run 1)
ITEMS = [
    ("a1", "sound", "Signal", True, True, 100, 120),
    ("a2", "sound", "Perception", True, False, 140, 160),
    ("a3", "music", "Semantic", False, False, 300, 340),
    ("a4", "music", "Cultural", True, True, 260, 280),
    ("a5", "speech", "Perception", True, True, 80, 90),
    ("a6", "speech", "Semantic", False, True, 200, 220),
    ("a7", "mix-sound-music", "Perception", False, False, 400, 420),
    ("a8", "mix-sound-speech", "Cultural", True, False, 360, 380),
]

DECAY = {
    "bins": [
        {"lo": 80, "hi": 180, "x": 130.0, "n": 6, "reasoning_acc": 83.33, "acc_per": 70.0},
        {"lo": 180, "hi": 280, "x": 236.7, "n": 3, "reasoning_acc": 66.67, "acc_per": 55.0},
        {"lo": 280, "hi": 380, "x": 335.0, "n": 4, "reasoning_acc": 25.0, "acc_per": 40.0},
        {
            "lo": 380,
            "hi": 480,
            "x": 410.0,
            "n": 3,
            "reasoning_acc": 0.0,
            "acc_per": None,
            "sparse": True,
        },
    ],
    "pearson": {"r": 0.97, "p": 0.03},
    "spearman": {"rho": 1.0, "p": 0.0},
}


def _acc(correct: int, total: int) -> dict:
    return {"correct": correct, "total": total, "acc": round(100 * correct / total, 2)}


def make_run(
    root: Path,
    *,
    model: str = "Tiny-LALM",
    group: str = "LALM",
    bench: str = "mmar",
    version: str = "v1",
    cafe: bool = True,
    decay: bool = True,
    attention: bool = False,
) -> Path:
    store = RunStore(root).create()
    store.write_manifest(
        {
            "model": {"name": model, "group": group, "adapter": "reference"},
            "bench": {"name": bench, "version": version, "source": "test", "sha256": "0" * 64},
            "prompt": {"style": "lalm", "template_hash": "abc123"},
            "runs": 2,
            "seeds": [0, 1],
        }
    )
    samples = [
        Sample(
            id=i,
            bench=bench,
            version=version,
            question="q?",
            choices=["x", "y"],
            answer="x",
            audio=[f"/a/{i}.wav"],
            meta={"modality": m, "category": layer},
        )
        for i, m, layer, *_ in ITEMS
    ]
    store.write_samples(samples)
    preds = []
    for i, _, _, c0, c1, t0, t1 in ITEMS:
        for run, (c, t) in enumerate(((c0, t0), (c1, t1))):
            preds.append(
                Prediction(
                    sample_id=i,
                    run_index=run,
                    model=model,
                    prompt_style="lalm",
                    template_hash="abc123",
                    raw_output="x",
                    answer="x" if c else "y",
                    correct=c,
                    reasoning_tokens=t,
                )
            )
    with store.writer(PREDICTIONS) as w:
        w.write_many(preds)
    by_mod: dict[str, list[bool]] = {}
    for _i, m, _, c0, c1, *_ in ITEMS:
        by_mod.setdefault(m, []).extend([c0, c1])
    correct = sum(int(x[3]) + int(x[4]) for x in ITEMS)
    store.update_metrics(
        "accuracy",
        {
            "total": _acc(correct, 16),
            "breakdowns": {"modality": {m: _acc(sum(v), len(v)) for m, v in by_mod.items()}},
            "runs": {"n": 2, "per_run": [62.5, 50.0], "mean": 56.25, "std": 6.25},
            "parse_rate": 100.0,
            "unanswered": 0,
            "failed": 0,
        },
    )
    if cafe:
        store.update_metrics(
            "cafe",
            {
                "acc_per": 55.5,
                "err_per": 20.25,
                "err_use": 10.0,
                "err_omit": 35.125,
                "mode": "micro",
                "judge": {"judge": "rule-v1", "template_hash": "t" * 12, "temperature": None},
                "template_hash": "t" * 12,
                "runs": 2,
                "counts": {"matched": 10},
                "ci95": {"acc_per": [48.0, 61.0], "err_per": [15.0, 25.5]},
            },
        )
    if decay:
        store.update_metrics("decay", DECAY)
    if attention:
        (root / "attention.json").write_text(
            json.dumps(
                {
                    "token_index": list(range(20, 121)),
                    "ratio": [0.02 + 0.0005 * k for k in range(101)],
                    "model": model,
                }
            )
        )
    return root
