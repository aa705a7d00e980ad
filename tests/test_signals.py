"""One view of the signals: item-level and model-level Spearman correlations between accuracy,
Acc_per, rubric score and the listening gap, from hand-made run folders."""

from __future__ import annotations

import json

import pytest
from report_runs import ITEMS, make_run

from cafe.folder.view import read_view
from cafe.records import Judgement, Prediction, RubricScore
from cafe.reports.leaderboard import Leaderboard, Row, row_from_run
from cafe.reports.run_report import write_run_report
from cafe.reports.signals import format_signals, run_signals
from cafe.steps.base import Calls, Context
from cafe.steps.listening import ListeningStep
from cafe.store import RunStore

# per-item accuracy over the two runs of report_runs.ITEMS
ACC = {i: 50.0 * (c0 + c1) for i, _, _, c0, c1, *_ in ITEMS}


def build(tmp_path):
    real = make_run(tmp_path / "run")
    store = RunStore(real)
    # Acc_per per item: matched k of 4 predicted events with k following the item's accuracy
    with store.writer("judgements.jsonl") as w:
        for i, acc in ACC.items():
            k = int(acc // 50) + 1  # 1, 2 or 3 matched of 4: the same order as accuracy
            w.write_many([Judgement(i, 0, "rule-v1", "t", None,
                                    matched_events=[f"m{n}" for n in range(k)],
                                    error_matched=[f"h{n}" for n in range(4 - k)])])  # fmt: skip
    # rubric: 0 for wrong answers, 0.5 for right ones
    with store.writer("rubric.j.jsonl") as w:
        for i, _, _, c0, c1, *_ in ITEMS:
            w.write_many(
                RubricScore(i, r, "j", "t", "ok" if c else "wrong", correct=c, score=0.5 * c)
                for r, c in enumerate((c0, c1))
            )
    store.update_metrics("rubric", {"score": 25.0, "file": "rubric.j.jsonl", "ci95": [10.0, 40.0]})
    # the silence control: only a1 stays right (both runs)
    ctl = make_run(tmp_path / "run-ctl-silence")
    cstore = RunStore(ctl)
    cstore.path("predictions.jsonl").unlink()
    with cstore.writer("predictions.jsonl") as w:
        w.write_many(Prediction(i, r, "m", "lalm", "h", "x", correct=i == "a1")
                     for i in ACC for r in (0, 1))  # fmt: skip
    # the listening section with that control as the run's variant, handed in as the engine
    # hands it (the control is hand-made, not run), written as the engine writes a section
    ctx = Context(read_view(real), {}, Calls(), None, variants={"silence": read_view(ctl)})
    store.update_metrics("listening", ListeningStep().section(ctx, []))
    store.invalidate()  # what the sections written before the judgements above fed goes
    return real


def test_item_level_signals_and_correlations(tmp_path):
    real = build(tmp_path)
    listening = json.loads((real / "metrics.json").read_text())["listening"]
    c = listening["controls"]["silence"]
    # real 56.25; control: a1 only -> 12.5; gap 43.75
    assert (c["real_acc"], c["acc"], c["gap"]) == (56.25, 12.5, 43.75)
    sec = run_signals(real)
    vals = sec["values"]
    assert vals["acc"]["value"] == 56.25 and vals["gap_silence"]["value"] == 43.75
    assert vals["rubric"]["ci95"] == [10.0, 40.0]
    pairs = {(r["a"], r["b"]): r for r in sec["across_items"]}
    # Acc_per follows accuracy's order item for item: rho 1 over the 8 items
    assert pairs[("acc", "acc_per")]["rho"] == pytest.approx(1.0)
    assert pairs[("acc", "acc_per")]["n"] == 8
    # the rubric is 0.5 x correctness: the same order as accuracy
    assert pairs[("acc", "rubric")]["rho"] == pytest.approx(1.0)
    # gap = accuracy except a1 (100 -> 0): still positive, not perfect
    assert 0 < pairs[("acc", "gap_silence")]["rho"] < 1
    # within correct items the rubric is constant: undefined, never a made-up number
    within = {(r["a"], r["b"]): r for r in sec["across_correct_items"]}
    assert within[("acc_per", "rubric")]["rho"] is None
    text = format_signals(sec)
    assert "| listening gap (silence) | 43.75 |" in text
    assert "| accuracy ~ CAFE Acc_per | 1.00" in text
    summary = (write_run_report(real, draw=False) / "summary.md").read_text()
    assert "## Is it listening?" in summary and "listening gap (silence)" in summary
    row = row_from_run(real, group="LALM")
    assert row.metrics["gap_silence"] == 43.75 and row.metrics["rubric"] == 25.0
    assert row.intervals["gap_silence"] == c["ci95"]


def test_model_level_correlations(tmp_path):
    real = build(tmp_path)

    def row(model, acc, rubric, gap):
        metrics = {"acc": acc, "rubric": rubric, "gap_silence": gap}
        source = {"kind": "run", "run_dir": "x", "manifest_sha256": "0" * 64}
        return Row(model, "LALM", "mmar", "v1", metrics, source, "2026-11")

    rows = [row("m1", 40, 10, 30), row("m2", 50, 20, 20), row("m3", 60, 30, 10),
            row("m4", 70, 40, 0), row("m5", 80, None, -5)]  # fmt: skip
    board = Leaderboard(path=tmp_path / "lb.yaml", rows=rows, markers={}, layout={})
    sec = run_signals(real, board)
    pairs = {(r["a"], r["b"]): r for r in sec["across_models"]}
    assert pairs[("acc", "rubric")]["rho"] == pytest.approx(1.0)
    assert pairs[("acc", "rubric")]["n"] == 4  # m5 has no rubric score
    assert pairs[("acc", "gap_silence")]["rho"] == pytest.approx(-1.0)
    assert pairs[("acc", "gap_silence")]["n"] == 5
    lo, hi = pairs[("acc", "gap_silence")]["ci95"]
    assert -1.0 <= lo <= hi <= -0.9  # perfect order, 5 models: a narrow Fisher interval
