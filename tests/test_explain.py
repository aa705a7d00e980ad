"""`cafe explain`: the gap between two accuracy figures taken apart in a fixed order; each step
tested alone on folders that differ in that one setting, and all together summing to the gap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from outcome_runs import make_outcome_run

from cafe.reports.cli import explain_command
from cafe.reports.explain import STEPS, ExplainError, Protocol, explain, sum_of_steps


def _steps(result: dict) -> dict[str, float | None]:
    return {s["step"]: s["contribution"] for s in result["steps"]}


def _only(result: dict, step: str, value: float) -> None:
    """``step`` carries the whole gap ``value``; every other replayed step is zero."""
    got = _steps(result)
    assert result["total"] == pytest.approx(value)
    assert got[step] == pytest.approx(value)
    assert all(v == pytest.approx(0.0) for k, v in got.items() if k != step and v is not None)
    assert sum_of_steps(result) == pytest.approx(result["total"])


def test_the_order_is_fixed_and_documented():
    assert [s for s, _ in STEPS] == ["items", "version", "failed", "denominator", "rule", "runs",
                                     "outputs"]  # fmt: skip
    import cafe.reports.explain as mod

    for _, label in STEPS:
        assert label in mod.__doc__


def test_items_in_common(tmp_path):
    # the same outputs on i1-i3; A also holds i4 (right), B i5 (wrong): 75 vs 50
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "W", "i3": "R", "i4": "R"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "W", "i3": "R", "i5": "W"})
    _only(explain(a, b), "items", 25.0)


def test_benchmark_version(tmp_path):
    # the same answers; v2's key makes the second option right on i2: 75 vs 50
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "R", "i3": "W", "i4": "R"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "R", "i3": "W", "i4": "R"},
                         version="v2", answers={"i2": "1"})  # fmt: skip
    _only(explain(a, b), "version", 25.0)


def test_failed_items(tmp_path):
    # one failed output: counted wrong 2/4 = 50, dropped 2/3 = 66.67
    runs = [make_outcome_run(tmp_path / n, {"i1": "R", "i2": "R", "i3": "W", "i4": "F"})
            for n in ("a", "b")]  # fmt: skip
    _only(explain(*runs, against_protocol="failed=dropped"), "failed", 50.0 - 200 / 3)


def test_denominator(tmp_path):
    # one output with no answer text: every item 2/4 = 50, answered only 2/3
    runs = [make_outcome_run(tmp_path / n, {"i1": "R", "i2": "R", "i3": "W", "i4": "U"})
            for n in ("a", "b")]  # fmt: skip
    _only(explain(*runs, against_protocol="denominator=answered"), "denominator", 50.0 - 200 / 3)


def test_scoring_rule(tmp_path):
    # "(A)" is wrong for the official match and right once mapped: 25 vs 50
    runs = [make_outcome_run(tmp_path / n, {"i1": "R", "i2": "L", "i3": "W", "i4": "W"})
            for n in ("a", "b")]  # fmt: skip
    _only(explain(*runs, against_protocol="rule=lenient"), "rule", -25.0)


def test_runs_aggregation(tmp_path):
    # A pooled over 2 runs (4 of 8 right = 50) against B's figure over its one run (3 of 4)
    a = make_outcome_run(tmp_path / "a", {"i1": "RW", "i2": "RW", "i3": "WW", "i4": "RR"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "R", "i3": "W", "i4": "R"})
    _only(explain(a, b), "runs", -25.0)


def test_the_model_outputs_remain(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "R", "i3": "R", "i4": "W"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "W", "i3": "W", "i4": "W"})
    result = explain(a, b)
    _only(result, "outputs", 50.0)
    ci = next(s["ci95"] for s in result["steps"] if s["step"] == "outputs")
    assert ci[0] <= 50.0 <= ci[1]


def test_every_step_at_once_sums_to_the_gap(tmp_path):
    """A: 2 runs, one failed output, one unparsed, v1, an extra item. B: one run, v2 (another
    key on i2), answered-only denominator and failed dropped, lenient rule, other outputs."""
    a = make_outcome_run(tmp_path / "a", {"i1": "RR", "i2": "RR", "i3": "FW", "i4": "UL",
                                          "i5": "LR", "i6": "RR"})  # fmt: skip
    theirs = {"i1": "W", "i2": "R", "i3": "R", "i4": "W", "i5": "L", "i7": "W"}
    b = make_outcome_run(tmp_path / "b", theirs, version="v2", answers={"i2": "1"})
    proto = "failed=dropped,denominator=answered,rule=lenient"
    result = explain(a, b, against_protocol=proto)
    # A's headline: right (official) R,R / R,R / F,W / U,L / L,R / R,R -> 7 of 12
    # B's figure: lenient over answered, not failed: i1 W, i2 R(wrong under v2), i3 R, i4 W,
    # i5 L(right), i7 W -> 2 of 6
    assert result["ours_figure"] == pytest.approx(100 * 7 / 12)
    assert result["against_figure"] == pytest.approx(100 * 2 / 6)
    assert result["total"] == pytest.approx(100 * 7 / 12 - 100 * 2 / 6)
    assert sum_of_steps(result) == pytest.approx(result["total"])
    assert all(s["contribution"] is not None for s in result["steps"])
    nonzero = {k for k, v in _steps(result).items() if abs(v) > 1e-9}
    assert {"items", "version", "failed", "rule", "runs", "outputs"} <= nonzero


def test_against_a_leaderboard_row_without_a_folder(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "R", "i3": "R", "i4": "F"})
    row = {"model": "Tiny-LALM", "group": "LALM", "benchmark": "mmar", "version": "v1",
           "metrics": {"acc": 40.0}, "markers": [], "date": "2026-12-01",
           "source": {"kind": "run", "run_dir": str(tmp_path / "gone"),
                      "manifest_sha256": "0" * 64, "runs": 1}}  # fmt: skip
    board = tmp_path / "lb.yaml"
    board.write_text(yaml.safe_dump({"schema_version": 1, "rows": [row]}), encoding="utf-8")
    result = explain(a, "Tiny-LALM", leaderboard=board, against_protocol="failed=dropped")
    steps = _steps(result)
    # replayable on RUN alone: failed dropped (75 -> 100); the rest of the gap (100 - 40) stays
    assert steps["failed"] == pytest.approx(-25.0) and steps["outputs"] == pytest.approx(60.0)
    assert steps["items"] is None and steps["version"] is None
    assert result["total"] == pytest.approx(35.0)
    assert sum_of_steps(result) == pytest.approx(35.0)
    said = " ".join(result["not_replayed"])
    assert "items in common" in said and "benchmark version" in said
    assert any("is not here" in n for n in result["notes"])
    with pytest.raises(ExplainError, match="neither a run folder nor"):
        explain(a, "Nobody", leaderboard=board)


def test_a_judged_paper_row_says_the_rule_is_not_replayed(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "W"})
    from cafe.reports.leaderboard import load_leaderboard

    board = load_leaderboard(Path(__file__).resolve().parents[1] / "leaderboard.yaml")
    judged = next(r for r in board.rows if "†" in r.markers and r.benchmark == "mmar")
    result = explain(a, f"#{judged.index}", leaderboard=board.path)
    rule = next(s for s in result["steps"] if s["step"] == "rule")
    assert rule["contribution"] is None and "judged" in rule["note"]
    assert result["against_figure"] == pytest.approx(judged.metrics["acc"])
    assert sum_of_steps(result) == pytest.approx(result["total"])


def test_protocol_parse_errors_name_the_setting():
    assert Protocol.parse("rule=lenient,n_runs=2") == Protocol(rule="lenient", n_runs=2)
    with pytest.raises(ExplainError, match="'rule=fuzzy' is not a setting"):
        Protocol.parse("rule=fuzzy")


def test_command_writes_table_json_and_waterfall(tmp_path):
    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "R", "i3": "W", "i4": "U"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "W", "i3": "W", "i4": "U"})
    out = tmp_path / "why"
    argv = [str(a), "--against", str(b), "--out", str(out), "--against-protocol",
            "denominator=answered"]  # fmt: skip
    res = CliRunner().invoke(explain_command, argv)
    assert res.exit_code == 0, res.output
    assert "sum of the steps" in res.output and "denominator" in res.output
    names = {p.name for p in out.iterdir()}
    assert {"explain.json", "explain.md", "explain_waterfall.png", "explain_waterfall.pdf"} <= names
    assert (out / "explain_waterfall.png").stat().st_size > 1000


def _scripted_reply(samples: list) -> Any:
    """A served model's replies, by item (found by its question and choices in the prompt):
    right option text, the right letter (right only for the lenient rule), a wrong option, or
    nothing usable; the larm prompt gets every other item wrong where lalm's was right."""
    import string

    def reply(body: dict) -> str:
        text = json.dumps(body["messages"])
        k, s = next((k, s) for k, s in enumerate(samples)
                    if s["question"] in text and all(c in text for c in s["choices"]))  # fmt: skip
        right = s["choices"].index(s["answer"])
        wrong = s["choices"][(right + 1) % len(s["choices"])]
        larm = "Reasoning:" not in text
        kind = k % 4 if not (larm and k % 4 == 0 and k % 8) else 2
        return [f"{s['answer']}\nReasoning: heard it.", f"{string.ascii_uppercase[right]}",
                f"{wrong}\nReasoning: heard it.", ""][kind]  # fmt: skip

    return reply


def test_a_real_case_two_cafe_runs(tmp_path, monkeypatch):
    """Two `cafe run`s of one served model (the real client, over the OpenAI wire protocol)
    that differ in prompt style, runs and items; B read answered-only with the lenient rule.
    The replay gives each folder's own recorded figure, and the steps add up to the gap."""
    from cafe import api
    from cafe.cli import main
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    data = api.bench(tmp_path / "synth", limit=8, seed=0)
    samples = [json.loads(x) for x in data.read_text(encoding="utf-8").splitlines()]
    common = ["--model", "openai-compatible", "-o", "model=served", "--bench", "synth",
              "--data", str(data), "--judge", "none", "--quiet"]  # fmt: skip
    with OpenAILoopback(reply=_scripted_reply(samples)) as srv:
        for out, extra in (("a", ["--runs", "2", "--prompt-style", "lalm"]),
                           ("b", ["--limit", "6", "--prompt-style", "larm"])):  # fmt: skip
            res = CliRunner().invoke(main, ["run", *common, "--endpoint", srv.url,
                                            "--out", str(tmp_path / out), *extra])  # fmt: skip
            assert res.exit_code == 0, res.output
    acc = {n: json.loads((tmp_path / n / "metrics.json").read_text())["accuracy"] for n in "ab"}
    plain = explain(tmp_path / "a", tmp_path / "b")
    assert plain["ours_figure"] == pytest.approx(acc["a"]["total"]["acc"], abs=0.005)
    assert plain["against_figure"] == pytest.approx(acc["b"]["total"]["acc"], abs=0.005)
    assert sum_of_steps(plain) == pytest.approx(plain["total"])
    read = explain(tmp_path / "a", tmp_path / "b",
                   against_protocol="denominator=answered,rule=lenient")  # fmt: skip
    b = acc["b"]
    answered = b["total"]["total"] - b["unanswered"]
    lenient = b["lenient"]["total"]["correct"]
    assert read["against_figure"] == pytest.approx(100 * lenient / answered)
    assert sum_of_steps(read) == pytest.approx(read["total"])
    steps = _steps(read)
    assert steps["items"] != 0 and steps["denominator"] != 0 and steps["rule"] != 0


def test_against_a_row_whose_folder_is_here_replays_the_folder(tmp_path):
    from cafe.reports.leaderboard import add_run

    a = make_outcome_run(tmp_path / "a", {"i1": "R", "i2": "R", "i3": "R", "i4": "W"})
    b = make_outcome_run(tmp_path / "b", {"i1": "R", "i2": "W", "i3": "W", "i4": "W"})
    board = tmp_path / "mine.yaml"
    row, _ = add_run(b, path=board, name="Other")
    result = explain(a, "Other", leaderboard=board)
    _only(result, "outputs", 50.0)  # 75 vs the folder's 25, every step replayed
    assert result["notes"] == []
    doc = yaml.safe_load(board.read_text(encoding="utf-8"))
    doc["rows"][-1]["metrics"]["acc"] = 30.0  # a row edited by hand
    board.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    edited = explain(a, "Other", leaderboard=board)
    assert edited["total"] == pytest.approx(50.0)
    assert "the row holds 30.00, its folder replays to 25.00" in edited["notes"][0]
