"""`cafe compare`: paired differences, intervals, McNemar's exact test, the K-run test, Holm's
correction and the --fail-if-worse gate, on run folders whose outcomes are chosen by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from outcome_runs import make_outcome_run
from scipy import stats

from cafe.reports.cli import compare_command
from cafe.reports.compare import compare, holm


def _one_run_pair(tmp_path):
    """20 items, one run: 8 both right, 4 both wrong, 2 right only in A, 6 right only in B."""
    pattern = ["RR"] * 8 + ["WW"] * 4 + ["RW"] * 2 + ["WR"] * 6
    a = {f"i{k:02d}": p[0] for k, p in enumerate(pattern)}
    b = {f"i{k:02d}": p[1] for k, p in enumerate(pattern)}
    modality = {f"i{k:02d}": ("sound" if k % 2 else "music") for k in range(20)}
    return (make_outcome_run(tmp_path / "a", a, modality=modality),
            make_outcome_run(tmp_path / "b", b, modality=modality), pattern)  # fmt: skip


def test_one_run_difference_interval_and_mcnemar(tmp_path):
    a, b, pattern = _one_run_pair(tmp_path)
    res = compare(a, b, seed=7)
    c = res["comparisons"][0]
    h = c["headline"]
    assert (h["a"], h["b"], h["diff"]) == pytest.approx((50.0, 70.0, 20.0))  # 10/20, 14/20
    assert c["units"] == 20 and c["items"] == 20 and c["only_a"]["count"] == 0
    # McNemar's exact test: the discordant items only, 2 one way and 6 the other
    assert h["test"] == "mcnemar_exact" and (h["a_only"], h["b_only"]) == (2, 6)
    assert h["p"] == pytest.approx(stats.binomtest(6, 8, 0.5).pvalue)
    # the interval: scipy's percentile bootstrap of the per-item differences, same seed
    d = np.array([100.0 * ((p[1] == "R") - (p[0] == "R")) for p in pattern])
    want = stats.bootstrap((d,), np.mean, method="percentile", n_resamples=2000,
                           rng=np.random.default_rng(7)).confidence_interval  # fmt: skip
    assert h["ci95"] == pytest.approx([want.low, want.high])
    assert h["ci95"][0] < 20.0 < h["ci95"][1]
    assert compare(a, b, seed=7)["comparisons"][0]["headline"]["ci95"] == h["ci95"]  # seeded
    assert res["method"]["seed"] == 7 and "McNemar" in res["method"]["test_one_run"]


def test_breakdown_cells_are_holm_corrected(tmp_path):
    a, b, _ = _one_run_pair(tmp_path)
    cells = compare(a, b)["comparisons"][0]["breakdowns"]["modality"]
    assert set(cells) == {"music", "sound"}
    ps = [cells["music"]["p"], cells["sound"]["p"]]
    lo, hi = sorted(ps)
    expected = {lo: min(1.0, 2 * lo), hi: max(min(1.0, 2 * lo), min(1.0, hi))}
    for v in ("music", "sound"):
        assert cells[v]["p_holm"] == pytest.approx(expected[cells[v]["p"]])
    # each cell's test is on its own items: the odd items (sound) hold 1 A-only and 3 B-only
    assert (cells["sound"]["a_only"], cells["sound"]["b_only"]) == (1, 3)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_k_runs_are_nested_in_items(tmp_path):
    """3 runs per item: the test is over items (Wilcoxon on per-item accuracy differences) and
    the interval resamples items, the runs of an item moving together."""
    a = {"i1": "RRR", "i2": "RWW", "i3": "WWW", "i4": "RRW", "i5": "RRR", "i6": "WWR"}
    b = {"i1": "RRR", "i2": "RRR", "i3": "RRW", "i4": "RRR", "i5": "RWW", "i6": "RRR"}
    ra, rb = make_outcome_run(tmp_path / "a", a), make_outcome_run(tmp_path / "b", b)
    c = compare(ra, rb)["comparisons"][0]
    h = c["headline"]
    assert c["units"] == 18 and c["items"] == 6 and c["runs"] == [0, 1, 2]
    assert (h["a"], h["b"]) == pytest.approx((100 * 10 / 18, 100 * 15 / 18))
    per_item = np.array([0, 2, 2, 1, -2, 2]) / 3  # B's right runs minus A's, over 3 runs
    assert h["test"] == "wilcoxon"
    assert h["p"] == pytest.approx(stats.wilcoxon(per_item).pvalue)
    want = stats.bootstrap((100 * per_item,), np.mean, method="percentile", n_resamples=2000,
                           rng=np.random.default_rng(0)).confidence_interval  # fmt: skip
    assert h["ci95"] == pytest.approx([want.low, want.high])


def test_units_only_one_run_holds_are_counted_and_named(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "W", "i3": "R"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "R"})
    c = compare(a, b)["comparisons"][0]
    assert c["units"] == 2 and c["only_a"] == {"count": 1, "first": ["i3#0"]}
    assert c["only_b"]["count"] == 0 and c["headline"]["diff"] == pytest.approx(50.0)


def test_gate_exit_code_and_json(tmp_path):
    a = make_outcome_run(tmp_path / "a", {f"i{k}": "R" for k in range(30)})
    worse = {f"i{k}": ("W" if k < 12 else "R") for k in range(30)}  # 40 points worse
    b = make_outcome_run(tmp_path / "b", worse)
    run = CliRunner()
    res = run.invoke(compare_command, [str(a), str(b), "--fail-if-worse", "5"])
    assert res.exit_code == 1 and "worse:" in res.output
    assert run.invoke(compare_command, [str(a), str(b), "--fail-if-worse", "45"]).exit_code == 0
    assert run.invoke(compare_command, [str(b), str(a), "--fail-if-worse", "0"]).exit_code == 0
    out = run.invoke(compare_command, [str(a), str(b), "--json", "--seed", "3"])
    doc = json.loads(out.output)
    assert doc["method"]["seed"] == 3 and doc["comparisons"][0]["headline"]["diff"] == -40.0


def test_three_runs_each_against_the_first(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "W"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "R"})
    c = make_outcome_run(tmp_path / "c", {"i1": "W", "i2": "W"})
    diffs = [x["headline"]["diff"] for x in compare(a, b, c)["comparisons"]]
    assert diffs == pytest.approx([50.0, -50.0])


def test_cafe_metrics_are_paired_too(tmp_path):
    from cafe.records import Judgement
    from cafe.store import JUDGEMENTS, RunStore

    runs = [make_outcome_run(tmp_path / n, {"i1": "R", "i2": "R"}) for n in ("a", "b")]
    # A: 2 matched + 2 hallucinated events; B: 3 matched + 1 hallucinated (Acc_per 50 -> 75)
    events = {"a": {"i1": (1, 1), "i2": (1, 1)}, "b": {"i1": (2, 0), "i2": (1, 1)}}
    for name, root in zip(("a", "b"), runs, strict=True):
        with RunStore(root).writer(JUDGEMENTS) as w:
            w.write_many(
                Judgement(
                    sample_id=sid,
                    run_index=0,
                    judge="rule",
                    template_hash="t",
                    raw_reply="{}",
                    matched_events=[f"m{k}" for k in range(m)],
                    error_matched=[f"h{k}" for k in range(h)],
                )  # fmt: skip
                for sid, (m, h) in events[name].items()
            )
    cafe = {x["metric"]: x for x in compare(*runs)["comparisons"][0]["cafe"]}
    assert cafe["acc_per"]["a"] == pytest.approx(50.0) and cafe["acc_per"]["b"] == 75.0
    assert cafe["acc_per"]["diff"] == pytest.approx(25.0)
    assert cafe["err_per"]["diff"] == pytest.approx(-25.0)
    from cafe.reports.compare import compare_html

    assert "<th>acc_per</th><td>50.00</td><td>75.00</td><td>+25.00</td>" in compare_html(
        compare(*runs)
    )  # the page's tests section shows them too


def test_the_comparison_page_shows_the_tests(tmp_path):
    from cafe.reports.html import write_html_report

    a, b, _ = _one_run_pair(tmp_path)
    page = write_html_report(a, compare_with=b, draw=False).path.read_text(encoding="utf-8")
    assert 'id="tests"' in page and "McNemar p=" in page and "Holm" in page


def test_listening_gap_is_compared(tmp_path):
    from cafe.store import RunStore

    real = {"i1": "R", "i2": "R", "i3": "R", "i4": "R"}
    runs = {}
    # A's silence control keeps i3, i4 right (gaps 100, 100, 0, 0: 50); B's keeps none (100)
    for name, control in (("a", {"i1": "W", "i2": "W", "i3": "R", "i4": "R"}),
                          ("b", {k: "W" for k in real})):  # fmt: skip
        root = make_outcome_run(tmp_path / name, real)
        ctl = make_outcome_run(tmp_path / f"{name}-silence", control)
        store = RunStore(root)
        gap = 50.0 if name == "a" else 100.0
        store.update_metrics("listening", {"controls": {"silence": {"run_dir": str(ctl),
                                                                    "gap": gap}}})  # fmt: skip
        runs[name] = root
    c = compare(runs["a"], runs["b"], seed=1)["comparisons"][0]
    gap = c["listening"][0]
    assert gap["control"] == "silence" and (gap["a"], gap["b"]) == pytest.approx((50.0, 100.0))
    assert gap["diff"] == pytest.approx(50.0)
    d = np.array([0.0, 0.0, 100.0, 100.0])  # B's per-item gap minus A's
    want = stats.bootstrap((d,), np.mean, method="percentile", n_resamples=2000,
                           rng=np.random.default_rng(1)).confidence_interval  # fmt: skip
    assert gap["ci95"] == pytest.approx([want.low, want.high])
    assert c["decay"] == []  # neither has a decay section


def _decay_run(root, per_bin: list[tuple[int, int]]):
    """12 items, one run, lengths 50..600 in three bins of four: reasoning accuracy 100, 50,
    0 by bin; each bin's judgements hold (matched, hallucinated) events as given; the decay
    section computed by cafe's own step code (3 bins, min count 2)."""
    from cafe.metrics.decay import decay_section
    from cafe.records import Judgement
    from cafe.store import JUDGEMENTS, PREDICTIONS, RunStore

    codes = {f"i{k:02d}": "R" if k < 4 or k in (4, 5) else "W" for k in range(12)}
    make_outcome_run(root, codes)
    store = RunStore(root)
    preds = sorted(store.predictions(), key=lambda p: p.sample_id)
    for k, p in enumerate(preds):
        p.reasoning_tokens = 50 * (k + 1)
    with store.writer(PREDICTIONS) as w:
        w.write_many(preds)
    judged = []
    for k, p in enumerate(preds):
        m, h = per_bin[k // 4]
        judged.append(Judgement(sample_id=p.sample_id, run_index=0, judge="rule",
                                template_hash="t", raw_reply="{}",
                                matched_events=[f"m{x}" for x in range(m)],
                                error_matched=[f"h{x}" for x in range(h)]))  # fmt: skip
    with store.writer(JUDGEMENTS) as w:
        w.write_many(judged)
    section = decay_section(preds, judged, bins=3, min_count=2)
    store.update_metrics("decay", section)
    return root, section["pearson"]["r"]


def test_decay_r_is_fitted_again_and_resampled_over_items(tmp_path):
    # A's Acc_per falls with its accuracy (75, 50, 25: r = 1); B's rises (25, 50, 75: r = -1)
    a, ra = _decay_run(tmp_path / "a", [(3, 1), (2, 2), (1, 3)])
    b, rb = _decay_run(tmp_path / "b", [(1, 3), (2, 2), (3, 1)])
    assert (ra, rb) == pytest.approx((1.0, -1.0))
    d = compare(a, b, seed=2)["comparisons"][0]["decay"][0]
    assert (d["a"], d["b"], d["diff"]) == pytest.approx((ra, rb, rb - ra))
    lo, hi = d["ci95"]
    assert lo <= d["diff"] <= hi and hi <= 0  # B's r is below A's on every resample
    assert compare(a, b, seed=2)["comparisons"][0]["decay"][0]["ci95"] == d["ci95"]


def test_runs_that_cannot_be_compared_say_why(tmp_path):
    from cafe.reports.compare import CompareError

    a = make_outcome_run(tmp_path / "a", {"i1": "R"})
    b = make_outcome_run(tmp_path / "b", {"i2": "R"})
    with pytest.raises(CompareError, match="hold no \\(item, run\\) in common"):
        compare(a, b)
    res = CliRunner().invoke(compare_command, [str(a), str(tmp_path)])
    assert res.exit_code != 0 and "not a run folder" in res.output


def test_three_runs_against_one_pairs_the_run_both_hold(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "RWW", "i2": "WRR"})
    b = make_outcome_run(tmp_path / "b", {"i1": "W", "i2": "R"})
    c = compare(a, b)["comparisons"][0]
    assert c["units"] == 2 and c["runs"] == [0]
    assert c["only_a"] == {"count": 4, "first": ["i1#1", "i1#2", "i2#1", "i2#2"]}
    h = c["headline"]  # run 0: A right on i1 only, B on i2 only: one discordant item each way
    assert h["test"] == "mcnemar_exact" and (h["a_only"], h["b_only"]) == (1, 1)
    assert h["diff"] == 0.0 and h["p"] == pytest.approx(1.0)
