"""Figures from a small run folder: valid PNG and PDF files at paper column width, built from
the numbers of the run (reasoning-length groups are hand-computed here)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from report_runs import DECAY, make_run

from cafe import plotting
from cafe.records import Prediction, Sample
from cafe.reports import figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def low_dpi(monkeypatch):
    # same drawing code at a third of the pixels: keeps the suite fast on 2 shared cores
    monkeypatch.setattr(plotting, "DPI", 100)


def assert_images(paths: list[Path], max_width_in: float | None = None) -> None:
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"]
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000
        if p.suffix == ".png":
            assert data[:8] == PNG_MAGIC
            width, height = struct.unpack(">II", data[16:24])  # IHDR
            assert width > 0 and height > 0
            if max_width_in:  # a one-column figure stays one column wide
                assert width <= max_width_in * plotting.DPI
        else:
            assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")


def test_report_modules_do_not_import_matplotlib_or_torch():
    code = (
        "import sys, cafe.reports.figures, cafe.reports.tables, cafe.reports.cli, "
        "cafe.reports.run_report, cafe.reports.leaderboard;"
        "bad = [m for m in ('matplotlib', 'torch', 'transformers') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_figure3_one_panel_per_run(tmp_path):
    one = figures.figure3([("Tiny-LALM", DECAY)], tmp_path / "a")
    assert_images(one, max_width_in=3.5)
    two = figures.figure3([("base", DECAY), ("trained", DECAY)], tmp_path / "b")
    assert_images(two)
    assert [p.name for p in two] == ["figure3_decay.png", "figure3_decay.pdf"]


def test_decay_series_are_plotted_in_percent():
    frac = {
        "bins": [
            {"x": 10, "reasoning_acc": 0.5, "acc_per": 0.25},
            {"x": 20, "reasoning_acc": 1.0, "acc_per": None},
        ]
    }
    x, per, rea = figures._series(frac)
    assert x == [10.0, 20.0] and per == [25.0, None] and rea == [50.0, 100.0]
    assert figures._series(DECAY)[1][:3] == [70.0, 55.0, 40.0]  # already percent: unchanged
    assert figures._corr_text(DECAY) == "r = 0.97, p = 0.030\nρ = 1.00, p < 0.001"


def test_figure5_and_figure6(tmp_path):
    assert_images(figures.figure5(("Qwen2.5-Omni-7B", DECAY), ("MPAR²-7B", DECAY), tmp_path))
    att = {"token_index": list(range(20, 121)), "ratio": [0.05] * 101}
    # the averaged form written by `cafe attention`: index / mean / std
    avg = {"index": list(range(101)), "mean": [0.06] * 101, "std": [0.01] * 101}
    assert_images(figures.figure6([("base", att), ("MPAR²", avg)], tmp_path), max_width_in=3.5)
    with pytest.raises(ValueError, match="equal length"):
        figures.figure6([("bad", {"token_index": [1, 2], "ratio": [0.1]})], tmp_path)


def test_reasoning_length_groups_from_predictions_and_samples(tmp_path):
    from cafe.reports.run_report import RunData

    run = RunData.load(make_run(tmp_path / "run"))
    lengths = figures.reasoning_length_by_group(run.samples(), run.predictions())
    # mixtures: a7 (400, 420) + a8 (360, 380); single source: the other 12 predictions
    assert lengths["Sources"] == {"Acoustic Mixtures": (390.0, 4), "Single-Source": (2290 / 12, 12)}
    # layers: Signal+Perception (a1, a2, a5, a7) vs Semantic+Cultural (a3, a4, a6, a8)
    assert lengths["Layer"] == {"Perception": (1510 / 8, 8), "High-level Cognitive": (292.5, 8)}
    assert "Difficulty" not in lengths  # MMAR items carry no difficulty
    assert_images(figures.figure7("Tiny-LALM", lengths, tmp_path / "f7"))


def test_mmau_groups_difficulty_and_one_element_category_lists():
    samples = [
        Sample(
            id=str(i),
            bench="mmau",
            version="original",
            question="q",
            choices=["a"],
            answer="a",
            audio=[],
            meta={"difficulty": d, "category": c},
        )
        for i, (d, c) in enumerate(
            [
                ("easy", "Reasoning"),
                ("hard", ["Information Extraction"]),
                ("medium", "Reasoning"),
                ("hard", "Reasoning"),
            ]
        )
    ]
    preds = [
        Prediction(
            sample_id=str(i),
            run_index=0,
            model="m",
            prompt_style="larm",
            template_hash="h",
            raw_output="",
            reasoning_tokens=t,
        )
        for i, t in enumerate([100, 300, 200, None])
    ]  # None: not counted
    lengths = figures.reasoning_length_by_group(samples, preds)
    assert lengths["Difficulty"] == {"Easy": (100.0, 1), "Medium": (200.0, 1), "Hard": (300.0, 1)}
    assert lengths["Question type"] == {
        "Information Extraction": (300.0, 1),
        "Reasoning": (150.0, 2),
    }


def test_accuracy_by_breakdown(tmp_path):
    from cafe.reports.run_report import RunData

    run = RunData.load(make_run(tmp_path / "run"))
    assert_images(figures.breakdown_figure("t", run.section("accuracy"), tmp_path / "b"))
    with pytest.raises(ValueError, match="no breakdowns"):
        figures.breakdown_figure("t", {"total": {"acc": 1.0}}, tmp_path)


def test_figure1_is_the_papers_rl_numbers_and_regenerates_from_the_leaderboard(tmp_path):
    """Figure 1's published values (RL vs RL† on MMAU) live in leaderboard.yaml, and
    `cafe report --figure 1` draws them without any run folder."""
    from click.testing import CliRunner

    from cafe.reports.cli import report_command
    from cafe.reports.leaderboard import load_leaderboard

    spec = load_leaderboard().figures["1"]
    assert spec["benchmark"] == "mmau" and spec["metric"] == "acc"
    assert {s["label"]: s["values"] for s in spec["series"]} == {
        "RL": [64.5, 61.1, 59.9, 59.5],
        "RL†": [63.8, 65.0, 69.7, 69.8],
    }
    fig = figures.draw_figure1(spec)
    lines = fig.axes[0].get_lines()
    assert [list(ln.get_ydata()) for ln in lines] == [[64.5, 61.1, 59.9, 59.5],
                                                     [63.8, 65.0, 69.7, 69.8]]  # fmt: skip
    res = CliRunner().invoke(report_command, ["--figure", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "figure1_rl.png").exists() and "wrote" in res.output
