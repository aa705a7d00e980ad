"""Honest status (cafe.folder.status): a run and each step end complete / partial / failed by
counts; one that produced nothing usable exits non-zero with one line saying why, and no view
(`cafe report runs/`, the HTML report, the leaderboard) shows it as "complete" or 0.00."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.cli import main
from cafe.folder.status import NothingUsable, by_counts, require_usable
from cafe.records import Prediction, Sample
from cafe.reports.folder import folder_table
from cafe.reports.leaderboard import LeaderboardError, row_from_run
from cafe.store import RunStore

register()


def test_status_by_counts_hand_cases():
    assert by_counts(8, 8).status == "complete"
    assert by_counts(8, 6).to_dict() == {
        "status": "partial", "total": 8, "usable": 6, "reason": "2 of 8 items failed"
    }  # fmt: skip
    assert by_counts(8, 0).line() == "failed: 0 of 8 usable (all 8 items failed)"
    assert by_counts(0, 0).reason == "no items to work on"
    with pytest.raises(NothingUsable, match="^cafe x on R produced nothing usable: all 3 items"):
        require_usable("cafe x", by_counts(3, 0), "R")


def _run_all_audio_missing(tmp_path: Path) -> tuple[Path, CliRunner]:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    for wav in (tmp_path / "b").glob("*.wav"):
        wav.unlink()
    out = tmp_path / "runs" / "deaf"
    runner = CliRunner()
    res = runner.invoke(main, ["run", "--model", "tone", "--bench", "tone", "--data", str(meta),
                               "--out", str(out), "--no-cache", "--no-progress"])  # fmt: skip
    assert res.exit_code == 1, res.output
    assert res.output.strip().splitlines()[-1] == (
        f"Error: the run produced nothing usable: all 4 items failed (reasons above); {out} is "
        "marked failed"
    )
    return out, runner


def test_a_run_whose_every_item_failed_is_failed_everywhere(tmp_path):
    out, runner = _run_all_audio_missing(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["status_reason"] == "all 4 items failed"
    assert manifest["counts"] == {"predictions": 4, "failed": 4}
    # `cafe report runs/`: failed, with no figure (never "complete" beside 0.00)
    row = next(line for line in folder_table(tmp_path / "runs").splitlines() if "| deaf |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-1] == "failed (all 4 items failed)"
    assert cells[6] == "–" and "0.00" not in row
    # the leaderboard has no row for it
    with pytest.raises(LeaderboardError, match="the run failed \\(all 4 items failed\\)"):
        row_from_run(out)
    # the HTML report says failed and draws no figure
    res = runner.invoke(main, ["report", str(out), "--html", "--no-figures"])
    page = (out / "report" / "index.html").read_text()
    assert "<strong>Run failed</strong>: all 4 items failed" in page, res.output
    assert 'id="sec-accuracy"' not in page


def test_a_partly_failed_run_is_partial(tmp_path):
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    (tmp_path / "b" / "t0.wav").unlink()
    out = tmp_path / "r"
    args = ["--data", str(meta), "--out", str(out), "--no-cache", "--no-progress"]
    res = CliRunner().invoke(main, ["run", "--model", "tone", "--bench", "tone", *args])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["status_reason"] == "1 of 4 items failed"


def _failed_mmar_run(root: Path) -> RunStore:
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}, "runs": 1, "bench": {"name": "mmar"}})
    samples = [Sample(s, "mmar", "v2", "q?", ["a", "b"], "a", [], meta={"cue": "dog barks"})
               for s in ("x", "y")]  # fmt: skip
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(Prediction(s.id, 0, "m", "lalm", "h", None, parse_status="failed",
                                error="timeout") for s in samples)  # fmt: skip
    return store


def test_cues_on_a_fully_failed_run_exits_non_zero(tmp_path):
    store = _failed_mmar_run(tmp_path / "run")
    res = CliRunner().invoke(main, ["cues", str(store.root)])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == (
        f"Error: cafe cues on {store.root} produced nothing usable: all 2 items failed; "
        "its section was not written"
    )
    assert "cues" not in store.read_metrics()


def test_decay_with_nothing_to_correlate_exits_non_zero(tmp_path):
    store = _failed_mmar_run(tmp_path / "run")
    res = CliRunner().invoke(main, ["decay", str(store.root)])
    assert res.exit_code == 1, res.output
    assert "cafe decay on" in res.output and "produced nothing usable" in res.output
    assert "decay" not in store.read_metrics()
