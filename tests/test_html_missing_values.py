"""Comparison pages take missing values (issue 21): a run that lacks a CAFE metric (the random
baseline has no Acc_per, a shuffled control no Err_omit) gives strict JSON (null, never NaN),
a working item browser and "–" for the value, its delta and its interval. Opened in a real
headless Chromium, like tests/test_html_report.py; the screenshots go to tmp_path (or
$CAFE_SCREENSHOT_DIR)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import test_html_report
from click.testing import CliRunner
from test_html_report import Opened

from cafe.reports.cli import report_command
from cafe.reports.html import script_json
from cafe.runner.cli import run_command

browser = test_html_report.browser  # the one module-scoped Chromium fixture

N = 20


def _cafe(command, args: list[str]) -> None:
    res = CliRunner().invoke(command, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("missing")
    common = ["--bench", "synth", "--version", "n50-seed0", "--limit", str(N), "--no-progress"]
    _cafe(run_command, [*common, "--out", str(root / "ref"), "--controls", "shuffled"])
    _cafe(run_command, [*common, "--model", "random", "--out", str(root / "random")])
    return {"ref": root / "ref", "control": root / "ref-ctl-shuffled", "random": root / "random"}


def _cafe_metric(run: Path, key: str):
    return json.loads((run / "metrics.json").read_text())["cafe"][key]


@pytest.mark.parametrize(
    "b,missing,shot",
    [("random", "Acc_per", "compare_base_vs_random.png"),
     ("control", "Err_omit", "compare_real_vs_shuffled.png")],
)  # fmt: skip
def test_compare_page_with_a_missing_cafe_metric(runs, browser, tmp_path, b, missing, shot):
    key = missing.lower()
    assert _cafe_metric(runs[b], key) is None  # the case under test: B has no value for it
    _cafe(report_command, [str(runs["ref"]), str(runs[b]), "--html", "--no-figures"])
    page_file = runs["ref"] / "report" / "index.html"
    html = page_file.read_text()
    assert not re.search(r"\bNaN\b|\bnan\b|Infinity", html)
    o = Opened(browser, page_file)
    deltas = o.page.eval_on_selector_all(
        "#deltas tr", "rs => rs.map(r => Array.from(r.children).map(c => c.textContent))"
    )
    row = next(d for d in deltas if d[0].startswith(missing))
    assert row[2:] == ["–", "–", "–"]  # B, B − A, interval
    acc = next(d for d in deltas if d[0].startswith("Accuracy"))
    assert acc[1] == "100.00" and acc[3].startswith("-")  # the rest still compares
    # the item browser parsed its data: both runs' predictions of every item are listed
    assert o.count() == 2 * N
    out = Path(os.environ.get("CAFE_SCREENSHOT_DIR") or tmp_path)
    o.page.locator("#compare").screenshot(path=str(out / shot))  # the deltas and flips
    assert o.errors == [] and o.outside == []
    o.page.close()


def test_script_json_is_strict_missing_is_null():
    text = script_json({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": -float("inf")}})
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": {"d": None}}
