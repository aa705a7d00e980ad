"""report/index.html and the leaderboard page, opened from disk in a real headless Chromium.

The run folders come from the real pipeline: `cafe run` on the synth benchmark with the reference
listener and the rule judge. Run B gets a prompt template without the choices, so the listener
cannot name an option: every answer is unparsed (no_answer) and wrong. Hand counts come from the
synth generator's layout: item i has dimension DIMENSIONS[i % 5] and difficulty
DIFFICULTIES[(i % 15) // 5] (easy, medium, hard).

Chromium is Debian's (`apt-get install chromium`, which `make test` does when it is missing); a
machine without it fails these tests rather than skipping them."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, Page, expect, sync_playwright

from cafe.reports.cli import leaderboard_command, report_command
from cafe.reports.html import event_spans, pack, script_json, sections_html
from cafe.runner.cli import run_command

N_ITEMS, RUNS = 45, 2
# Debian's browser; CAFE_CHROMIUM names another build
CHROMIUM = os.environ.get("CAFE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _cafe(command, args: list[str]) -> str:
    res = CliRunner().invoke(command, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("html-runs")
    a, b = root / "A", root / "B"
    common = ["--version", "n50-seed0", "--limit", str(N_ITEMS), "--quiet"]
    _cafe(run_command, [*common, "--runs", str(RUNS), "--out", str(a)])
    template = root / "no-choices.txt"
    template.write_text("{question}\n")
    _cafe(run_command, [*common, "--prompt-template", str(template), "--out", str(b)])
    return {"A": a, "B": b}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (make test does it)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


class Opened:
    """A page opened from disk, recording console errors and every request it makes; any
    request that is not the page's own file or a data: URI is blocked and recorded."""

    def __init__(self, browser: Browser, path: Path, fragment: str = ""):
        self.url = path.resolve().as_uri()
        self.page: Page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route("**/*", self._route)
        self.page.goto(self.url + fragment)

    def _route(self, route, request) -> None:  # type: ignore[no-untyped-def]
        if request.url.split("#")[0] == self.url or request.url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(request.url)
            route.abort()

    def open_item(self, item_id: str, run: str) -> None:
        """Follow a deep link; the page renders the item on hashchange, so wait for it."""
        self.page.goto(f"{self.url}#item={item_id}&run={run}")
        expect(self.page.locator("#detail .pred").first).to_have_attribute(
            "data-key", f"item={item_id}&run={run}"
        )

    def count(self) -> int:
        return self.page.locator("#rows tbody tr:not([hidden])").count()

    def choose(self, select_id: str, value: str) -> None:
        self.page.select_option(f"#{select_id}", value)


def _judgements(run: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for line in (run / "judgements.jsonl").read_text().splitlines():
        d = json.loads(line)
        out[(d["sample_id"], d["run_index"])] = d
    return out


def test_run_page_items_filters_highlights_audio_offline(runs, browser) -> None:
    out = _cafe(report_command, [str(runs["A"])])  # index.html is written by default
    page_path = runs["A"] / "report" / "index.html"
    assert f"wrote {page_path}" in out
    assert "index.html" in (runs["A"] / "report" / "summary.md").read_text()
    html = page_path.read_text()
    assert html.count("<svg") >= 2 and "Accuracy by breakdown" in html
    assert not re.search(r"(src|href|url)\s*[=(]\s*[\"']?\s*(https?:)?//", html)  # nothing remote
    o = Opened(browser, page_path)
    pg = o.page
    # every (item, run) is listed and opens its own detail
    assert o.count() == N_ITEMS * RUNS
    keys = pg.eval_on_selector_all("#rows tbody tr", "rs => rs.map(r => r.dataset.key)")
    want = {f"item=synth-{i:05d}&run=0.{r}" for i in range(N_ITEMS) for r in range(RUNS)}
    assert set(keys) == want
    for key in sorted(want):  # each one opens its own detail, by clicking its row
        pg.click(f'#rows tr[data-key="{key}"] a')
        expect(pg.locator("#detail .pred")).to_have_attribute("data-key", key)  # hashchange
    # filters narrow to hand counts: counting items are i % 5 == 0 (9 of 45), hard ones have
    # i % 15 in 10..14; both: items 10, 25, 40, in each of the 2 runs
    o.choose("f-bd-dimension", "counting")
    assert o.count() == 9 * RUNS
    o.choose("f-bd-difficulty", "hard")
    assert o.count() == 3 * RUNS
    shown = pg.eval_on_selector_all(
        "#rows tbody tr:not([hidden])", "rs => rs.map(r => r.dataset.key)"
    )
    assert {k.split("&")[0] for k in shown} == {f"item=synth-000{i}" for i in (10, 25, 40)}
    o.choose("f-outcome", "wrong")  # the listener answers every synth item right
    assert o.count() == 0
    assert "0 of 90" in pg.inner_text("#f-count")
    # the judge's categories, highlighted in the model's text
    judged = _judgements(runs["A"])
    hallucinated = {k: j["error_matched"] for k, j in judged.items() if j["error_matched"]}
    assert hallucinated, "the rule judge found no hallucination in the first 45 synth items"
    (sid, r), events = sorted(hallucinated.items())[0]
    o.open_item(sid, f"0.{r}")
    marks = pg.eval_on_selector_all(
        "#detail mark.ev", "ms => ms.map(m => [m.dataset.cat, m.textContent, m.className])"
    )
    hal = [m for m in marks if m[0] == "hallucinated"]
    assert (
        hal and {m[1] for m in hal} <= set(events) and all("ev-hallucinated" in m[2] for m in hal)
    )
    listed = pg.eval_on_selector_all(
        '#detail ul.events[data-cat="hallucinated"] li', "ls => ls.map(l => l.textContent)"
    )
    assert listed == events
    # judge filter: exactly the (item, run)s with a hallucinated event
    pg.goto(o.url)
    o.choose("f-cat", "hallucinated")
    assert o.count() == len(hallucinated)
    # the audio element points at the sample's clip, which exists
    o.open_item("synth-00007", "0.1")
    src = pg.get_attribute("#detail audio", "src")
    assert not src.startswith(("/", "file:", "data:"))  # a relative link
    resolved = pg.eval_on_selector("#detail audio", "a => a.src")
    clip = Path(urllib.parse.unquote(urllib.parse.urlparse(resolved).path))
    sample = json.loads((runs["A"] / "samples.jsonl").read_text().splitlines()[7])
    assert clip.exists() and clip == Path(sample["audio"][0])
    # sort by reasoning length: the first row has the largest token count
    pg.goto(o.url)
    o.choose("f-sort", "len-desc")
    tokens = [
        int(t)
        for t in pg.eval_on_selector_all(
            "#rows tbody tr td:nth-child(6)", "c => c.map(x => x.textContent)"
        )
    ]
    assert tokens == sorted(tokens, reverse=True) and len(tokens) == N_ITEMS * RUNS
    # text search
    o.choose("f-sort", "")
    pg.fill("#f-text", "synth-00012")
    expect(pg.locator("#f-count")).to_contain_text(f"{RUNS} of")  # after the typing pause
    assert o.count() == RUNS
    assert o.errors == [] and o.outside == []
    o.page.close()


def test_compare_page_flips_and_deltas(runs, browser, tmp_path: Path) -> None:
    a = tmp_path / "A"
    shutil.copytree(runs["A"], a)
    _cafe(report_command, [str(a), str(runs["B"]), "--html", "--no-figures"])
    o = Opened(browser, a / "report" / "index.html")
    pg = o.page
    # B answered nothing (no choices in its prompt): its one run flips every item right -> wrong
    text = pg.inner_text("#compare")
    assert f"{N_ITEMS} (item, run) pairs over {N_ITEMS} items" in text
    deltas = pg.eval_on_selector_all(
        "#deltas tr", "rs => rs.map(r => Array.from(r.children).map(c => c.textContent))"
    )
    acc = next(d for d in deltas if d[0].startswith("Accuracy"))
    assert acc[1:4] == ["100.00", "0.00", "-100.00"]
    assert acc[4] == "[-100.00, -100.00]"  # every resample of items gives the same delta
    assert o.count() == N_ITEMS * RUNS + N_ITEMS
    o.choose("f-flip", "right_to_wrong")
    assert o.count() == 2 * N_ITEMS  # A's run 0 and B's run 0 of each item
    o.choose("f-flip", "wrong_to_right")
    assert o.count() == 0
    o.choose("f-flip", "")
    o.choose("f-ps", "no_answer")
    assert o.count() == N_ITEMS
    # side by side: A's and B's run 0 of one item
    pg.goto(f"{o.url}#item=synth-00003&run=1.0")
    expect(pg.locator("#detail .pred")).to_have_count(2)
    cols = pg.eval_on_selector_all("#detail .pred", "ps => ps.map(p => p.dataset.key)")
    assert cols == ["item=synth-00003&run=0.0", "item=synth-00003&run=1.0"]
    assert pg.inner_text("#detail .pred:nth-child(2) .ps") == "no_answer"
    assert o.errors == [] and o.outside == []
    o.page.close()


def test_script_breakout_and_odd_ids_render_as_text(tmp_path: Path, browser) -> None:
    """Hand-made edge case: model text that tries to close the data <script>, and an id that
    needs escaping in the fragment."""
    from report_runs import make_run

    run = make_run(tmp_path / "run")
    lines = (run / "predictions.jsonl").read_text().splitlines()
    evil = "</script><script>window.pwned = 1</script><!-- & \u2028 end"
    d = json.loads(lines[0])
    d["raw_output"] = evil
    d["sample_id"] = "a1"
    lines[0] = json.dumps(d)
    (run / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    _cafe(report_command, [str(run), "--no-figures"])
    o = Opened(browser, run / "report" / "index.html", "#item=a1&run=0.0")
    assert o.page.evaluate("window.pwned") is None
    assert o.page.inner_text("#detail pre.out") == evil
    assert o.errors == [] and o.outside == []
    o.page.close()


def test_leaderboard_page_marks_sorting_provenance(runs, browser, tmp_path: Path) -> None:
    board = tmp_path / "leaderboard.yaml"
    _cafe(leaderboard_command, ["add", str(runs["A"]), "--leaderboard", str(board)])
    from report_runs import make_run  # an MMAR-shaped run with CAFE: it joins Table 1

    mmar = make_run(tmp_path / "mmar-run", model="Tiny-LALM")
    _cafe(leaderboard_command, ["add", str(mmar), "--leaderboard", str(board)])
    page_path = tmp_path / "lb.html"
    _cafe(leaderboard_command, ["html", "--leaderboard", str(board), "--out", str(page_path)])
    o = Opened(browser, page_path)
    pg = o.page
    # Table 1, LALM group, with Tiny-LALM (Acc_per 55.50, Err_per 20.25, Err_use 10.00,
    # Err_omit 35.12, acc 56.25) among the paper's rows: it takes the four CAFE bests; Omni-R1
    # keeps the best MMAR accuracy (62.10); seconds are Omni-R1's Acc_per 51.21, MiMo-Audio's
    # Err_per 27.70 and Omni-R1's Err_use 12.90
    lalm = '#table1 tbody[data-group="LALM"]'
    best = pg.eval_on_selector_all(f"{lalm} td.best", "c => c.map(x => x.textContent)")
    assert sorted(best) == sorted(["55.50", "20.25", "10.00", "35.12", "62.10"])
    second = pg.eval_on_selector_all(f"{lalm} td.second", "c => c.map(x => x.textContent)")
    assert {"51.21", "27.70", "12.90"} <= set(second)
    first_model = f"{lalm} tr:not(.group) td:first-child"
    pg.click('#table1 th[data-col="1"]')  # Acc_per: highest first
    assert pg.inner_text(first_model) == "Tiny-LALM"
    pg.click('#table1 th[data-col="1"]')  # again: lowest first
    assert pg.inner_text(first_model).startswith("Qwen2-Audio-Instruct")  # 8.27
    pg.click('#table1 th[data-col="2"]')  # Err_per (lower is better): lowest first
    rows = pg.eval_on_selector_all(first_model, "c => c.map(x => x.textContent)")
    assert rows[:2] == ["Tiny-LALM", "MiMo-Audio"]
    # the user's MMAR row sits in Table 1's LALM group, with its provenance
    tiny = pg.locator('#table1 tbody[data-group="LALM"] tr.run')
    assert tiny.count() == 1 and tiny.locator("td").first.inner_text() == "Tiny-LALM"
    assert tiny.locator("td.num").first.inner_text() == "55.50"  # its Acc_per
    mmar_sha = __import__("hashlib").sha256((mmar / "manifest.json").read_bytes()).hexdigest()
    assert mmar_sha[:12] in tiny.locator("td.prov").inner_text()
    # the user's run row carries its provenance
    sha = __import__("hashlib").sha256((runs["A"] / "manifest.json").read_bytes()).hexdigest()
    row = pg.locator("#rows-all tr.run").filter(has_text="reference")
    assert row.count() == 1
    prov = row.locator("td.prov")
    # the folder as seen from the leaderboard file (no machine path on a page meant to be shared)
    seen = Path(__import__("os").path.relpath(runs["A"].resolve(), board.resolve().parent))
    assert f"run folder {seen.as_posix()};" in prov.inner_text() and sha[:12] in prov.inner_text()
    assert str(runs["A"].resolve()) not in prov.inner_text()
    assert prov.locator("code").get_attribute("title") == sha
    assert "rule-v2" in prov.inner_text()
    # markers keep their meaning
    dagger = pg.locator('#table1 sup.marker:text("†")').first
    assert "GPT-5" in dagger.get_attribute("title")
    assert o.errors == [] and o.outside == []
    o.page.close()


# pure functions -------------------------------------------------------------------------------
def test_event_spans_exact_then_by_label_and_time() -> None:
    text = "1. [0.20, 0.60]: tone (high)\n2. [1.50, 1.90]: tone (low)\nso a hiss answers it"
    lists = {
        "matched": ["tone [1.48-1.92]"],  # rule judge: ground-truth name; binds to line 2
        "hallucinated": ["a hiss"],  # quoted from the text
        "neutral": ["tone [0.21-0.61]"],
        "missed": ["click [3.0-3.2]"],  # never in the text
    }
    spans = event_spans(text, lists)
    got = {(text[a:b], cat) for a, b, cat, _ in spans}
    assert got == {("tone", "matched"), ("a hiss", "hallucinated"), ("tone", "neutral")}
    matched = next(s for s in spans if s[2] == "matched")
    assert text.rfind("\n", 0, matched[0]) == text.index("\n")  # on the second line


def test_pack_and_script_json_round_trip() -> None:
    raw = "<think>long reasoning text here</think><answer>B</answer>"
    sec = {"think": "long reasoning text here", "answer": "B", "steps": ["long reasoning text"]}
    packed = pack(sec, raw)
    assert packed == {"think": {"@": [7, 31]}, "answer": "B", "steps": [{"@": [7, 26]}]}
    blob = script_json({"x": "</script><!--&"})
    assert "<" not in blob and ">" not in blob and "&" not in blob
    assert json.loads(blob) == {"x": "</script><!--&"}


def test_summary_shows_every_section_and_labelled_variants() -> None:
    """Sections and keys the page has no label for still show; a labelled variant (lenient)
    appears under its own label beside the headline."""
    metrics = {
        "accuracy": {
            "rule": "official MMAR match on the answer text",
            "total": {"correct": 3, "total": 8, "acc": 37.5},
            "lenient": {
                "label": "lenient (choice-mapped)",
                "total": {"correct": 5, "total": 8, "acc": 62.5},
            },
            "parse_status": {"ok": 6, "no_answer": 2},
        },
        "rubrics": {"coverage": 0.75, "per_item": [{"id": "x", "score": 2}]},
    }
    page = sections_html(metrics)
    assert "Accuracy (official MMAR match on the answer text)" in page and "37.50" in page
    assert "lenient (choice-mapped)" in page and "62.50" in page and "5/8" in page
    assert "ok 6 · no_answer 2" in page
    assert 'id="sec-rubrics"' in page and "coverage" in page and "0.75" in page and "score" in page


def test_embed_audio_only_when_asked_and_only_short_clips(runs, tmp_path: Path) -> None:
    import soundfile as sf

    from cafe.reports.html import Source, items_blob

    src = Source.load(runs["A"])
    linked, _ = items_blob([src], tmp_path)
    assert all(not a["src"].startswith("data:") for it in linked for a in it["audio"])
    durations = {s.id: sf.info(s.audio[0]).duration for s in src.samples}
    cut = sorted(durations.values())[len(durations) // 2]
    embedded, _ = items_blob([src], tmp_path, embed_audio_s=cut)
    for it in embedded:
        a = it["audio"][0]
        short = durations[it["id"]] <= cut
        assert a["src"].startswith("data:audio/wav;base64,") == short, it["id"]
        if short:
            wav = Path(src.samples[0].audio[0]).parent / a["name"]
            assert a["src"].endswith(__import__("base64").b64encode(wav.read_bytes()).decode())


def test_listening_signals_show_when_the_run_has_them(tmp_path: Path) -> None:
    from report_runs import make_run

    from cafe.reports.html import Source, signals_html
    from cafe.store import RunStore

    run = make_run(tmp_path / "run")
    assert signals_html(Source.load(run)) == ""  # no rubric, cues or listening section yet
    gap = {"controls": {"silence": {"gap": 18.75, "ci95": [6.25, 31.25]}}}
    RunStore(run).update_metrics("listening", gap)
    page = signals_html(Source.load(run))
    assert 'id="sec-signals"' in page and "listening gap (silence)" in page
    assert "18.75" in page and "[6.25, 31.25]" in page and "56.25" in page  # accuracy beside it


# hostile markup -------------------------------------------------------------------------------
#: planted in every field below; each part tries another way to run script in the page
PAYLOAD = (
    "x<code><img src=x onerror=window.__pwned=1>\"'><svg onload=window.__pwned=1>"
    "</script><script>window.__pwned=1</script><!-- javascript:window.__pwned=1 "
    "<a href=javascript:alert(1)>link</a><iframe srcdoc='<script>alert(1)</script>'>"
)
#: a folder name cannot hold "/": the parts of the payload that can
FOLDER = "run<code><img src=x onerror=window.__pwned=1>'\"><svg onload=alert(1)>"
#: every field the pages show that comes from a leaderboard row, a folder name or a run's
#: records (the report's list of planted fields)
PLANTED_FIELDS = [
    "run folder name",
    "manifest: model.name, model.adapter, model.group?, bench.version, prompt.style, "
    "prompt.template_hash, checkpoint.path, generation (keys and values), judge.name, git_commit, "
    "created, status, an extra key",
    "samples.jsonl: id, question, choices, answer, audio path (a javascript: URL), meta "
    "(modality, category values), error",
    "predictions.jsonl: model, raw_output, answer, parse_status, error, sections (keys, values)",
    "judgements.jsonl: judge, raw_reply, reason, status, the five event lists",
    "metrics.json: accuracy breakdown names and values, cafe.mode, cafe.judge, "
    "cafe.template_hash, an unknown section (its name, keys and values)",
    "leaderboard row: model, label, version, markers (symbol, meaning), notes, source.ref, "
    "source.table, source.run_dir (a run folder added with `cafe leaderboard add`), "
    "source.judge, source.cafe_mode",
]


def _hostile_run(root: Path, name: str) -> Path:
    from report_runs import make_run

    from cafe.records import Judgement, Prediction, Sample
    from cafe.store import JUDGEMENTS, PREDICTIONS, RunStore

    P = PAYLOAD
    run = make_run(root / name, model="Tiny" + P)
    store = RunStore(run)
    m = store.read_manifest()
    m["model"].update(adapter=P)
    m["bench"]["version"] = P
    m["prompt"] = {"style": P, "template_hash": P}
    m.update(checkpoint={"path": P}, generation={P: P}, judge={"name": P}, git_commit=P,
             created=P, status=P, extra=P)  # fmt: skip
    store.write_manifest(m)
    store.write_samples(
        [Sample(id=f"h{i}" + P, bench="mmar", version="v1", question=P, choices=[P, "y"],
                answer=P, audio=["javascript:window.__pwned=1", f"/a/{P}.wav"],
                meta={"modality": P, "category": P}, error=P if i else None)
         for i in range(2)]
    )  # fmt: skip
    with store.writer(PREDICTIONS) as w:
        w.write_many(
            Prediction(sample_id=f"h{i}" + P, run_index=0, model=P, prompt_style=P,
                       template_hash=P, raw_output=P + " the end", sections={P: P, "answer": P},
                       answer=P, parse_status=P, correct=bool(i), error=P, reasoning_tokens=5)
            for i in range(2)
        )  # fmt: skip
    with store.writer(JUDGEMENTS) as w:
        w.write_many(
            Judgement(sample_id=f"h{i}" + P, run_index=0, judge=P, template_hash=P, raw_reply=P,
                      matched_events=[P], error_matched=[P], error_use=[P], neutral_events=[P],
                      missed_events=[P], status=P, reason=P)
            for i in range(2)
        )  # fmt: skip
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["accuracy"]["breakdowns"] = {"modality": {P: {"correct": 1, "total": 2, "acc": 50.0}}}
    metrics["cafe"].update(mode=P, judge={"judge": P}, template_hash=P)
    metrics[P] = {P: P, "list": [P], "table": {P: {P: P}}}
    from cafe.folder.sections import STAMP, stamp

    for name, section in metrics.items():  # stamped on the records written above, as cafe is
        if isinstance(section, dict) and STAMP in section:
            section[STAMP] = stamp(name, metrics, store.input_digest)
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


class Hostile(Opened):
    """An Opened page that also records dialogs (alert, confirm) the page tried to open."""

    def __init__(self, browser: Browser, path: Path, fragment: str = ""):
        self.dialogs: list[str] = []
        self._browser = browser
        super().__init__(browser, path, fragment)

    def _route(self, route, request) -> None:  # type: ignore[no-untyped-def]
        if not hasattr(self, "_dialogs_on"):
            self._dialogs_on = True
            self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        super()._route(route, request)

    def assert_inert(self) -> None:
        assert self.page.evaluate("window.__pwned") is None
        assert self.dialogs == []
        assert self.page.locator("script:not([type])").count() == 1  # the page's own, only
        assert (
            self.page.locator("img, iframe, [onerror], [onload], a[href^=javascript]").count() == 0
        )
        csp = self.page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
        script_src = next(p for p in csp.split(";") if p.strip().startswith("script-src"))
        assert "'sha256-" in script_src and "unsafe" not in script_src


def test_planted_markup_never_runs_in_any_page(tmp_path: Path, browser) -> None:
    assert len(PLANTED_FIELDS) == 7
    a = _hostile_run(tmp_path, FOLDER)
    b = _hostile_run(tmp_path, "B" + FOLDER)
    _cafe(report_command, [str(a)])  # with figures: titles carry the model name
    o = Hostile(browser, a / "report" / "index.html")
    o.assert_inert()
    assert "Tiny" + PAYLOAD in o.page.inner_text("#summary")  # shown as text
    ids = o.page.eval_on_selector_all("#rows tbody tr", "rs => rs.map(r => r.dataset.key)")
    ids = [k for k in ids if k.startswith("item=h")]  # make_run's own items are plain
    assert len(ids) == 2
    for key in ids:  # every item's detail: question, choices, outputs, judge lists, audio
        o.page.click(f'#rows tr[data-key="{key.replace(chr(34), chr(92) + chr(34))}"] a')
        expect(o.page.locator("#detail .pred")).to_have_attribute("data-key", key)
        expect(o.page.locator("#detail pre.out")).to_have_text(PAYLOAD + " the end")
        o.page.click("#detail details.sections summary")
        o.page.click("#detail details.raw summary")
        o.assert_inert()
    o.page.fill("#f-text", "onerror")  # the search box renders matches too
    expect(o.page.locator("#f-count")).to_contain_text("2 of")
    o.assert_inert()
    o.page.close()
    # the comparison page: both runs' names, deltas and flips
    _cafe(report_command, [str(a), str(b), "--html", "--no-figures"])
    o = Hostile(browser, a / "report" / "index.html", "#item=x&run=1.0")
    assert "Comparison" in o.page.inner_text("#compare")
    o.assert_inert()
    o.page.close()
    # the leaderboard: a hand-written hostile row and a run folder added from its hostile name
    from cafe.reports.leaderboard import PACKAGED

    board = tmp_path / "lb.yaml"
    text = (
        Path(PACKAGED)
        .read_text()
        .replace(
            "markers:\n",
            f"markers:\n  - {{symbol: {json.dumps(PAYLOAD)}, meaning: {json.dumps(PAYLOAD)}}}\n",
            1,
        )
    )
    row = {
        "model": PAYLOAD, "label": "L" + PAYLOAD, "group": "LALM", "benchmark": "mmar",
        "version": PAYLOAD, "metrics": {"acc": 50.0}, "markers": [PAYLOAD], "notes": PAYLOAD,
        "source": {"kind": "paper", "ref": PAYLOAD, "table": PAYLOAD}, "date": "2026-01",
    }  # fmt: skip
    board.write_text(text + f"  - {json.dumps(row)}\n")
    _cafe(leaderboard_command, ["add", str(a), "--leaderboard", str(board)])
    lb = yaml_rows(board)
    assert lb[-1]["source"]["run_dir"].endswith(FOLDER) and lb[-2]["source"]["ref"] == PAYLOAD
    assert lb[-1]["source"]["judge"] == PAYLOAD and lb[-1]["source"]["cafe_mode"] == PAYLOAD
    page_path = tmp_path / "lb.html"
    _cafe(leaderboard_command, ["html", "--leaderboard", str(board), "--out", str(page_path)])
    o = Hostile(browser, page_path)
    o.assert_inert()
    prov = o.page.inner_text("#rows-all")
    assert f"{PAYLOAD} Table {PAYLOAD}" in prov and FOLDER in prov and "L" + PAYLOAD in prov
    for th in o.page.locator("th.sortable").all()[:8]:  # sorting moves rows: still text
        th.click()
    o.assert_inert()
    assert o.errors == [] and o.outside == []
    o.page.close()


def yaml_rows(path: Path) -> list[dict]:
    import yaml

    return yaml.safe_load(path.read_text())["rows"]
