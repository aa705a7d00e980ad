"""CAFE metrics against hand counts of fixed judge JSON (micro and macro)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cafe.judge.extraction import parse_reply
from cafe.metrics.cafe import cafe_ci, cafe_metrics, cafe_section
from cafe.records import Judgement, Sample


def reply(mat=(), hal=(), mis=(), neu=(), miss=()) -> str:
    return json.dumps(
        {
            "required_events": list(mat) + list(miss),
            "all_caption_events": list(mat) + list(mis) + list(neu) + list(miss),
            "all_reasoning_events": list(mat) + list(hal) + list(mis) + list(neu),
            "matched_events": list(mat),
            "error_matched": list(hal),
            "error_use": list(mis),
            "neutral_events": list(neu),
            "missed_events": list(miss),
        }
    )


def judged(sample_id: str, run: int, text: str) -> Judgement:
    lists, reason = parse_reply(text)
    if lists is None:
        return Judgement(sample_id, run, "j", "h", text, status="invalid", reason=reason)
    return Judgement(sample_id, run, "j", "h", text, **lists)


@pytest.fixture
def judgements() -> list[Judgement]:
    return [
        # s1 r0: mat 2, hal 1, mis 0, neu 1, miss 1 -> N_pred 4, N_tgt 3
        judged("s1", 0, reply(["dog", "cat"], ["horn"], [], ["rain"], ["bell"])),
        # s2 r0: mat 0, hal 2, mis 1, neu 0, miss 2 -> N_pred 3, N_tgt 2
        judged("s2", 0, reply([], ["siren", "gun"], ["wind"], [], ["bird", "car"])),
        # s3 r0: nothing predicted, 1 missed -> N_pred 0, N_tgt 1
        judged("s3", 0, reply(miss=["drum"])),
        # s1 r1: mat 1, hal 1 -> N_pred 2, N_tgt 1
        judged("s1", 1, reply(["dog"], ["horn"])),
        # s2 r1: the judge refused: invalid, never counted
        judged("s2", 1, "I cannot help with that."),
    ]


def test_micro_by_hand(judgements):
    m = cafe_metrics(judgements, "micro")
    # pooled over ok: mat 3, hal 4, mis 1, neu 1, miss 4; N_pred 9, N_tgt 7
    assert m["mode"] == "micro"
    assert m["acc_per"] == pytest.approx(100 * 3 / 9)
    assert m["err_per"] == pytest.approx(100 * 4 / 9)
    assert m["err_use"] == pytest.approx(100 * 1 / 9)
    assert m["err_omit"] == pytest.approx(100 * 4 / 7)
    assert m["counts"] == {
        "matched": 3, "hallucinated": 4, "misused": 1, "neutral": 1, "missed": 4,
        "n_pred": 9, "n_tgt": 7,
    }  # fmt: skip
    assert m["judgements"] == {"ok": 4, "invalid": 1, "failed": 0, "total": 5}


def test_macro_by_hand_skips_zero_denominators(judgements):
    m = cafe_metrics(judgements, "macro")
    # per ok judgement (s1r0, s2r0, s1r1); s3r0 has N_pred 0 and is skipped for *_per/use
    assert m["acc_per"] == pytest.approx(100 * (2 / 4 + 0 / 3 + 1 / 2) / 3)
    assert m["err_per"] == pytest.approx(100 * (1 / 4 + 2 / 3 + 1 / 2) / 3)
    assert m["err_use"] == pytest.approx(100 * (0 + 1 / 3 + 0) / 3)
    assert m["err_omit"] == pytest.approx(100 * (1 / 3 + 2 / 2 + 1 / 1 + 0 / 1) / 4)
    assert m["macro_samples"]["skipped_zero_pred"] == 1
    assert m["macro_samples"]["used"]["acc_per"] == 3
    assert m["macro_samples"]["used"]["err_omit"] == 4


def test_empty_denominator_is_none_not_zero():
    m = cafe_metrics([judged("s", 0, reply(miss=["x"]))])
    assert m["acc_per"] is None and m["err_omit"] == 100.0
    with pytest.raises(ValueError):
        cafe_metrics([], "median")


def test_section_runs_breakdowns_and_ci(judgements):
    samples = [
        Sample("s1", "b", "v", "q", ["a"], "a", [], meta={"difficulty": "easy"}),
        Sample("s2", "b", "v", "q", ["a"], "a", [], meta={"difficulty": "hard"}),
        Sample("s3", "b", "v", "q", ["a"], "a", [], meta={"difficulty": "hard"}),
    ]
    sec = cafe_section(judgements, samples, "micro", resamples=200, seed=3)
    # run 0 pooled: mat 2, N_pred 7; run 1: mat 1, N_pred 2
    r0, r1 = 100 * 2 / 7, 100 * 1 / 2
    assert sec["runs"]["n"] == 2
    assert sec["runs"]["acc_per"]["per_run"] == pytest.approx([r0, r1])
    assert sec["runs"]["acc_per"]["mean"] == pytest.approx((r0 + r1) / 2)
    assert sec["runs"]["acc_per"]["std"] == pytest.approx(abs(r1 - r0) / math.sqrt(2))
    # easy = s1 (both runs): mat 3, N_pred 6; hard = s2, s3 (s2 r1 invalid): mat 0, N_pred 3
    assert sec["breakdowns"]["difficulty"]["easy"]["acc_per"] == pytest.approx(50.0)
    assert sec["breakdowns"]["difficulty"]["hard"]["acc_per"] == 0.0
    assert sec["breakdowns"]["difficulty"]["hard"]["judgements"]["invalid"] == 1
    lo, hi = sec["ci95"]["acc_per"]
    assert lo <= sec["acc_per"] <= hi
    # by hand: the units are s1 (3/6 = 50%), s2 (0/3) and s3 (0/0, undefined), so a resample lies
    # in [0, 50]; 7 of the 26 defined draw patterns hold no s1 (27%), so the 2.5% point is 0
    assert lo == 0.0 and 100 * 3 / 9 < hi <= 50.0
    assert cafe_ci(judgements, "micro", resamples=200, seed=3)["acc_per"] == [lo, hi]
    macro = cafe_ci(judgements, "macro", resamples=200, seed=3)["acc_per"]
    assert macro[0] <= cafe_metrics(judgements, "macro")["acc_per"] <= macro[1]


def test_attention_average_by_index_on_fixed_arrays():
    from cafe.metrics.attention import average_by_index, shares_of

    traces = [[0.1, 0.2, 0.3], [0.3, 0.4], [0.2, 0.0, 0.6, 0.9]]
    got = average_by_index(traces)
    assert got["count"] == [3, 3, 2, 1]
    assert got["mean"] == pytest.approx([0.2, 0.2, 0.45, 0.9])
    assert got["std"][3] == 0.0
    assert got["std"][0] == pytest.approx(math.sqrt(((0.1 - 0.2) ** 2 + 0.1**2 + 0) / 3))
    cut = average_by_index(traces, min_items=2)
    assert cut["index"] == [0, 1, 2] and cut["mean"][2] == pytest.approx(0.45)
    assert cut["overall_mean"] == pytest.approx((0.1 + 0.2 + 0.3 + 0.3 + 0.4 + 0.2 + 0 + 0.6) / 8)
    assert shares_of({"per_token": [0.5, 0.25]}) == [0.5, 0.25]
    assert shares_of(np.array([0.5, 0.25], dtype=np.float32)) == [0.5, 0.25]
    assert average_by_index([])["index"] == []


def test_headline_is_the_mean_over_runs_with_the_pooled_figure_beside_it():
    """Two items, three runs; hand counts (mat, hal) per judgement:
    run 0: a (1, 1), b (0, 2) -> micro 1/4 = 25;   macro (50 + 0)/2 = 25
    run 1: a (1, 0), b (1, 0) -> micro 2/2 = 100;  macro 100
    run 2: a (1, 3), b invalid -> micro 1/4 = 25;  macro 25
    mean over runs: micro (25 + 100 + 25)/3 = 50, macro 50;
    pooled: micro 4/10 = 40, macro (50 + 0 + 100 + 100 + 25)/5 = 55.
    Bootstrap over items: {a, a} -> (50 + 100 + 25)/3 = 58.33, {b, b} -> (0 + 100)/2 = 50,
    {a, b} -> 50; so the interval is [50, 58.33]."""
    from cafe.metrics.cafe import cafe_section
    from cafe.records import Judgement

    def j(sid, run, mat, hal, status="ok"):
        return Judgement(sid, run, "t", "h", None, matched_events=["m"] * mat,
                         error_matched=["h"] * hal, status=status)  # fmt: skip

    js = [j("a", 0, 1, 1), j("b", 0, 0, 2), j("a", 1, 1, 0), j("b", 1, 1, 0), j("a", 2, 1, 3),
          j("b", 2, 0, 0, status="invalid")]  # fmt: skip
    micro = cafe_section(js, mode="micro")
    assert micro["acc_per"] == pytest.approx(50.0)
    assert micro["runs"]["acc_per"]["per_run"] == pytest.approx([25.0, 100.0, 25.0])
    assert micro["pooled"]["acc_per"] == pytest.approx(40.0)
    assert micro["counts"]["matched"] == 4 and micro["judgements"]["invalid"] == 1
    assert micro["ci95"]["acc_per"] == pytest.approx([50.0, 175 / 3], abs=1e-6)
    assert "mean over runs" in micro["headline"]
    macro = cafe_section(js, mode="macro")
    assert macro["acc_per"] == pytest.approx(50.0)
    assert macro["pooled"]["acc_per"] == pytest.approx(55.0)
    assert macro["ci95"]["acc_per"] == pytest.approx([50.0, 175 / 3], abs=1e-6)
