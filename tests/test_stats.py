"""Paired bootstrap and Spearman-with-interval helpers against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from cafe.metrics.stats import paired_bootstrap, spearman_ci


def test_paired_bootstrap_hand_case():
    # differences 0, 0, 1: the resampled mean is k/3 with k ~ Binomial(3, 1/3), so
    # P(0) = 8/27 (29.6%) holds the 2.5% quantile and P(1) = 1/27 (3.7%) the 97.5% one
    out = paired_bootstrap([1, 1, 1], [1, 1, 0], resamples=20000, seed=3)
    assert out["diff"] == pytest.approx(1 / 3)
    assert out["ci95"] == [0.0, 1.0]
    assert out["n"] == 3 and out["left_out"] == 0


def test_paired_bootstrap_shift_and_left_out_units():
    a = [0.9, 0.1, 0.5, None, 0.7]
    b = [0.7, -0.1, 0.3, 0.2, None]
    out = paired_bootstrap(a, b)
    # every pair differs by 0.2: each resample's mean difference is 0.2
    assert out["diff"] == pytest.approx(0.2)
    assert out["ci95"] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert out["n"] == 3 and out["left_out"] == 2
    # unpaired resampling would not cancel the items' spread: the interval is the paired one
    assert paired_bootstrap([], [])["ci95"] is None


def test_spearman_with_fisher_interval_by_hand():
    out = spearman_ci([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    # rank differences -1, 1, -1, 1, 0: rho = 1 - 6 * 4 / (5 * 24) = 0.8
    assert out["rho"] == pytest.approx(0.8)
    half = 1.959964 * 1.06 / math.sqrt(2)
    lo, hi = math.tanh(math.atanh(0.8) - half), math.tanh(math.atanh(0.8) + half)
    assert out["ci95"] == [pytest.approx(lo, abs=1e-5), pytest.approx(hi, abs=1e-5)]
    assert out["n"] == 5
    assert spearman_ci([1, 2, 3], [1, 1, 1])["rho"] is None  # constant side: undefined
    three = spearman_ci([1, 2, None, 3], [3, 2, 5, 1])
    assert three["rho"] == pytest.approx(-1.0) and three["ci95"] is None and three["n"] == 3
