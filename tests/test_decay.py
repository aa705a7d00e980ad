"""Decay bins, Pearson / Spearman against hand formulas, the logistic slope's score equations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cafe.metrics.decay import decay_section, logistic_slope, pearson, spearman
from cafe.records import Judgement, Prediction


def hand_pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def test_pearson_known_value():
    x, y = [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]
    got = pearson(x, y)
    assert got["r"] == pytest.approx(6 / math.sqrt(60))  # sxy 6, sxx 10, syy 6
    r = 6 / math.sqrt(60)
    t = r * math.sqrt(3) / math.sqrt(1 - r * r)  # t with n-2 = 3 degrees of freedom
    assert got["p"] == pytest.approx(2 * stats.t.sf(t, 3))
    assert got["p"] == pytest.approx(0.1240, abs=1e-4)


def test_spearman_known_value():
    x, y = [10, 20, 30, 40, 50], [1.0, 3.0, 2.0, 5.0, 4.0]
    # no ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)); d = 0, -1, 1, -1, 1
    assert spearman(x, y)["rho"] == pytest.approx(1 - 6 * 4 / (5 * 24))
    assert pearson([1, 2], [3, 4])["r"] is None  # too few bins: said, not guessed


def pred(i: int, length: int, correct: bool) -> Prediction:
    return Prediction(f"s{i}", 0, "m", "lalm", "h", "out", correct=correct, reasoning_tokens=length)


def judgement(i: int, mat: int, hal: int) -> Judgement:
    return Judgement(
        f"s{i}", 0, "j", "h", None,
        matched_events=[f"m{k}" for k in range(mat)],
        error_matched=[f"h{k}" for k in range(hal)],
    )  # fmt: skip


def test_bins_accuracies_and_pearson_by_hand():
    # lengths 0..99 in 3 bins of width 100/3; per bin: acc and Acc_per chosen by hand
    preds, judgements = [], []
    spec = [  # (lengths, correct flags, (mat, hal) per item)
        ([0, 10, 20, 30], [1, 1, 1, 0], (3, 1)),  # acc 75, Acc_per 75
        ([40, 50, 60], [1, 0, 0], (1, 1)),  # acc 33.3, Acc_per 50
        ([70, 80, 90, 99], [0, 0, 0, 1], (1, 3)),  # acc 25, Acc_per 25
    ]
    i = 0
    for lengths, flags, (mat, hal) in spec:
        for length, ok in zip(lengths, flags, strict=True):
            preds.append(pred(i, length, bool(ok)))
            judgements.append(judgement(i, mat, hal))
            i += 1
    preds.append(Prediction("bad", 0, "m", "lalm", "h", None, error="timeout"))
    sec = decay_section(preds, judgements, bins=3, min_count=3)
    assert [b["n"] for b in sec["bins"]] == [4, 3, 4]
    assert [b["x_mean"] for b in sec["bins"]] == pytest.approx([15.0, 50.0, 84.75])
    assert [b["x"] for b in sec["bins"]] == pytest.approx([16.5, 49.5, 82.5])  # midpoints of 0-99
    accs = [75.0, 100 / 3, 25.0]
    pers = [75.0, 50.0, 25.0]
    assert [b["reasoning_acc"] for b in sec["bins"]] == pytest.approx(accs)
    assert [b["acc_per"] for b in sec["bins"]] == pytest.approx(pers)
    assert sec["pearson"]["r"] == pytest.approx(hand_pearson(accs, pers))
    assert sec["excluded_no_length_or_failed"] == 1

    # min count 4: the 3-item middle bin merges into its smaller neighbour (the first)
    merged = decay_section(preds, judgements, bins=3, min_count=4, merge=True)
    assert [b["n"] for b in merged["bins"]] == [7, 4]
    assert merged["bins"][0]["reasoning_acc"] == pytest.approx(100 * 4 / 7)
    flagged = decay_section(preds, judgements, bins=3, min_count=4, merge=False)
    assert [b["sparse"] for b in flagged["bins"]] == [False, True, False]
    assert flagged["series_bins"] == 2

    width = decay_section(preds, judgements, bin_width=50, min_count=1)
    assert [(b["lo"], b["hi"], b["n"]) for b in width["bins"]] == [(0, 50, 5), (50, 100, 6)]


def test_logistic_slope_solves_score_equations():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 400, 300)
    y = rng.random(300) < 1 / (1 + np.exp(-(2.0 - 0.01 * x)))
    got = logistic_slope(x, y)
    assert got["slope_per_100"] < 0
    b = got["slope_per_100"] / 100
    a = got["intercept_at_mean"] - b * x.mean()
    p = 1 / (1 + np.exp(-(a + b * x)))
    # at the maximum-likelihood fit the score equations are zero
    assert abs(np.sum(y - p)) < 1e-3 and abs(np.sum((y - p) * x)) / 400 < 1e-3
    assert logistic_slope([1, 2, 3], [True, True, True])["slope_per_100"] is None


def test_decay_command_on_a_run_folder(tmp_path):
    import json

    from click.testing import CliRunner

    from cafe.steps.cli import decay_command
    from cafe.store import RunStore

    store = RunStore(tmp_path / "run").create()
    preds = [pred(i, 10 * i, i % 3 != 0) for i in range(12)]
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    with store.writer("judgements.jsonl") as w:
        w.write_many([judgement(i, 1, i % 2) for i in range(12)])
    res = CliRunner().invoke(decay_command, [str(store.root), "--bins", "3", "--min-count", "2"])
    assert res.exit_code == 0, res.output
    assert "Pearson r=" in res.output
    sec = json.loads(store.path("metrics.json").read_text())["decay"]
    assert [b["n"] for b in sec["bins"]] == [4, 4, 4]
    # lengths 0..110 in 3 bins of width 110/3: items 0-3, 4-7, 8-11
    assert sec["bins"][0]["reasoning_acc"] == 50.0  # items 1, 2 correct of 0-3
    assert sec["bins"][0]["acc_per"] == pytest.approx(100 * 4 / 6)  # 4 matched, 2 hallucinated
    res = CliRunner().invoke(decay_command, [str(store.root), "--bins", "3", "--bin-width", "5"])
    assert res.exit_code != 0 and "not both" in res.output


def test_default_is_the_papers_binning_on_a_hand_made_length_distribution():
    """Lengths 0..100 in 5 equal bins of width 20: [0,20) 6 items, [20,40) 6, [40,60) 2 (sparse),
    [60,80) none (empty), [80,100] 5; no merging: the sparse bin stays, flagged, at x = 50, and
    the near-zero tail (0 of 5 right in the last bin) is not smoothed away."""
    lengths = [0, 2, 5, 8, 12, 19, 20, 25, 30, 31, 35, 39, 41, 55, 80, 85, 90, 95, 100]
    correct = [1] * 6 + [1, 1, 1, 0, 0, 0] + [1, 0] + [0] * 5
    preds = [pred(i, n, bool(c)) for i, (n, c) in enumerate(zip(lengths, correct, strict=True))]
    judgements = [judgement(i, 1, 1) for i in range(len(preds))]
    sec = decay_section(preds, judgements, bins=5)
    assert [(b["lo"], b["hi"], b["n"]) for b in sec["bins"]] == [
        (0, 20, 6), (20, 40, 6), (40, 60, 2), (80, 100, 5)
    ]  # fmt: skip
    assert [b["x"] for b in sec["bins"]] == [10.0, 30.0, 50.0, 90.0]
    assert [b["x_mean"] for b in sec["bins"]] == pytest.approx([46 / 6, 180 / 6, 48.0, 90.0])
    assert [b["sparse"] for b in sec["bins"]] == [False, False, True, False]
    assert [b["reasoning_acc"] for b in sec["bins"]] == pytest.approx([100.0, 50.0, 50.0, 0.0])
    assert sec["empty_bins"] == 1 and sec["series_bins"] == 3
    merged = decay_section(preds, judgements, bins=5, merge=True)
    # merging (the option): the sparse bin joins its smaller neighbour, [80, 100] (5 < 6)
    assert [(b["lo"], b["hi"], b["n"]) for b in merged["bins"]] == [
        (0, 20, 6), (20, 40, 6), (40, 100, 7)
    ]  # fmt: skip


def test_api_and_cli_share_the_papers_default(tmp_path):
    """`cafe.api.decay(run)` and `cafe decay RUN` give the same section: the 19 hand-made
    lengths above in 5 bins keep their sparse [40, 60) bin (2 items) flagged, unmerged, and the
    section names its unit: the run had no tokenizer, so lengths are words."""
    import json

    from click.testing import CliRunner

    from cafe import api
    from cafe.steps.cli import decay_command
    from cafe.store import RunStore

    lengths = [0, 2, 5, 8, 12, 19, 20, 25, 30, 31, 35, 39, 41, 55, 80, 85, 90, 95, 100]
    store = RunStore(tmp_path / "run").create()
    store.write_manifest({"token_counter": "fallback-words"})
    with store.writer("predictions.jsonl") as w:
        w.write_many([pred(i, n, i % 2 == 0) for i, n in enumerate(lengths)])
    with store.writer("judgements.jsonl") as w:
        w.write_many([judgement(i, 1, 1) for i in range(len(lengths))])
    by_api = api.decay(store.root, bins=5)
    assert [b["n"] for b in by_api["bins"]] == [6, 6, 2, 5]
    assert [b["sparse"] for b in by_api["bins"]] == [False, False, True, False]
    assert by_api["settings"]["length_unit"] == "words"
    res = CliRunner().invoke(decay_command, [str(store.root), "--bins", "5"])
    assert res.exit_code == 0, res.output
    assert "reasoning length in words (fallback-words)" in res.output
    by_cli = json.loads(store.path("metrics.json").read_text())["decay"]
    assert by_cli["bins"] == by_api["bins"] and by_cli["settings"] == by_api["settings"]
