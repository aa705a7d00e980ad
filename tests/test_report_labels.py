"""Report figures and pages that say what they are (issue 38): a comparison of folders with
different run counts uses every run of each and says so, an all-zero breakdown figure still
shows its values, and the listening section is a labelled table like the others; in headless
Chromium, a comparison's figures line up side by side, ids stay on one line, and the
leaderboard page stays one screen wide."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.runner.main import run_with

register()
CHROMIUM = os.environ.get("CAFE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    """A: 3 runs of 4 items, runs 1 and 2 made wrong by hand (accuracy over runs 33.33; run 0
    alone 100); B: 1 run of the same items, all right (the tone listener hears them)."""
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    kw = dict(data=str(meta), progress=False, judge="none")
    run_with("tone", "tone", out=tmp_path / "A", runs=3, **kw)
    run_with("tone", "tone", out=tmp_path / "B", **kw)
    preds = tmp_path / "A" / "predictions.jsonl"
    rows = [json.loads(x) for x in preds.read_text().splitlines()]
    for r in rows:
        r["correct"] = r["run_index"] == 0
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "A", tmp_path / "B"


def test_a_comparison_of_three_runs_with_one_uses_every_run_and_says_so(tmp_path, monkeypatch):
    from cafe.reports.html import Source, compare_data, compare_html

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    a, b = _runs(tmp_path)
    c = compare_data(Source.load(a, "A"), Source.load(b, "B"), resamples=50)
    acc = next(d for d in c["deltas"] if d["metric"] == "acc")
    assert acc["a"] == pytest.approx(100 * 4 / 12) and acc["b"] == 100.0  # not A's run 0: 100
    assert c["pairs"] == 4 and c["runs"] == {"a": 3, "b": 1}
    assert "A holds 3 run(s), B 1" in compare_html(c)


def test_an_all_zero_breakdown_figure_shows_its_values() -> None:
    """Bars of width 0 draw nothing: each bar's value is written beside it, 0.0 included."""
    from cafe.reports import figures

    zero = {"correct": 0, "total": 4, "acc": 0.0}
    accuracy = {"total": zero, "breakdowns": {"dimension": {"pitch": zero, "timbre": zero}}}
    fig = figures.draw_breakdown("t", accuracy)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.texts] == ["0.0", "0.0"]
    assert "dashed: total 0.00" in ax.get_xlabel()


def test_the_listening_section_is_a_labelled_table() -> None:
    from cafe.reports.html import sections_html

    section = {"chance": 25.0, "controls": {"silence": {
        "real_acc": 100.0, "acc": 25.0, "gap": 75.0, "ci95": [62.5, 87.5], "n": 40,
        "cafe": {"acc_per": 0.0, "err_per": 100.0, "err_use": 0.0, "judged": 40}}}}  # fmt: skip
    html = sections_html({"listening": section})
    head, _, dump = html.partition("<details>")  # the raw keys stay, collapsed
    assert "<th>silence</th><td>100.00</td><td>25.00</td><td class=big>75.00</td>" in head
    assert "[62.50, 87.50]" in head and "neutral 0.00" in head
    assert "<details open>" not in html


def test_pages_line_up_and_fit_in_chromium(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner
    from playwright.sync_api import sync_playwright

    from cafe.reports.cli import leaderboard_command, report_command

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    a, b = _runs(tmp_path)
    # A's hand-edited predictions make its sections stale (no figure is drawn from a stale
    # section: cafe.reports.freshness); resuming re-scores them, so both runs have figures
    run_with("tone", "tone", out=a, runs=3, data=str(tmp_path / "b" / "meta.jsonl"),
             progress=False, judge="none")  # fmt: skip
    res = CliRunner().invoke(report_command, [str(a), str(b), "--html"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    board = tmp_path / "board.html"
    res = CliRunner().invoke(leaderboard_command, ["html", "--out", str(board)])
    assert res.exit_code == 0, res.output
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (make test does it)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto((a / "report" / "index.html").resolve().as_uri())
        # each figure kind: A's and B's on one row, A left of B
        rows = page.eval_on_selector_all(
            "#figures .figpair",
            "ps => ps.map(p => Array.from(p.children).map(f => "
            "[Math.round(f.getBoundingClientRect().top), f.getBoundingClientRect().left]))",
        )
        assert rows and all(len(r) == 2 and r[0][0] == r[1][0] and r[0][1] < r[1][1] for r in rows)
        page.wait_for_selector("#rows tbody tr")
        lines = page.eval_on_selector_all(
            "#rows tbody tr td:first-child a", "as => as.map(a => a.getClientRects().length)"
        )
        assert lines and set(lines) == {1}  # no id wraps onto a second line
        assert page.evaluate("document.documentElement.scrollWidth") <= 1300
        page.goto(board.resolve().as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 1300
        # "All rows" fits its column (it was 2,339 px): long metric names break at "_"
        sw, cw = page.eval_on_selector("#rows-all", "e => [e.scrollWidth, e.clientWidth]")
        assert sw <= cw
        browser.close()
