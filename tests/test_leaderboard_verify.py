"""`cafe leaderboard verify`: a row added from a run folder is recomputed from it; an edited
figure, prediction line or benchmark item each makes it fail naming the row and the figure, a
moved folder is missing, paper rows are published figures; `leaderboard html` marks the rows
verified with the time they were checked."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
import yaml
from click.testing import CliRunner
from outcome_runs import make_outcome_run

from cafe.reports.cli import leaderboard_command
from cafe.reports.leaderboard import add_run, load_leaderboard
from cafe.reports.verify import verify

OUTCOMES = {"i1": "R", "i2": "R", "i3": "W", "i4": "R"}  # 75.00


@pytest.fixture
def added(tmp_path):
    run = make_outcome_run(tmp_path / "run", OUTCOMES)
    board = tmp_path / "mine.yaml"
    row, _ = add_run(run, path=board)
    return run, board, row


def _verify(board):
    return CliRunner().invoke(leaderboard_command, ["verify", "--leaderboard", str(board)])


def test_a_row_from_its_folder_verifies(added):
    run, board, row = added
    assert row.metrics["acc"] == 75.0
    digests = row.source["digests"]
    assert {"samples", "predictions", "judgements", "spec", "bench_data", "cafe_version"} <= set(
        digests
    )
    assert digests["bench_data"] == "0" * 64
    res = _verify(board)
    assert res.exit_code == 0, res.output
    assert "rows[59] Tiny-LALM: verified" in res.output  # after the paper's 59 rows
    assert "59 paper row(s): published figures" in res.output
    statuses = {v.status for v in verify(board)}
    assert statuses == {"published", "verified"}


def test_an_edited_figure_fails_naming_row_and_figure(added):
    _, board, _ = added
    doc = yaml.safe_load(board.read_text(encoding="utf-8"))
    doc["rows"][-1]["metrics"]["acc"] = 80.0
    board.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    res = _verify(board)
    assert res.exit_code == 1
    assert "rows[59] Tiny-LALM: changed: acc: row 80.00, folder 75.00 (-5.00)" in res.output


def test_an_edited_prediction_line_fails(added):
    run, board, _ = added
    path = run / "predictions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])  # i1 right -> wrong: 3 of 4 -> 2 of 4
    first.update(answer="car horn", answer_text="car horn", raw_output="car horn")
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    res = _verify(board)
    assert res.exit_code == 1
    assert "rows[59] Tiny-LALM: changed: acc: row 75.00, folder 50.00 (-25.00)" in res.output
    assert "predictions differ" in res.output


def test_edited_benchmark_data_fails(added):
    run, board, _ = added
    path = run / "samples.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    rows[2]["answer"] = "car horn"  # i3 answered "car horn": the new key makes it right, 100
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = _verify(board).output
    assert "rows[59] Tiny-LALM: changed: acc: row 75.00, folder 100.00 (+25.00)" in out
    assert "samples differ" in out


def test_a_moved_folder_is_missing(added, tmp_path):
    run, board, _ = added
    shutil.move(run, tmp_path / "elsewhere")
    res = _verify(board)
    assert f"rows[59] Tiny-LALM: missing (no run folder at {run.resolve()})" in res.output
    assert res.exit_code == 0  # nothing changed that could be checked; it is said


def test_html_marks_verified_rows_with_the_check_time(added, tmp_path):
    from cafe.reports.leaderboard_html import leaderboard_page

    _, board, _ = added
    when = dt.datetime(2026, 12, 5, 3, 30, tzinfo=dt.timezone.utc)
    verify(board, now=when)
    page = leaderboard_page(load_leaderboard(board))
    assert "✓ verified 2026-12-05T03:30:00+00:00" in page
    assert "published figure, not verifiable" in page
    record = json.loads((tmp_path / "mine.yaml.verified.json").read_text(encoding="utf-8"))
    assert record["rows"]["59"]["status"] == "verified"


def test_an_edited_benchmark_file_fails(tmp_path):
    """The metadata file the run read (manifest bench.source), hashed again."""
    import hashlib

    from cafe.store import RunStore

    run = make_outcome_run(tmp_path / "run", OUTCOMES)
    data = tmp_path / "meta.jsonl"
    data.write_text('{"id": "i1"}\n', encoding="utf-8")
    sha = hashlib.sha256(data.read_bytes()).hexdigest()
    RunStore(run).update_manifest(lambda m: m["bench"].update(source=str(data), sha256=sha))
    board = tmp_path / "mine.yaml"
    add_run(run, path=board)
    assert _verify(board).exit_code == 0
    data.write_text('{"id": "i1", "answer": "car horn"}\n', encoding="utf-8")
    res = _verify(board)
    assert res.exit_code == 1
    assert f"rows[59] Tiny-LALM: changed: benchmark data {data} differs" in res.output
