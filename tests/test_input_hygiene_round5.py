"""Issue 45, input hygiene (low items and round three's MMAU-Pro leftover): a FIFO named as an
input or an output is refused in one line, not waited on; a hostile "choices" / "necessity"
section in a run folder is one line in `cafe report` and the rest of the report goes on;
`--no-progress` draws no bar while the benchmark's set is built; MMAU-Pro metadata with an int
where a list belongs is one line naming the file, the id and the field."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.cli import main

RUN = ["--version", "n20-seed0", "--limit", "2", "--no-progress", "--judge", "none"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def _cafe(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    res = _cafe("run", *RUN, "--out", str(out))
    assert res.exit_code == 0, res.output
    return out


def test_ids_from_a_fifo_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "ids"
    os.mkfifo(fifo)  # no writer ever opens it: reading it would wait forever
    res = _cafe("run", *RUN, "--ids", str(fifo), "--out", str(tmp_path / "r"))
    assert res.exit_code != 0 and "not a regular file" in res.output, res.output
    assert str(fifo) in res.output and "Traceback" not in res.output


def test_necessity_export_to_a_fifo_is_one_line_not_a_hang(tmp_path, run_dir):
    fifo = tmp_path / "out.txt"
    os.mkfifo(fifo)  # no reader: opening it to write would wait forever
    res = _cafe("necessity", str(run_dir), "--export", str(fifo), "--no-progress")
    assert res.exit_code != 0 and "not a regular file" in res.output, res.output
    assert str(fifo) in res.output and "Traceback" not in res.output


HOSTILE = {
    "choices": [{"by_ordering": "x", "orderings": 2, "mode": "rotate"},
                {"by_ordering": [{"k": 0}], "circular": 5, "orderings": 2}],
    "necessity": [{"counts": {"needs the audio": 1}, "items": 1},
                  {"counts": 7, "share": [], "audio_needed": "x", "items": 1}],
}  # fmt: skip


@pytest.mark.parametrize("name, sec", [(n, s) for n, ss in HOSTILE.items() for s in ss])
def test_a_hostile_robustness_section_is_one_line_and_the_report_goes_on(run_dir, name, sec):
    metrics = run_dir / "metrics.json"
    m = json.loads(metrics.read_text())
    m[name] = sec
    metrics.write_text(json.dumps(m))
    res = _cafe("report", str(run_dir))
    assert res.exit_code == 0, res.output
    summary = (run_dir / "report" / "summary.md").read_text()
    assert f'metrics.json "{name}" section is unreadable' in summary
    assert "## Files" in summary  # the rest of the report was written
    assert (run_dir / "report" / "index.html").exists()
    page = (run_dir / "report" / "index.html").read_text()
    assert "section is unreadable" in page
    folder = _cafe("report", str(run_dir.parent))  # the folder table's lines too
    assert folder.exit_code == 0 and "Traceback" not in folder.output, folder.output


def test_no_progress_draws_no_bar_while_the_set_is_built(tmp_path):
    res = _cafe("run", "--version", "n3-seed7", "--no-progress", "--judge", "none",
                "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "%|" not in res.output and "item/s" not in res.output, res.output


def test_mmau_pro_choices_of_the_wrong_type_is_one_line_naming_file_id_field(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_mmau_pro import OUTPUTS, ROWS, write_folder

    meta = write_folder(tmp_path / "d", ROWS)
    rows = json.loads(meta.read_text())
    rows[0]["choices"] = 5  # c1: an int where a list belongs
    meta.write_text(json.dumps(rows))
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps([{**r, "model_output": OUTPUTS[r["id"]]} for r in rows]))
    res = _cafe("score", "--bench", "mmau-pro", "--data", str(meta), "--predictions", str(preds))
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "not a list (int)" in x)
    assert str(meta) in line and "c1" in line and "choices" in line
