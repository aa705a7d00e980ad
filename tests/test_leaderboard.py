"""leaderboard.yaml: schema validation with errors naming row and field; `leaderboard add`
appends a run's row with provenance; `show` filters by benchmark."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from report_runs import make_run

from cafe.reports.cli import leaderboard_command
from cafe.reports.leaderboard import PACKAGED, LeaderboardError, load_leaderboard, resolve_path

ROOT = Path(__file__).resolve().parents[1]


def _doc() -> dict:
    return yaml.safe_load((ROOT / "leaderboard.yaml").read_text(encoding="utf-8"))


def _write(tmp_path: Path, doc: dict) -> Path:
    p = tmp_path / "lb.yaml"
    p.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return p


def test_repository_file_loads_and_package_ships_the_same_rows():
    board = load_leaderboard(ROOT / "leaderboard.yaml")
    assert len(board.rows) == 59  # the paper's 56 and MMAR's three caption + LLM cascades
    groups = {"LALM", "LARM", "Commercial", "Cascade", "Ours", "Ablation"}
    assert {r.group for r in board.rows} == groups
    assert all(r.is_paper for r in board.rows)
    # one source: the repository's file is a link to the one the package ships
    assert (ROOT / "leaderboard.yaml").is_symlink()
    assert (ROOT / "leaderboard.yaml").resolve() == PACKAGED.resolve()


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.delenv("CAFE_LEADERBOARD", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_path() == PACKAGED  # nothing local: the shipped paper rows
    (tmp_path / "leaderboard.yaml").write_text("x")
    assert resolve_path() == tmp_path / "leaderboard.yaml"
    monkeypatch.setenv("CAFE_LEADERBOARD", "/elsewhere.yaml")
    assert resolve_path() == Path("/elsewhere.yaml")
    assert resolve_path("given.yaml") == Path("given.yaml")


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda rows: rows[3]["metrics"].__setitem__("acc", "abc"),
            "rows[3] (Phi-4-Multimodal): field metrics.acc: 'abc' is not of type",
        ),
        (lambda rows: rows[5].pop("date"), "rows[5] (Omni-R1): field date: 'date' is a required"),
        (
            lambda rows: rows[0].__setitem__("group", "Other"),
            "rows[0] (MiMo-Audio): field group: 'Other' is not one of",
        ),
        (
            lambda rows: rows[1]["metrics"].__setitem__("acc", 140.0),
            "rows[1] (Qwen2.5-Omni-7B): field metrics.acc: 140.0 is greater than the maximum",
        ),
        (
            lambda rows: rows[2]["source"].pop("table"),
            "rows[2] (DeSTA2.5-Audio): field source.table: 'table' is a required property",
        ),
        (
            lambda rows: rows[4].__setitem__("colour", "red"),
            "rows[4] (Qwen2-Audio-Instruct): field colour: Additional properties",
        ),
        (
            lambda rows: rows[6].__setitem__("markers", ["§"]),
            "rows[6] (Kimi-Audio): field markers: '§' is not defined",
        ),
    ],
)
def test_malformed_row_names_row_and_field(tmp_path, mutate, expected):
    doc = _doc()
    mutate(doc["rows"])
    with pytest.raises(LeaderboardError) as err:
        load_leaderboard(_write(tmp_path, doc))
    msg = err.value.message
    assert str(tmp_path / "lb.yaml") in msg
    assert expected in msg
    assert "\n" not in msg


def test_not_yaml_is_one_clear_line(tmp_path):
    p = tmp_path / "lb.yaml"
    p.write_text("rows: [unclosed\n")
    with pytest.raises(LeaderboardError, match="not valid YAML"):
        load_leaderboard(p)


def test_add_appends_a_row_with_provenance(tmp_path):
    lb = tmp_path / "lb.yaml"
    lb.write_text((ROOT / "leaderboard.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    run = make_run(tmp_path / "run", model="Tiny-LALM", group="LALM")
    res = CliRunner().invoke(
        leaderboard_command,
        ["add", str(run), "--group", "Ours", "--name", "MPAR²-tiny", "--leaderboard", str(lb)],
    )
    assert res.exit_code == 0, res.output
    board = load_leaderboard(lb)
    assert len(board.rows) == 60  # the file's 59 and this one
    row = board.rows[-1]
    assert (row.model, row.group) == ("MPAR²-tiny", "Ours")
    assert (row.benchmark, row.version) == ("mmar", "v1")
    # numbers straight from metrics.json: total 9/16; isolated sound 3/4, music 2/4, speech 3/4
    assert row.metrics == {
        "acc": 56.25,
        "sound": 75.0,
        "music": 50.0,
        "speech": 75.0,
        "acc_per": 55.5,
        "err_per": 20.25,
        "err_use": 10.0,
        "err_omit": 35.12,
    }
    assert row.intervals == {"acc_per": [48.0, 61.0], "err_per": [15.0, 25.5]}
    manifest_sha = hashlib.sha256((run / "manifest.json").read_bytes()).hexdigest()
    assert row.source["kind"] == "run"
    # a folder outside the working folder goes by its name: no absolute path of the machine
    assert row.source["run_dir"] == "run" and str(tmp_path) not in lb.read_text()
    assert row.source["manifest_sha256"] == manifest_sha
    assert row.source["cafe_mode"] == "micro" and row.source["judge"] == "rule-v2"
    assert len(row.date) == 10 and row.date[4] == "-"
    # the file's comments survive (text append, not a re-dump)
    assert lb.read_text(encoding="utf-8").startswith("# cafe leaderboard")
    # adding the same run twice is refused, naming the row that holds it
    again = CliRunner().invoke(leaderboard_command, ["add", str(run), "--leaderboard", str(lb)])
    assert again.exit_code != 0 and "rows[59] (MPAR²-tiny) already holds this run" in again.output


def test_add_needs_a_table_group_and_metrics(tmp_path):
    lb = tmp_path / "lb.yaml"
    run = make_run(tmp_path / "run", group="reference")
    res = CliRunner().invoke(leaderboard_command, ["add", str(run), "--leaderboard", str(lb)])
    assert res.exit_code != 0 and "pass --group" in res.output
    (run / "metrics.json").write_text("{}")
    res = CliRunner().invoke(
        leaderboard_command, ["add", str(run), "--group", "Ours", "--leaderboard", str(lb)]
    )
    assert res.exit_code != 0 and "cafe judge" in res.output and "cafe run" in res.output


def test_add_creates_the_file_from_the_paper_rows(tmp_path):
    lb = tmp_path / "new.yaml"
    run = make_run(tmp_path / "run")
    res = CliRunner().invoke(leaderboard_command, ["add", str(run), "--leaderboard", str(lb)])
    assert res.exit_code == 0, res.output
    board = load_leaderboard(lb)
    assert len(board.rows) == 60 and board.rows[-1].model == "Tiny-LALM"


def test_show_filters_by_benchmark():
    res = CliRunner().invoke(
        leaderboard_command,
        [
            "show",
            "--bench",
            "mmau",
            "--version",
            "v05.15.25",
            "--leaderboard",
            str(ROOT / "leaderboard.yaml"),
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "(12 of 59 rows)" in lines[0]
    assert len(lines) == 13 and "Step-Audio 2" in res.output and "mmar" not in res.output


def test_add_takes_the_mean_over_runs_for_cafe(tmp_path):
    """Several runs: CAFE figures are the mean of per-run values (the paper averages its three
    runs), not the pooled counts."""
    lb = tmp_path / "lb.yaml"
    run = make_run(tmp_path / "run", model="Tiny-LALM", group="LALM")
    metrics = json.loads((run / "metrics.json").read_text())
    # pooled acc_per stays 55.5; two runs at 50 and 70 average to 60
    metrics["cafe"]["runs"] = {
        "n": 2,
        "acc_per": {"n": 2, "mean": 60.0, "std": 14.14, "per_run": [50.0, 70.0]},
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    res = CliRunner().invoke(leaderboard_command, ["add", str(run), "--leaderboard", str(lb)])
    assert res.exit_code == 0, res.output
    row = load_leaderboard(lb).rows[-1]
    assert row.metrics["acc_per"] == 60.0
    assert row.metrics["err_per"] == 20.25  # no per-run values: the pooled figure


def test_add_never_writes_the_package_file(tmp_path, monkeypatch):
    """The shipped paper rows are package data: neither the repository's link to them nor the
    file itself is written, whichever way it is named."""
    run = make_run(tmp_path / "run")
    before = PACKAGED.read_bytes()
    monkeypatch.delenv("CAFE_LEADERBOARD", raising=False)
    monkeypatch.chdir(ROOT)  # inside the repository: ./leaderboard.yaml is the link
    for args in ([], ["--leaderboard", str(PACKAGED)]):
        res = CliRunner().invoke(leaderboard_command, ["add", str(run), *args])
        assert res.exit_code != 0
        assert "cafe's own data" in res.output and "--leaderboard FILE" in res.output
    monkeypatch.setenv("CAFE_LEADERBOARD", str(ROOT / "leaderboard.yaml"))
    res = CliRunner().invoke(leaderboard_command, ["add", str(run)])
    assert res.exit_code != 0 and "cafe's own data" in res.output
    assert PACKAGED.read_bytes() == before


ADDER = """
import os, sys, time
from cafe.reports.leaderboard import add_run
while not os.path.exists(sys.argv[3]):  # every adder starts together
    time.sleep(0.005)
add_run(sys.argv[1], path=sys.argv[2])
print("added", flush=True)
"""


def test_parallel_adds_all_land(tmp_path):
    """Four `leaderboard add`s at once on one (new) file: all four rows are kept."""
    import os
    import subprocess
    import sys

    runs = [make_run(tmp_path / f"run{i}", model=f"Tiny-{i}") for i in range(4)]
    lb, go = tmp_path / "mine.yaml", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CAFE_LOCK_WAIT": "60"}
    procs = [
        subprocess.Popen([sys.executable, "-c", ADDER, str(r), str(lb), str(go)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in runs
    ]  # fmt: skip
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "added", err
    board = load_leaderboard(lb)
    assert len(board.rows) == 59 + 4
    assert sorted(r.model for r in board.rows[59:]) == [f"Tiny-{i}" for i in range(4)]
