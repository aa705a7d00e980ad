"""What an lmms-eval user looks for (issue 21): several benchmarks in one command, a list of
benchmarks, generation settings in `cafe run --help`, one table over a folder of runs; and a
partial (--limit) run carries its coverage into the tables, marked."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cafe.cli import main


def test_bench_list_names_versions_items_scoring_and_licence():
    res = CliRunner().invoke(main, ["bench", "list"])
    assert res.exit_code == 0, res.output
    lines = {ln.split()[0]: ln for ln in res.output.splitlines()[1:]}
    assert set(lines) >= {"mmar", "mmau", "synth"}
    assert "v1 (1000), v2 (1000)" in lines["mmar"] and "CC BY-NC 4.0" in lines["mmar"]
    assert "test (9000)" in lines["mmau"] and "Apache-2.0" in lines["mmau"]
    assert "string match" in lines["mmau"]
    # each benchmark's own rule, not MMAU's for all (the letter rule, SAKURA's judge...)
    assert "letter rule as mmsu_evaluation.py" in lines["mmsu"]
    assert "score_foundation.py" in lines["airbench"] and "string match" not in lines["airbench"]
    rule = {name: ln.split("  ")[-1].strip() for name, ln in lines.items()}
    assert rule["mmau"] == rule["mmar"]  # the one string match both scripts use
    own = [rule[n] for n in ("mmau", "sakura", "mmsu", "airbench", "mmau-pro", "synth")]
    assert len(set(own)) == len(own)  # every other benchmark says its own


def test_run_help_shows_how_to_set_generation():
    res = CliRunner().invoke(main, ["run", "--help"])
    assert "-o temperature=0.7" in res.output and "top_p" in res.output
    assert "--bench synth,mmar" in res.output


def test_several_benchmarks_in_one_command_a_folder_each_one_summary(tmp_path, monkeypatch):
    from cafe.benchmarks import BENCHMARKS
    from cafe.benchmarks.synth import SynthBenchmark

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(BENCHMARKS, "_objects", dict(BENCHMARKS._objects))

    class Synth2(SynthBenchmark):  # a second benchmark that needs no data to be shipped
        name = "synth2"

    BENCHMARKS.add("synth2", Synth2)
    out = tmp_path / "runs"
    res = CliRunner().invoke(main, ["run", "--bench", "synth,synth2", "--limit", "4",
                                    "--out", str(out), "--no-progress"])  # fmt: skip
    assert res.exit_code == 0, res.output
    for b in ("synth", "synth2"):
        assert len((out / b / "predictions.jsonl").read_text().splitlines()) == 4
    summary = res.output[res.output.index("benchmark  accuracy") :].splitlines()
    assert [ln.split()[0] for ln in summary[1:3]] == ["synth", "synth2"]
    assert all(str(out) in ln for ln in summary[1:3])
    refused = CliRunner().invoke(main, ["run", "--bench", "synth,synth2", "--data", "x"])
    assert refused.exit_code == 2 and "--data" in refused.output


def test_report_over_a_folder_of_runs_is_one_table_with_coverage(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    base = ["run", "--bench", "synth", "--version", "n10-seed0", "--no-progress"]
    assert CliRunner().invoke(main, [*base, "--out", str(runs / "whole")]).exit_code == 0
    part = [*base, "--limit", "4", "--out", str(runs / "part")]
    assert CliRunner().invoke(main, part).exit_code == 0
    res = CliRunner().invoke(main, ["report", str(runs)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("| ") and "run |" not in ln]
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[1:-1]] for ln in lines}
    assert set(rows) == {"whole", "part"}
    assert rows["part"][4] == "◐ 4 of 10" and rows["whole"][4] == "10"
    assert rows["whole"][2] == "synth" and rows["whole"][11] == "complete"
    csv_out = CliRunner().invoke(main, ["report", str(runs), "--format", "csv"]).output
    assert csv_out.splitlines()[0].startswith("run,model,benchmark")


def test_a_partial_run_is_marked_in_the_paper_tables_with_its_coverage(tmp_path):
    run = tmp_path / "partial"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({
        "model": {"name": "my-model", "group": "LALM"}, "runs": 1, "limit": 20,
        "bench": {"name": "mmar", "version": "v2", "n_samples": 20, "n_items": 1000},
        "spec": {"bench": "mmar", "version": "v2"}, "status": "complete",
    }))  # fmt: skip
    (run / "metrics.json").write_text(json.dumps({"accuracy": {
        "total": {"correct": 10, "total": 20, "acc": 50.0}, "breakdowns": {}}}))  # fmt: skip
    res = CliRunner().invoke(main, ["report", str(run), "--table", "2"])
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if "my-model" in ln and ln.startswith("|"))
    assert "◐" in row and "50.00" in row
    assert "covers 20 of 1000 items (2%)" in res.output
    assert "◐ a partial run" in res.output
