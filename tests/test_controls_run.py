"""Listening controls end to end on the synth benchmark: the reference listener (it really
listens) loses most of its accuracy under every control and lands near chance; the random
baseline (it never listens) has a gap of exactly zero. Each control is its own run folder, with
the control in its run spec and a link back to the real run; re-running loads no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.runner.cli import run_command
from cafe.runner.spec import RunSpec
from cafe.steps.cli import listen_command
from cafe.store import RunStore

CONTROLS = ("silence", "noise", "shuffled", "text-only")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def test_reference_listener_gap_is_large_and_controls_near_chance(tmp_path, cache):
    out = tmp_path / "ref"
    args = ["--version", "n60-seed0", "--out", str(out), "--controls", "all", "--no-progress"]
    res = CliRunner().invoke(run_command, args)
    assert res.exit_code == 0, res.output
    sec = json.loads((out / "metrics.json").read_text())["listening"]
    assert sec["chance"] == 25.0  # 4 choices per synth item
    real = json.loads((out / "metrics.json").read_text())["accuracy"]["total"]["acc"]
    real_spec = RunSpec.from_dict(json.loads((out / "manifest.json").read_text())["spec"])
    for name in CONTROLS:
        c = sec["controls"][name]
        assert c["real_acc"] == real >= 90.0
        assert abs(c["acc"] - sec["chance"]) <= 15.0, (name, c["acc"])  # near chance
        assert c["gap"] == pytest.approx(real - c["acc"]) and c["gap"] >= 50.0
        assert c["ci95"][0] > 40.0 and c["ci95"][0] <= c["gap"] <= c["ci95"][1]
        folder = Path(c["run_dir"])
        assert folder.name == f"ref-ctl-{name}"
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["control"]["real_run"] == str(out.resolve())
        spec = RunSpec.from_dict(manifest["spec"])
        # the same run in every identity field but the control
        assert [d[0] for d in spec.differences(real_spec)] == ["control"]
        assert spec.control == {"name": name, "seed": 0}
        # the rule judge ran on the control: under silence every reported event is invented
        if name != "shuffled":
            assert c["cafe"]["acc_per"] in (0.0, None)
    assert sec["controls"]["silence"]["breakdowns"]["dimension"].keys() == {
        "counting", "pitch", "rhythm", "temporal", "timbre"}  # fmt: skip
    assert "silence    real" in res.output and "gap" in res.output
    # the control clips exist once, in the cache: silence of each clip's length
    assert list((tmp_path / "cache" / "controls" / "silence").glob("*.wav"))
    # again: everything is there; no model loads for the real run or its controls
    res = CliRunner().invoke(listen_command, [str(out), "--controls", "silence", "--no-progress"])
    assert res.exit_code == 0, res.output
    again = json.loads((out / "metrics.json").read_text())["listening"]
    assert again["controls"]["silence"]["gap"] == sec["controls"]["silence"]["gap"]
    manifest = json.loads((out.with_name("ref-ctl-silence") / "manifest.json").read_text())
    assert manifest["counts"]["predictions"] == 60


def test_random_baseline_gap_is_zero(tmp_path, cache):
    out = tmp_path / "rnd"
    res = CliRunner().invoke(
        run_command, ["--model", "random", "--version", "n40-seed0", "--out", str(out),
                      "--runs", "2", "--no-progress", "--judge", "none"])  # fmt: skip
    assert res.exit_code == 0, res.output
    # controls afterwards, from the folder's own spec (cafe listen)
    res = CliRunner().invoke(listen_command, [str(out), "--judge", "none", "--no-progress"])
    assert res.exit_code == 0, res.output
    sec = json.loads((out / "metrics.json").read_text())["listening"]
    for name in CONTROLS:
        c = sec["controls"][name]
        # it never listens: the same guesses whatever the audio
        assert c["gap"] == 0.0 and c["ci95"] == [0.0, 0.0] and c["n"] == 40
    spec = json.loads((out.with_name("rnd-ctl-noise") / "manifest.json").read_text())["spec"]
    assert spec["runs"] == 2 and spec["model"] == "random"


def test_bad_control_name_is_a_usage_error(tmp_path, cache):
    res = CliRunner().invoke(run_command, ["--version", "n10-seed0", "--controls", "loud"])
    assert res.exit_code == 2 and "unknown control(s) loud" in res.output


def test_control_captions_for_an_llm_judge(tmp_path, cache):
    from cafe.judge.captions import load_captions
    from cafe.steps.listening import control_captions_text

    out = tmp_path / "ref"
    res = CliRunner().invoke(run_command, ["--version", "n10-seed0", "--out", str(out),
                                           "--judge", "none", "--no-progress"])  # fmt: skip
    assert res.exit_code == 0, res.output
    ids = [json.loads(x)["id"] for x in (out / "samples.jsonl").read_text().splitlines()]
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": i, "caption": f"cap {i}"}) + "\n"
                            for i in ids))  # fmt: skip
    items = RunStore(out).samples()  # the run's, as the step reads them
    (tmp_path / "c.json").write_text(control_captions_text(items, "shuffled", 0, caps))
    shuffled = load_captions(tmp_path / "c.json")
    assert set(shuffled) == set(ids) and all(shuffled[i] != f"cap {i}" for i in ids)
    (tmp_path / "s.json").write_text(control_captions_text(items, "silence", 0, caps))
    silent = load_captions(tmp_path / "s.json")
    assert set(silent.values()) == {"The clip is digital silence: there is no sound in it at all."}
