"""Issue 45 (high 4): every output folder a command writes to is written by one writer
(cafe.safe_files.write_file / safe_dir) that never follows a link planted there. Each case plants
a link in the folder a command writes, to a file or a folder outside it, runs the command and
checks that nothing reached the link's target; a refusal is one line naming the link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.cli import main

RUN = ["--version", "n20-seed0", "--limit", "2", "--no-progress", "--judge", "none"]


@pytest.fixture
def victims(tmp_path, monkeypatch):
    """A file and an empty folder outside every output folder: what a planted link points at."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (outside / "victim_dir").mkdir()
    return outside


def _plant(link: Path, victims: Path, to_dir: bool) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victims / ("victim_dir" if to_dir else "victim.txt"), link)


def _untouched(victims: Path) -> None:
    assert (victims / "victim.txt").read_text() == "keep me\n"
    assert list((victims / "victim_dir").iterdir()) == []


def _refused_or_fine(res, link: Path) -> None:
    """The command either refused in one line naming the link, or went on without it."""
    if res.exit_code != 0:
        assert str(link) in res.output and "Traceback" not in res.output, res.output


def _cafe(args: list[str]):
    return CliRunner().invoke(main, args)


@pytest.fixture
def run_dir(tmp_path, victims):
    out = tmp_path / "run"
    res = _cafe(["run", *RUN, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize(
    "name, to_dir", [("sweep.md", False), ("sweep.png", False), ("budget-0", True)]
)
def test_sweep_writes_nothing_through_a_link_in_its_folder(tmp_path, victims, name, to_dir):
    out = tmp_path / "sw"
    _plant(out / name, victims, to_dir)
    board = str(tmp_path / "b.yaml")
    res = _cafe(["sweep", "--version", "n20-seed0", "--limit", "2", "--budgets", "0",
                 "--out", str(out), "--no-progress", "--leaderboard", board])  # fmt: skip
    _untouched(victims)
    assert res.exit_code != 0 and f"{out / name} is a symbolic link" in res.output, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "name, to_dir",
    [("summary.md", False), ("tables", True), ("figures", True), ("index.html", False),
     ("tables/signals.md", False)],
)  # fmt: skip
def test_report_writes_nothing_through_a_link_in_its_folder(tmp_path, victims, run_dir, name,
                                                            to_dir):  # fmt: skip
    out = tmp_path / "rep"
    _plant(out / name, victims, to_dir)
    res = _cafe(["report", str(run_dir), "--out", str(out)])
    _untouched(victims)
    _refused_or_fine(res, out / name)


def test_report_figures_write_nothing_through_a_link(tmp_path, victims):
    out = tmp_path / "figs"
    _plant(out / "figure1_rl.png", victims, False)
    _plant(out / "figure1_rl.pdf", victims, False)
    res = _cafe(["report", "--figure", "1", "--out", str(out)])
    _untouched(victims)
    assert res.exit_code != 0 and "is a symbolic link" in res.output, res.output


def test_report_table_writes_nothing_through_a_link(tmp_path, victims, run_dir):
    out = tmp_path / "tab"
    _plant(out / "table1.md", victims, False)
    res = _cafe(["report", str(run_dir), "--table", "1", "--format", "md", "--out", str(out)])
    _untouched(victims)
    _refused_or_fine(res, out / "table1.md")


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_export_writes_nothing_through_a_link(tmp_path, victims, run_dir, suffix):
    out = tmp_path / "exp" / f"preds{suffix}"
    _plant(out, victims, False)
    res = _cafe(["export", str(run_dir), "--bench", "mmau", "--out", str(out)])
    _untouched(victims)
    assert res.exit_code != 0 and f"{out} is a symbolic link" in res.output, res.output


def test_necessity_export_writes_nothing_through_a_link(tmp_path, victims, run_dir):
    out = tmp_path / "ids.txt"
    _plant(out, victims, False)
    res = _cafe(["necessity", str(run_dir), "--export", str(out), "--no-progress"])
    _untouched(victims)
    assert res.exit_code != 0 and f"{out} is a symbolic link" in res.output, res.output


def test_bench_writes_nothing_through_a_link_in_its_folder(tmp_path, victims):
    out = tmp_path / "set"
    _plant(out / "synth.jsonl", victims, False)
    _plant(out / "audio", victims, True)
    res = _cafe(["bench", "synth", "--n", "2", "--out", str(out)])
    _untouched(victims)
    _refused_or_fine(res, out)
    if res.exit_code == 0:  # the set replaced the folder whole: real files, no link
        assert not (out / "synth.jsonl").is_symlink()
        assert len(json.loads((out / "synth.jsonl").read_text().splitlines()[0])) > 1


def test_the_writer_refuses_a_fifo_in_one_line(tmp_path):
    from cafe.errors import CafeError
    from cafe.safe_files import write_file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(CafeError, match="not a regular file"):
        write_file(fifo, "x")  # never blocks waiting for a reader
