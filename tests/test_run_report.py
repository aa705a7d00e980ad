"""`cafe report RUN_DIR`: report/ with summary, the run beside the paper's rows, figures, and
missing parts named with the command that makes them; `--compare` deltas with intervals."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_runs import make_run

from cafe import plotting
from cafe.reports.cli import report_command
from cafe.reports.leaderboard import LeaderboardError, load_leaderboard
from cafe.reports.run_report import compare, write_run_report

ROOT = Path(__file__).resolve().parents[1]
LB = str(ROOT / "leaderboard.yaml")


@pytest.fixture(autouse=True)
def low_dpi(monkeypatch):
    monkeypatch.setattr(plotting, "DPI", 100)


@pytest.fixture(scope="module")
def board():
    return load_leaderboard(LB)


def test_run_report_writes_summary_tables_and_figures(tmp_path, board):
    run = make_run(tmp_path / "run", model="Tiny-LALM", group="LALM")
    report = write_run_report(run, board)
    assert report == run / "report"
    summary = (report / "summary.md").read_text(encoding="utf-8")
    assert "Total: **56.25** (9/16" in summary
    assert "Mode **micro** (counts pooled over items within a run); judge rule-v2;" in summary
    assert "| acc_per | 55.50 | [48.00, 61.00] |" in summary
    assert "Pearson r = 0.97" in summary
    # the run joins Tables 1 and 2 (MMAR; CAFE measured), as a LALM row with provenance
    rows = list(csv.reader(io.StringIO((report / "tables" / "table1.csv").read_text())))
    assert ["LALM", "Tiny-LALM", "", "55.50", "20.25", "10.00", "35.12", "56.25"] in rows
    t2 = list(csv.reader(io.StringIO((report / "tables" / "table2.csv").read_text())))
    mine = next(r for r in t2 if r[1] == "Tiny-LALM")
    assert mine[3:] == ["", "", "", "", "75.00", "50.00", "75.00", "56.25"]  # no MMAU run
    assert not (report / "tables" / "table3.csv").exists()  # MMAU v05.15.25 only
    # ... and Tables 4 and 5 (the 3B/7B comparisons have the same columns as Tables 2 and 1)
    t4 = list(csv.reader(io.StringIO((report / "tables" / "table4.csv").read_text())))
    assert next(r for r in t4 if r[1] == "Tiny-LALM")[3:] == mine[3:]
    t5 = list(csv.reader(io.StringIO((report / "tables" / "table5.csv").read_text())))
    assert ["LALM", "Tiny-LALM", "", "55.50", "20.25", "10.00", "35.12", "56.25"] in t5
    for stem in ("figure3_decay", "accuracy_by_breakdown", "figure7_reasoning_length"):
        for ext in (".png", ".pdf"):
            assert (report / "figures" / (stem + ext)).stat().st_size > 0
    # attention.json is absent: said, with the command that writes it
    assert "Figure 6 (attention)" in summary and "`cafe attention --model M" in summary


def test_missing_sections_name_their_command(tmp_path, board):
    run = make_run(tmp_path / "run", cafe=False, decay=False)
    summary = (write_run_report(run, board, draw=False) / "summary.md").read_text("utf-8")
    assert "metrics.json has no 'decay' (produced by `cafe decay RUN_DIR`)" in summary
    assert "## CAFE" not in summary
    # without CAFE the run joins Table 2 (accuracy) but not Table 1
    assert (run / "report" / "tables" / "table2.md").exists()
    assert not (run / "report" / "tables" / "table1.md").exists()


def test_mmau_release_selects_the_table(tmp_path, monkeypatch):
    run = make_run(tmp_path / "run", bench="mmau", version="v05.15.25", cafe=False)
    monkeypatch.setenv("CAFE_LEADERBOARD", LB)
    # as cafe.api.report calls it: the leaderboard is found, not passed
    write_run_report(run, draw=False)
    assert not (run / "report" / "figures").exists()
    assert (run / "report" / "tables" / "table3.md").exists()
    assert not (run / "report" / "tables" / "table2.md").exists()


def test_compare_against_a_leaderboard_row(tmp_path, board):
    run = make_run(tmp_path / "run", model="Tiny-LALM")
    text = compare(run, "Qwen2.5-Omni-7B", board)
    lines = {ln.split()[0]: ln for ln in text.splitlines()[2:]}
    # acc 56.25 - 55.20; acc_per 55.50 - 31.74 with interval [48, 61] - 31.74
    assert "+1.05" in lines["acc"]
    assert "+23.76" in lines["acc_per"] and "[16.26, 29.26]" in lines["acc_per"]
    assert "[48.00, 61.00]" in lines["acc_per"]
    assert "-9.36" in lines["err_per"]  # 20.25 - 29.61 (lower is better)
    assert "+21.06" in lines["sound"]  # isolated sound 75.00 - 53.94
    with pytest.raises(LeaderboardError, match="did you mean Qwen2.5-Omni-7B"):
        compare(run, "Qwen2.5-Omni-7", board)


def test_cli_table_figure_and_compare(tmp_path):
    run = make_run(tmp_path / "run", attention=True)
    cli = CliRunner()
    res = cli.invoke(report_command, ["--table", "2", "--format", "tex", "--leaderboard", LB])
    assert res.exit_code == 0 and r"\textbf{74.30}" in res.output
    res = cli.invoke(
        report_command,
        [str(run), "--table", "1", "--format", "csv", "--leaderboard", LB, "--group", "Ours"],
    )
    assert res.exit_code == 0 and "Ours,Tiny-LALM,,55.50" in res.output
    out = tmp_path / "figs"
    res = cli.invoke(
        report_command, [str(run), "--figure", "6", "--out", str(out), "--leaderboard", LB]
    )
    assert res.exit_code == 0, res.output
    assert (out / "figure6_attention.pdf").exists()
    res = cli.invoke(report_command, [str(run), "--figure", "5", "--leaderboard", LB])
    assert res.exit_code != 0 and "two run folders" in res.output
    res = cli.invoke(
        report_command, ["--compare", str(run), "--against", "MiMo-Audio", "--leaderboard", LB]
    )
    assert res.exit_code == 0 and "MiMo-Audio [mmar/unspecified, paper Table 1, 2]" in res.output
    res = cli.invoke(report_command, ["--against", "MiMo-Audio", "--leaderboard", LB])
    assert res.exit_code != 0 and "go together" in res.output
    res = cli.invoke(report_command, [str(run), "--no-figures", "--leaderboard", LB])
    assert res.exit_code == 0 and (run / "report" / "summary.md").exists()
    assert (run / "report" / "tables" / "table1.tex").exists()
    res = cli.invoke(report_command, ["--leaderboard", LB])
    assert res.exit_code != 0 and "give RUN_DIR" in res.output


def test_figure3_needs_decay_and_says_which_command(tmp_path):
    run = make_run(tmp_path / "run", decay=False)
    res = CliRunner().invoke(report_command, [str(run), "--figure", "3", "--leaderboard", LB])
    assert res.exit_code != 0 and "cafe decay" in res.output


def test_compare_defaults_to_the_papers_row_and_names_protocol_differences(tmp_path, board):
    run = make_run(tmp_path / "run", model="qwen2.5-omni-7b")  # a card name: matched by name
    text = compare(run, None, board)
    assert text.startswith("qwen2.5-omni-7b") and "vs Qwen2.5-Omni-7B [mmar/unspecified" in text
    assert "+1.05" in text  # acc 56.25 - 55.20
    proto = {ln.replace("≠", " ").split()[0]: ln for ln in text.splitlines() if ln[:2] == "  "}
    # the run: 2 runs, lalm prompt, rule judge, no decoding set; the paper (authors' code for
    # Qwen2.5-Omni): 3 runs, their MMAR prompt, Gemini-3-pro judge, 2048 tokens with rp 1.03
    assert proto["runs"].startswith("  ≠") and "run: 2" in proto["runs"]
    assert (
        proto["prompt_style"].startswith("  ≠") and "paper: authors-mmar" in proto["prompt_style"]
    )
    assert proto["judge"].startswith("  ≠") and "gemini-3-pro" in proto["judge"]
    assert "repetition_penalty=1.03" in proto["decoding"] and proto["decoding"].startswith("  ≠")
    assert proto["cafe_mode"].startswith("   ")  # micro vs unspecified: nothing to hold against
    assert "benchmark version: run v1, row unspecified" in text
    other = make_run(tmp_path / "other", model="Tiny-LALM")
    with pytest.raises(LeaderboardError, match="no paper row for 'Tiny-LALM'"):
        compare(other, None, board)


def test_a_helpful_prompt_variant_is_labelled_in_the_summary_and_the_comparison(tmp_path, board):
    import json

    run = make_run(tmp_path / "run", model="qwen2.5-omni-7b")
    mpath = run / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["prompt"]["style"] = "lalm-verbatim"
    mpath.write_text(json.dumps(manifest))
    label = "lalm-verbatim (variant of lalm, not the paper's prompt)"
    summary = (write_run_report(run, board, draw=False) / "summary.md").read_text("utf-8")
    assert f"- prompt style: {label}" in summary
    text = compare(run, None, board)
    line = next(ln for ln in text.splitlines() if "prompt_style" in ln)
    assert line.startswith("  ≠") and label in line and "paper: authors-mmar" in line
