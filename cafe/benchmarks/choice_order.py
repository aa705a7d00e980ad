"""How a multiple-choice item looks under another order of its options (choice-order robustness,
cafe.robustness.orderings; STAR-Bench's rotations): ordering 0 is the original order; ``rotate``
moves option i to position (i + k) mod n (CircularEval's), ``shuffle`` draws a seeded
permutation per item from the seed, its id and k. The answer key is the option TEXT, so a
reordered item keeps it. Below the runner, which applies an ordering as a sample transform
(cafe.controls.SAMPLE_TRANSFORMS), and below the benchmarks that score orderings themselves."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

from cafe.prompts import inline_instruction
from cafe.records import Sample

MODES = ("rotate", "shuffle")
#: Sample.meta key holding the displayed order: displayed position j shows original option
#: order[j]
ORDER_KEY = "choice_order"


def identity(k: int, of: int, mode: str, seed: int) -> dict[str, Any]:
    """The ordering's part of a run's identity (RunSpec.permutation)."""
    if mode not in MODES:
        raise ValueError(f"unknown ordering mode {mode!r}; choose from {', '.join(MODES)}")
    if not 0 <= k < of:
        raise ValueError(f"ordering {k} outside 0..{of - 1}")
    return {"k": k, "of": of, "mode": mode, "seed": seed}


def order(n: int, k: int, mode: str, seed: int, sample_id: str) -> list[int]:
    """Displayed position j -> original option index, for an item with ``n`` options."""
    if k == 0 or n < 2:
        return list(range(n))
    if mode == "rotate":
        # option i shown at (i + k) mod n: position j shows option (j - k) mod n
        return [(j - k) % n for j in range(n)]
    digest = hashlib.sha256(f"{seed}:{sample_id}:{k}".encode()).digest()
    out = list(range(n))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(out)
    return out


def permute_sample(s: Sample, k: int, mode: str, seed: int) -> Sample:
    """The item as shown under ordering k: choices reordered, the answer (its text) kept, the
    order in meta[ORDER_KEY]. Failed items and open questions pass through unchanged."""
    if s.error is not None or not s.choices:
        return s
    o = order(len(s.choices), k, mode, seed, s.id)
    choices = [s.choices[i] for i in o]
    meta = {**s.meta, ORDER_KEY: o}
    if isinstance(meta.get("instruction"), str) and o != sorted(o):
        # an instruction that writes the options inline (SAKURA's) shows them in the new order
        # too: the prompt and the official judge read it, not the choices
        meta["instruction"] = inline_instruction(s.question, choices)
    return dataclasses.replace(s, choices=choices, meta=meta)


def permute_samples(samples: Sequence[Sample], spec: Mapping[str, Any]) -> list[Sample]:
    if not any(s.choices for s in samples):
        raise ValueError("--permute-choices needs a multiple-choice benchmark: no item has choices")
    return [permute_sample(s, spec["k"], spec["mode"], spec["seed"]) for s in samples]


def percent(num: float, den: int) -> float | None:
    return None if den == 0 else round(100.0 * num / den, 2)


def positional_bias(rows: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """``rows``: (displayed position chosen, number of options) per answered (item, run,
    ordering). Observed answers per position against a uniform pick among each item's options
    (expected count at position j: the sum of 1/n over answers with more than j options), with
    Pearson's chi-square goodness-of-fit statistic and its p (scipy)."""
    if not rows:
        return {"n": 0, "observed": {}, "expected": {}, "chi2": None, "p": None, "df": None}
    width = max(n for _, n in rows)
    obs = [0.0] * width
    exp = [0.0] * width
    for pos, n in rows:
        obs[pos] += 1
        for j in range(n):
            exp[j] += 1.0 / n
    keep = [j for j in range(width) if exp[j] > 0]
    letters = [chr(ord("A") + j) for j in range(width)]
    out: dict[str, Any] = {
        "n": len(rows),
        "observed": {letters[j]: int(obs[j]) for j in keep},
        "expected": {letters[j]: round(exp[j], 2) for j in keep},
        "share": {letters[j]: percent(obs[j], len(rows)) for j in keep},
        "df": len(keep) - 1,
        "test": "Pearson chi-square goodness of fit against a uniform pick among each item's "
        "options (scipy.stats.chisquare)",
    }
    if len(keep) < 2:
        return {**out, "chi2": None, "p": None}
    from scipy import stats

    chi2, p = stats.chisquare([obs[j] for j in keep], [exp[j] for j in keep])
    return {**out, "chi2": round(float(chi2), 3), "p": float(p)}


def folder_suffix(spec: Mapping[str, Any]) -> str:
    """The ordering's folder beside the original's: ``<real>-perm-rotate1of4``."""
    return f"perm-{spec['mode']}{spec['k']}of{spec['of']}"


def permuted(request: Any, samples: list[Sample], pool: list[Sample]) -> tuple[list[Sample], Any]:
    """The sample transform of RunRequest.permutation: the items under that ordering and the
    ordering's identity (ordering 0, the original order: the items as they are, no identity)."""
    spec = request.permutation
    if not spec.get("k"):
        return samples, None
    return permute_samples(samples, spec), dict(spec)
