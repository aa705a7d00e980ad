"""MPAR² rewards against hand-computed values (SPEC §7)."""

from __future__ import annotations

import math

import pytest

from cafe.parsing import parse_sections
from cafe.training.rewards import (
    JudgeScores,
    RewardWeights,
    compute_rewards,
    format_reward,
    perception_reward,
    rea_reward,
    spr_reward,
    total_reward,
)

GOOD = (
    "<thinking><perception>1. [0.00, 1.20]: a dog barks twice\n2. [1.50, 3.00]: a car horn"
    "</perception>\n<reasoning>1. Sub-question: what barks? Answer: a dog\n"
    "2. Sub-question: how many times? Answer: twice\n3. Sub-question: what follows? Answer: horn"
    "</reasoning><review>1. Evidence check: both events heard. 2. Logic check: consistent."
    "</review></thinking><answer>two</answer>"
)


def test_format_reward_strict():
    assert format_reward(parse_sections(GOOD).format_ok) == 1.0
    assert format_reward(parse_sections("preamble " + GOOD).format_ok) == 0.0
    assert format_reward(parse_sections(GOOD.replace("<review>", "<rev>")).format_ok) == 0.0


def test_spr_floor_and_geomean():
    # steps 0.5, 0.0 -> floored to 0.01, 0.8: geomean = (0.5*0.01*0.8)^(1/3) = 0.004^(1/3)
    geo = 0.004 ** (1 / 3)
    assert geo == pytest.approx(0.1587401, abs=1e-6)
    got = spr_reward("r", [0.5, 0.0, 0.8], 0.6, theta=0.7, floor=0.01)
    assert got == pytest.approx(0.7 * 0.1587401 + 0.3 * 0.6, abs=1e-6)  # 0.2911181
    # without the floor one zero step would zero the product; with it the mean stays positive
    assert spr_reward("r", [0.0, 0.0], 0.0) == pytest.approx(0.7 * 0.01)
    # scores above 1 are clamped before the mean
    assert spr_reward("r", [1.7], 1.0) == pytest.approx(1.0)


def test_spr_missing_section_or_steps_is_zero():
    assert spr_reward(None, [0.9, 0.9], 0.9) == 0.0
    assert spr_reward("   ", [0.9], 0.9) == 0.0
    assert spr_reward("some reasoning", [], 0.9) == 0.0


def test_rea_gated_by_correctness():
    assert rea_reward(True, 0.4, mu=0.5) == pytest.approx(1.2)
    assert rea_reward(True, None, mu=0.5) == 1.0
    assert rea_reward(False, 1.0, mu=0.5) == 0.0  # a perfect review of a wrong answer earns 0


def test_perception_missing_is_zero():
    assert perception_reward(None, 0.9) == 0.0
    assert perception_reward("1. [0, 1]: dog", None) == 0.0
    assert perception_reward("1. [0, 1]: dog", 0.7) == 0.7


def test_total_with_paper_weights():
    w = RewardWeights()
    assert (w.alpha, w.beta, w.gamma, w.delta, w.theta, w.mu) == (1.5, 1.0, 1.5, 0.1, 0.7, 0.5)
    s = parse_sections(GOOD)
    assert len(s.steps) == 3
    r = compute_rewards(s, True, JudgeScores(0.8, [0.5, 0.0, 0.8], 0.6, 0.4), w)
    assert r.format == 1.0 and r.perception == 0.8 and r.acc == 1.0
    assert r.spr == pytest.approx(0.2911181, abs=1e-6)
    assert r.rea == pytest.approx(1.2)
    # 1.5*0.8 + 1.0*0.2911181 + 1.5*1.2 + 0.1*1 = 3.3911181
    assert r.total == pytest.approx(3.3911181, abs=1e-6)
    # a wrong answer loses the whole review-enhanced term: 3.3911181 - 1.8
    wrong = compute_rewards(s, False, JudgeScores(0.8, [0.5, 0.0, 0.8], 0.6, 0.4), w)
    assert wrong.rea == 0.0 and wrong.total == pytest.approx(1.5911181, abs=1e-6)


def test_each_weight_counts():
    w = RewardWeights(alpha=2.0, beta=3.0, gamma=5.0, delta=7.0)
    assert total_reward(1.0, 0.0, 0.0, 0.0, w) == 2.0
    assert total_reward(0.0, 1.0, 0.0, 0.0, w) == 3.0
    assert total_reward(0.0, 0.0, 1.0, 0.0, w) == 5.0
    assert total_reward(0.0, 0.0, 0.0, 1.0, w) == 7.0
    assert RewardWeights.from_dict({"theta": 0.5}).theta == 0.5
    with pytest.raises(ValueError, match="unknown"):
        RewardWeights.from_dict({"gama": 1})


def test_missing_review_section_gives_plain_accuracy():
    text = GOOD.replace(
        "<review>1. Evidence check: both events heard. 2. Logic check: consistent.</review>", ""
    )
    s = parse_sections(text)
    assert not s.format_ok
    r = compute_rewards(s, True, JudgeScores(0.5, [1.0], 1.0, 0.9))
    assert r.rea == 1.0  # review score ignored: there is no review to score
    assert r.format == 0.0
    assert r.total == pytest.approx(1.5 * 0.5 + 1.0 + 1.5 * 1.0)
    assert not math.isnan(r.total)


def test_step_floor_is_a_recipe_option_zero_is_eq5():
    """Steps [0.9, 0.5, 0] with holistic 0.6, theta 0.7: Eq. 5 as printed gives geomean 0, so
    R_spr = 0.3 * 0.6 = 0.18; the authors' 0.01 floor gives (0.9 * 0.5 * 0.01)^(1/3) = 0.16510
    and R_spr = 0.7 * 0.16510 + 0.18 = 0.29557."""
    from cafe.training.recipes import load_recipe

    assert spr_reward("r", [0.9, 0.5, 0.0], 0.6, theta=0.7, floor=0.0) == pytest.approx(0.18)
    assert spr_reward("r", [0.9, 0.5, 0.0], 0.6, theta=0.7, floor=0.01) == pytest.approx(
        0.7 * 0.0045 ** (1 / 3) + 0.18
    )
    assert 0.7 * 0.0045 ** (1 / 3) + 0.18 == pytest.approx(0.29557, abs=1e-5)
    # no zero step: the floor changes nothing, Eq. 5 is the plain geometric mean
    assert spr_reward("r", [0.9, 0.4], 0.5, floor=0.0) == pytest.approx(0.7 * 0.6 + 0.15)
    floors = {n: RewardWeights.from_dict(load_recipe(n)["rewards"]).step_floor
              for n in ("mpar2-7b-grpo", "mpar2-3b-grpo", "mpar2-7b-grpo-authors")}  # fmt: skip
    assert floors == {"mpar2-7b-grpo": 0.0, "mpar2-3b-grpo": 0.0, "mpar2-7b-grpo-authors": 0.01}
    sections = parse_sections(GOOD)
    scores = JudgeScores(perception=0.5, steps=[0.9, 0.5, 0.0], holistic=0.6, review=None)
    eq5 = compute_rewards(sections, True, scores, RewardWeights(step_floor=0.0))
    assert eq5.spr == pytest.approx(0.18)
