"""MPAR² rewards (SPEC §7) as pure functions over parsed output sections and judge scores.

Nothing here calls a judge: `reward_judge` collects the scores, these functions combine them, so
every number can be hand-checked in tests. Weights come from the recipe (`RewardWeights`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RewardWeights:
    """R_all = alpha R_perception + beta R_spr + gamma R_rea + delta R_format; theta mixes step and
    holistic scores in R_spr; mu scales the review bonus in R_rea. Weights default to the paper's.
    ``step_floor``: each step score is raised to at least this before the geometric mean, as the
    authors' code does (0.01, the default here and in the smoke recipe); 0 is Eq. 5 exactly (a
    step scored 0 makes the geometric mean 0), what the paper's recipes set."""

    alpha: float = 1.5
    beta: float = 1.0
    gamma: float = 1.5
    delta: float = 0.1
    theta: float = 0.7
    mu: float = 0.5
    step_floor: float = 0.01  # the authors' code; 0 = Eq. 5 exactly

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RewardWeights:
        data = data or {}
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"reward weights: unknown key(s) {sorted(unknown)}")
        return cls(**{k: float(v) for k, v in data.items()})


@dataclass
class JudgeScores:
    """Judge scores for one completion, each in [0, 1]; None = not asked (section missing or the
    answer is wrong, so review cannot count)."""

    perception: float | None = None
    steps: list[float] = field(default_factory=list)
    holistic: float | None = None
    review: float | None = None


@dataclass
class RewardBreakdown:
    format: float
    perception: float
    spr: float
    rea: float
    acc: float
    total: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def format_reward(format_ok: bool) -> float:
    """1 when the whole completion follows the MPAR² tag order (the shared parser decides)."""
    return 1.0 if format_ok else 0.0


def perception_reward(perception_text: str | None, score: float | None) -> float:
    if not (perception_text or "").strip() or score is None:
        return 0.0
    return _clamp(score)


def spr_reward(
    reasoning_text: str | None,
    step_scores: Sequence[float],
    holistic: float | None,
    theta: float = 0.7,
    floor: float = 0.01,
) -> float:
    """theta * geomean_i(max(step_i, floor)) + (1 - theta) * holistic; 0 without a reasoning
    section or without any step. ``floor`` 0 is Eq. 5 as printed: one step scored 0 makes the
    geometric mean 0."""
    if not (reasoning_text or "").strip() or not step_scores:
        return 0.0
    scores = [max(_clamp(s), floor) for s in step_scores]
    if min(scores) <= 0.0:
        geomean = 0.0
    else:
        geomean = math.exp(sum(math.log(x) for x in scores) / len(scores))
    return theta * geomean + (1.0 - theta) * _clamp(holistic or 0.0)


def rea_reward(correct: bool, review_score: float | None, mu: float = 0.5) -> float:
    """R_acc * (1 + mu * R_review): the review only counts when the answer is right."""
    if not correct:
        return 0.0
    return 1.0 + mu * _clamp(review_score or 0.0)


def total_reward(
    perception: float, spr: float, rea: float, fmt: float, weights: RewardWeights
) -> float:
    return (
        weights.alpha * perception + weights.beta * spr + weights.gamma * rea + weights.delta * fmt
    )


def compute_rewards(
    sections: Any, correct: bool, scores: JudgeScores, weights: RewardWeights | None = None
) -> RewardBreakdown:
    """All rewards for one completion. ``sections`` is a `cafe.parsing.Sections` (perception,
    reasoning, steps, review, format_ok are read)."""
    w = weights or RewardWeights()
    fmt = format_reward(bool(sections.format_ok))
    per = perception_reward(sections.perception, scores.perception)
    spr = spr_reward(sections.reasoning, scores.steps, scores.holistic, w.theta, w.step_floor)
    review = scores.review if (sections.review or "").strip() else None
    rea = rea_reward(correct, review, w.mu)
    return RewardBreakdown(
        format=fmt,
        perception=per,
        spr=spr,
        rea=rea,
        acc=1.0 if correct else 0.0,
        total=total_reward(per, spr, rea, fmt, w),
    )


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, float(x)))
