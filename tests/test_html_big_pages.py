"""A big run's index.html keeps each (item, run)'s output, sections and judge lists gzip-
compressed in pages inside the one file (issue 46): the list shows at once from the light
fields, an item opens its page when shown, a search opens them all. Checked here on a small
real run with the inline limit at 0, beside the same run's inline page in headless Chromium."""

from __future__ import annotations

import json

from click.testing import CliRunner
from playwright.sync_api import expect
from test_html_report import Opened, browser  # noqa: F401  (the module's Chromium fixture)

from cafe.reports.html import PAGE_UNITS, script_json, write_html_report
from cafe.runner.cli import run_command

N_ITEMS, RUNS = 20, 2


def test_paged_details_open_on_demand_and_match_the_inline_page(tmp_path, browser) -> None:  # noqa: F811
    run = tmp_path / "run"
    args = ["--version", "n30-seed0", "--limit", str(N_ITEMS), "--runs", str(RUNS),
            "--quiet", "--out", str(run)]  # fmt: skip
    res = CliRunner().invoke(run_command, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    inline = write_html_report(run, out=tmp_path / "inline", draw=False).path
    paged = write_html_report(run, out=tmp_path / "paged", draw=False, inline_units=0).path
    preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    judged = [json.loads(x) for x in (run / "judgements.jsonl").read_text().splitlines()]
    first = preds[0]
    needle = first["raw_output"][:60]  # the outputs live in the compressed pages only
    spelled = script_json(needle)[1:-1]  # as the page's JSON writes it
    assert spelled in inline.read_text() and spelled not in paged.read_text()
    assert paged.stat().st_size < inline.stat().st_size
    data = paged.read_text().split('id="cafe-data">')[1].split("</script>")[0]
    assert len(json.loads(data)["pages"]) == -(-N_ITEMS * RUNS // PAGE_UNITS)

    pages = {name: Opened(browser, path) for name, path in (("inline", inline), ("paged", paged))}
    lists = {name: o.page.inner_html("#rows tbody") for name, o in pages.items()}
    assert lists["paged"] == lists["inline"]  # the same rows, judge counts included
    o = pages["paged"]
    assert o.count() == N_ITEMS * RUNS
    key = f"{first['sample_id']}", f"0.{first['run_index']}"
    o.open_item(*key)
    expect(o.page.locator("#detail pre.out").first).to_have_text(first["raw_output"])
    j = next(j for j in judged if (j["sample_id"], j["run_index"]) == (first["sample_id"], 0))
    listed = o.page.eval_on_selector_all(
        '#detail ul.events[data-cat="matched"] li', "ls => ls.map(l => l.textContent)"
    )
    assert listed == j["matched_events"]
    # a search over the outputs opens every page, and finds what the inline page finds
    needle = first["raw_output"][:40].lower()
    n = sum(needle in p["raw_output"].lower() for p in preds)
    for page in pages.values():
        page.page.fill("#f-text", needle)
        expect(page.page.locator("#f-count")).to_have_text(
            f"{n} of {N_ITEMS * RUNS} (item, run) outputs"
        )
        assert page.count() == n
    assert not pages["paged"].errors and not pages["paged"].outside


def test_a_long_list_shows_its_first_rows_then_more_on_demand(tmp_path, browser) -> None:  # noqa: F811
    run = tmp_path / "run"
    args = ["--version", "n30-seed0", "--limit", str(N_ITEMS), "--runs", str(RUNS),
            "--quiet", "--out", str(run)]  # fmt: skip
    assert CliRunner().invoke(run_command, args, catch_exceptions=False).exit_code == 0
    page = write_html_report(run, out=tmp_path / "p", draw=False, list_step=15).path
    o = Opened(browser, page)
    total = N_ITEMS * RUNS  # 40: listed 15, then 30, then all 40
    for shown in (15, 30):
        assert o.count() == shown
        expect(o.page.locator("#f-count")).to_have_text(
            f"{total} of {total} (item, run) outputs (the first {shown} listed)"
        )
        o.page.click("#list-more")
    assert o.count() == total and o.page.locator("#list-more").is_hidden()
    o.choose("f-outcome", "wrong")  # the listener answers every synth item right
    assert o.count() == 0 and not o.errors
