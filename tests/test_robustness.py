"""Robustness protocols (issue 37): choice orderings (remapping, the official rules on reordered
items, circular accuracy / consistency / positional bias), audio-necessity labels, --ids, and
reasoning-budget identities. Statistics from hand-built records with hand-computed values; the
end-to-end runs use the reference listener on synth and check plumbing (folders, identities,
which run each figure came from), never what a model happens to answer."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from cafe.adapters.listening import Detected
from cafe.adapters.reference import budget_events
from cafe.benchmarks import choice_order as C
from cafe.benchmarks.base import BENCHMARKS
from cafe.records import Prediction, Sample
from cafe.robustness import budgets as B
from cafe.robustness import orderings as O
from cafe.robustness.necessity import item_list, necessity_section, verdict


def _sample(sid: str, choices: list[str], answer: str) -> Sample:
    return Sample(sid, "synth", "v", f"Which {sid}?", choices, answer, ["/x.wav"])


def _pred(sid: str, answer: str | None, correct: bool, run: int = 0) -> Prediction:
    return Prediction(sid, run, "m", "s", "h", raw_output=answer, answer=answer, correct=correct)


# ------------------------------------------------------------------------------- orderings


def test_rotation_moves_option_i_to_position_i_plus_k():
    assert C.order(4, 0, "rotate", 0, "a") == [0, 1, 2, 3]
    assert C.order(4, 1, "rotate", 0, "a") == [3, 0, 1, 2]  # option 0 now at B
    assert C.order(4, 3, "rotate", 0, "a") == [1, 2, 3, 0]
    s = C.permute_sample(_sample("a", ["w", "x", "y", "z"], "x"), 1, "rotate", 0)
    assert s.choices == ["z", "w", "x", "y"] and s.answer == "x"
    assert s.meta[C.ORDER_KEY] == [3, 0, 1, 2]


def test_shuffle_is_a_seeded_permutation_and_ordering_zero_the_original():
    a = C.order(5, 2, "shuffle", 7, "item")
    assert sorted(a) == [0, 1, 2, 3, 4] and a == C.order(5, 2, "shuffle", 7, "item")
    assert C.order(5, 0, "shuffle", 7, "item") == list(range(5))
    assert {tuple(C.order(5, 2, "shuffle", s, "item")) for s in range(6)} != {tuple(a)}
    with pytest.raises(ValueError, match="mode"):
        C.identity(1, 2, "reverse", 0)


def test_official_letter_rule_scores_the_reordered_item():
    # MMSU's official rule reads a letter and compares that option's TEXT with answer_gt: under
    # rotation 1 the answer "dog" moves from B to C
    mmsu = BENCHMARKS.get("mmsu")()
    s = C.permute_sample(_sample("a", ["cat", "dog", "cow", "pig"], "dog"), 1, "rotate", 0)
    assert s.choices == ["pig", "cat", "dog", "cow"]
    assert mmsu.is_correct("C", s.answer, s.choices)
    assert not mmsu.is_correct("B", s.answer, s.choices)  # B was right in the original order
    # MMAU / MMAR's official rule matches the option text: unaffected by the order
    mmau = BENCHMARKS.get("mmau")()
    assert mmau.is_correct("dog", s.answer, s.choices)
    assert not mmau.is_correct("cat", s.answer, s.choices)


def test_choices_section_hand_computed():
    base = [_sample("a", ["p", "q"], "p"), _sample("b", ["p", "q"], "q")]
    rot = [C.permute_sample(s, 1, "rotate", 0) for s in base]  # ["q", "p"] for both
    # a: right under both orderings (option p each time) -> circular, consistent
    # b: "p" in the original (wrong), "q" under rotation (right) -> neither
    orig = [_pred("a", "p", True), _pred("b", "p", False)]
    turned = [_pred("a", "p", True), _pred("b", "q", True)]
    ident = C.identity(1, 2, "rotate", 0)
    sec = O.choices_section(base, [
        {"spec": {**ident, "k": 0}, "samples": base, "predictions": orig},
        {"spec": ident, "samples": rot, "predictions": turned},
    ])  # fmt: skip
    assert [o["acc"] for o in sec["by_ordering"]] == [50.0, 100.0]
    assert sec["by_ordering"][1]["vs_original"]["diff"] == 50.0
    assert sec["circular"]["acc"] == 50.0 and sec["circular"]["vs_original"]["diff"] == 0.0
    assert sec["consistency"]["acc"] == 50.0
    # positions chosen: original A, A; rotated: a chose "p" at B, b chose "q" at A
    bias = sec["positional_bias"]
    assert bias["observed"] == {"A": 3, "B": 1} and bias["expected"] == {"A": 2.0, "B": 2.0}
    assert bias["chi2"] == 1.0 and bias["df"] == 1  # (3-2)^2/2 + (1-2)^2/2
    assert bias["p"] == pytest.approx(0.3173, abs=1e-4)


def test_an_unanswered_item_is_neither_consistent_nor_right():
    base = [_sample("a", ["p", "q"], "p")]
    ident = C.identity(1, 2, "rotate", 0)
    sec = O.choices_section(base, [
        {"spec": {**ident, "k": 0}, "samples": base, "predictions": [_pred("a", "p", True)]},
        {"spec": ident, "samples": base, "predictions": []},
    ])  # fmt: skip
    assert sec["circular"]["acc"] == 0.0 and sec["consistency"]["acc"] == 0.0


# ------------------------------------------------------------------------------- necessity


def test_verdict_precedence():
    assert verdict(True, True, True, False) == "answerable from text"
    assert verdict(True, False, False, True) == "answerable from text"
    assert verdict(False, True, False, False) == "recoverable from a caption"
    assert verdict(True, False, False, False) == "needs the audio"
    assert verdict(True, None, False, False) == "needs the audio"
    assert verdict(False, None, False, False) == "never right"


def test_necessity_section_accuracy_on_needed_items():
    samples = [_sample(i, ["p", "q"], "p") for i in "abcd"]
    acc = {
        "real": {"a": 100.0, "b": 100.0, "c": 0.0, "d": 100.0},
        "caption": {"a": 0.0, "b": 100.0, "c": 0.0, "d": 0.0},
        "text-only": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 100.0},
        "silence": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0},
    }
    sec = necessity_section(samples, acc, {"a", "b", "c", "d"}, {})
    assert sec["labels"] == {"a": "needs the audio", "b": "recoverable from a caption",
                             "c": "never right", "d": "answerable from text"}  # fmt: skip
    # needed: a (right) and c (wrong) -> 50
    assert sec["audio_needed"]["n"] == 2 and sec["audio_needed"]["acc"] == 50.0
    assert sec["accuracy"]["real"] == 75.0
    assert item_list(sec) == "a\n"
    assert item_list(sec, ["never right", "needs the audio"]) == "a\nc\n"


# --------------------------------------------------------------------------------- budgets


def test_budgets_parse_and_identity():
    assert B.parse_budgets("0, 256,1024,256") == [0, 256, 1024]
    for bad in ("-1", "x", ""):
        with pytest.raises(ValueError):
            B.parse_budgets(bad)
    ident = B.budget_identity(256, "forcing")
    assert ident["generation"] == {"reasoning_budget": 256}
    with pytest.raises(ValueError, match="cannot be swept"):
        B.budget_method(object, "m")


def test_reference_budget_keeps_the_events_that_fit():
    events = [Detected(0.0, 0.5, "tone", f0=440.0), Detected(1.0, 1.5, "tone", f0=880.0)]
    one = len(f"1. [0.00, 0.50]: {events[0].describe()}".split())
    assert budget_events(events, 0) == []
    assert budget_events(events, one) == events[:1]
    assert budget_events(events, 10_000) == events


def test_sweep_section_orders_by_budget():
    pts = [{"budget": b, "method": "f", "metrics": {"accuracy": {"total": {"acc": a, "total": 4}},
            "cafe": {"acc_per": a / 2}}} for b, a in ((64, 75.0), (0, 25.0))]  # fmt: skip
    sec = B.sweep_section(pts)
    assert sec["budgets"] == [0, 64]
    assert [r["acc"] for r in sec["rows"]] == [25.0, 75.0]
    assert [r["acc_per"] for r in sec["rows"]] == [12.5, 37.5]


def test_the_sweeps_decay_is_acc_per_against_length_with_its_interval():
    # bins (x, Acc_per): 4 usable, one sparse (left out, as the decay section leaves it out)
    bins = [{"x": x, "acc_per": y, "sparse": s}
            for x, y, s in ((10, 90.0, False), (20, 80.0, False), (30, 85.0, False),
                            (40, 60.0, False), (50, 99.0, True))]  # fmt: skip
    r, ci = B.decay_r({"bins": bins})
    # by hand: x mean 25, y mean 78.75; sxy = -15*11.25 - 5*1.25 + 5*6.25 + 15*-18.75 = -425;
    # sxx = 500; syy = 126.5625 + 1.5625 + 39.0625 + 351.5625 = 518.75
    assert r == pytest.approx(-425 / (500 * 518.75) ** 0.5)
    z, se = math.atanh(r), 1 / math.sqrt(4 - 3)  # Fisher's z over the 4 bins
    assert ci == pytest.approx([math.tanh(z - 1.959964 * se), math.tanh(z + 1.959964 * se)],
                               abs=1e-4)  # fmt: skip
    assert B.decay_r({"bins": bins[:3]})[1] is None  # three bins: r, but no interval
    assert B.decay_r({"bins": bins[:2]}) == (None, None) and B.decay_r(None) == (None, None)
    row = B.sweep_section([{"budget": 0, "method": "f", "metrics": {"decay": {"bins": bins}}}])
    assert row["rows"][0]["decay_r"] == pytest.approx(r) and "length" in row["labels"]["decay_r"]


# --------------------------------------------------------------------- end to end on synth


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def _json(path):
    return json.loads(path.read_text())


def test_permute_choices_end_to_end(tmp_path, cache):
    from cafe.runner.cli import run_command

    out = tmp_path / "r"
    base = ["--version", "n20-seed0", "--limit", "6", "--no-progress", "--judge", "none"]
    res = CliRunner().invoke(run_command, [*base, "--out", str(out), "--permute-choices", "3"])
    assert res.exit_code == 0, res.output
    spec = _json(out / "manifest.json")["spec"]
    assert "permutation" not in spec and "ids" not in spec  # the original run's identity as before
    for k in (1, 2):
        d = tmp_path / f"r-perm-rotate{k}of3"
        assert _json(d / "manifest.json")["spec"]["permutation"] == {
            "k": k, "of": 3, "mode": "rotate", "seed": 0}  # fmt: skip
        orig = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        shown = [json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines()]
        for a, b in zip(orig, shown, strict=True):
            n = len(a["choices"])
            assert b["choices"] == [a["choices"][(j - k) % n] for j in range(n)]
            assert b["answer"] == a["answer"]
    sec = _json(out / "metrics.json")["choices"]
    assert [o["k"] for o in sec["by_ordering"]] == [0, 1, 2] and sec["units"] == 6
    assert sec["by_ordering"][1]["run_dir"] == str((tmp_path / "r-perm-rotate1of3").resolve())
    assert "circular accuracy" in res.output and "chi-square" in res.output


def test_necessity_export_and_ids(tmp_path, cache):
    from cafe.robustness.cli import necessity_command
    from cafe.runner.cli import run_command

    out = tmp_path / "r"
    base = ["--version", "n20-seed0", "--limit", "6", "--no-progress", "--judge", "none"]
    assert CliRunner().invoke(run_command, [*base, "--out", str(out)]).exit_code == 0
    ids = tmp_path / "ids.txt"
    res = CliRunner().invoke(necessity_command, [str(out), "--export", str(ids), "--no-progress"])
    assert res.exit_code == 0, res.output
    sec = _json(out / "metrics.json")["necessity"]
    assert sec["items"] == 6 and sum(sec["counts"].values()) == 6
    cap = _json(tmp_path / "r-ctl-caption" / "manifest.json")["spec"]["control"]
    assert cap == {"name": "caption", "seed": 0, "captions": "benchmark reference captions"}
    listed = ids.read_text().split()
    assert listed == [i for i, lab in sec["labels"].items() if lab == "needs the audio"]
    # the list filters a benchmark: only those items run, the list in the identity
    ids.write_text("synth-00003\nsynth-00001\n")
    res = CliRunner().invoke(
        run_command,
        [
            *base[:2],
            "--no-progress",
            "--judge",
            "none",
            "--ids",
            str(ids),
            "--out",
            str(tmp_path / "f"),
        ],
    )
    assert res.exit_code == 0, res.output
    got = [json.loads(x)["id"] for x in (tmp_path / "f" / "samples.jsonl").read_text().split("\n")
           if x]  # fmt: skip
    assert got == ["synth-00001", "synth-00003"]  # the benchmark's order
    assert _json(tmp_path / "f" / "manifest.json")["spec"]["ids"]["n"] == 2
    from cafe.robustness.steps import run_necessity

    assert run_necessity(tmp_path / "f", progress=False)["items"] == 2  # the --ids items only
    ctl = tmp_path / "f-ctl-silence" / "samples.jsonl"
    assert [json.loads(x)["id"] for x in ctl.read_text().split("\n") if x] == got
    ids.write_text("nope\n")
    res = CliRunner().invoke(
        run_command, [*base[:2], "--ids", str(ids), "--out", str(tmp_path / "g")]
    )
    assert res.exit_code != 0 and "not in the benchmark: nope" in res.output


def test_sweep_one_folder_per_budget(tmp_path, cache):
    from cafe.robustness.cli import sweep_command

    out = tmp_path / "sw"
    board = tmp_path / "board.yaml"
    args = ["--version", "n20-seed0", "--limit", "6", "--budgets", "0,64", "--out", str(out),
            "--no-progress", "--leaderboard", str(board)]  # fmt: skip
    res = CliRunner().invoke(sweep_command, args)
    assert res.exit_code == 0, res.output
    for b in (0, 64):
        spec = _json(out / f"budget-{b}" / "manifest.json")["spec"]
        assert spec["generation"]["reasoning_budget"] == b
    sec = _json(out / "sweep.json")
    assert sec["budgets"] == [0, 64]
    for row, b in zip(sec["rows"], (0, 64), strict=True):
        acc = _json(out / f"budget-{b}" / "metrics.json")["accuracy"]["total"]["acc"]
        assert row["acc"] == acc and row["run_dir"].endswith(f"budget-{b}")
    # budget 0: the reference perceives nothing (its perception is the empty list's line)
    preds = [json.loads(x) for x in (out / "budget-0" / "predictions.jsonl").read_text().split("\n")
             if x]  # fmt: skip
    assert preds and all("no sound event above the background" in p["raw_output"] for p in preds)
    assert (out / "sweep.png").exists()
    import yaml

    rows = [r for r in yaml.safe_load(board.read_text())["rows"] if r["source"]["kind"] == "run"]
    assert [(r["model"], r["source"]["reasoning_budget"]) for r in rows] == [
        ("reference @ budget 0", 0), ("reference @ budget 64", 64)]  # fmt: skip


def test_sections_survive_a_later_step_in_a_fresh_registry(tmp_path, cache, monkeypatch):
    # a second command (another process: the robustness sections unregistered) keeps both
    import cafe.folder.sections as S
    from cafe.robustness.steps import run_necessity
    from cafe.runner.cli import run_command

    out = tmp_path / "r"
    base = ["--version", "n20-seed0", "--limit", "4", "--no-progress", "--judge", "none"]
    res = CliRunner().invoke(run_command, [*base, "--out", str(out), "--permute-choices", "2"])
    assert res.exit_code == 0, res.output
    monkeypatch.setattr(S, "_SECTIONS", {k: v for k, v in S._SECTIONS.items()
                                         if k not in ("choices", "necessity")})  # fmt: skip
    run_necessity(out, progress=False)
    assert {"choices", "necessity"} <= set(_json(out / "metrics.json"))


def test_api_budgets_reach_the_wire(tmp_path, monkeypatch):
    # the provider's own fields, on the real protocols (loopback servers), the budget added to
    # the output tokens (thinking counts in them)
    import numpy as np

    from cafe.adapters import ADAPTERS, ModelCard
    from cafe.audio import write_wav
    from cafe.records import Request
    from cafe.testing.loopback import GeminiLoopback, OpenAILoopback

    clip = tmp_path / "c.wav"
    write_wav(clip, np.zeros(1600, dtype=np.float32))

    def req(budget):
        return Request("s", 0, [{"role": "user", "content": [
            {"type": "audio", "path": str(clip)}, {"type": "text", "text": "Q?\n(A) x\n(B) y"}]}],
            [str(clip)], {"max_new_tokens": 64, "temperature": 0.0, "reasoning_budget": budget},
            1, "lalm", "t")  # fmt: skip

    fast = {"base_delay": 0.01, "max_delay": 0.05, "timeout_s": 60.0}  # a loaded machine
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-key-abcdef")
    with GeminiLoopback(reply=lambda b: "A") as srv:
        card = ModelCard(name="g", adapter="gemini", checkpoint="gemini-2.5-flash", engine="g")
        ad = ADAPTERS.get("gemini")(card, endpoint=srv.url, **fast)
        assert ad.generate([req(256)])[0].error is None
    cfg = srv.requests[0]["generationConfig"]
    # the SDK (GenerateContentConfig) serialises the nested field by its proto name, which the
    # API's JSON parser takes as well as the camel-case one
    assert list(cfg["thinkingConfig"].values()) == [256] and cfg["maxOutputTokens"] == 320
    with OpenAILoopback(reply=lambda b: "A") as srv:
        card = ModelCard(name="o", adapter="openai-compatible", checkpoint="m", engine="o")
        ad = ADAPTERS.get("openai-compatible")(card, endpoint=srv.url, **fast)
        ad.generate([req(0), req(4096)])
        ad.close()
    sent = sorted((b["max_tokens"], b["reasoning_effort"]) for b in srv.requests)  # concurrent
    assert sent == [(64, "minimal"), (64 + 4096, "medium")]
    from cafe.clients.thinking import reasoning_effort

    assert reasoning_effort(1024) == "low" and reasoning_effort(8193) == "high"


def test_reports_show_both_sections(tmp_path, cache):
    from cafe.reports.folder import folder_table
    from cafe.reports.run_report import write_run_report
    from cafe.robustness.steps import run_necessity
    from cafe.runner.cli import run_command

    out = tmp_path / "runs" / "r"
    base = ["--version", "n20-seed0", "--limit", "4", "--no-progress", "--judge", "none"]
    res = CliRunner().invoke(run_command, [*base, "--out", str(out), "--permute-choices", "2"])
    assert res.exit_code == 0, res.output
    run_necessity(out, progress=False)
    sec = _json(out / "metrics.json")
    report = write_run_report(out, html=True)
    summary = (report / "summary.md").read_text()
    circ = sec["choices"]["circular"]["acc"]
    assert "## Choice order (2 orderings, rotate; percent)" in summary
    assert f"| circular accuracy (right under every ordering) | {circ:.2f} |" in summary
    need = sec["necessity"]["counts"]["needs the audio"]
    assert "## Audio necessity (4 items" in summary and f"| needs the audio | {need} |" in summary
    assert (report / "figures" / "choices.png").exists()
    assert (report / "figures" / "necessity.png").exists()
    page = (report / "index.html").read_text()
    assert 'id="sec-choices"' in page and "circular accuracy (right under every ordering)" in page
    table = folder_table(tmp_path / "runs")
    assert f"- r: circular accuracy {circ:.2f}" in table


def test_a_sweep_point_of_failures_stops_the_sweep(tmp_path, cache):
    # every clip unreadable (empty files): the run of budget 0 fails every item, and the sweep
    # stops naming the budget, with no table made of it
    from cafe.robustness.cli import sweep_command

    bench = tmp_path / "bench"
    (bench / "audio").mkdir(parents=True)
    rows = [{"id": f"x{i}", "audio_path": f"audio/x{i}.wav", "question": "How many?",
             "choices": ["1", "2"], "answer": "1"} for i in range(2)]  # fmt: skip
    (bench / "synth.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for r in rows:
        (bench / r["audio_path"]).write_bytes(b"")
    out = tmp_path / "sw"
    args = ["--budgets", "0", "--out", str(out), "--no-progress", "--judge", "none",
            "--data", str(bench / "synth.jsonl")]  # fmt: skip
    res = CliRunner().invoke(sweep_command, args)
    assert res.exit_code == 1 and "budget 0: most items failed in" in res.output, res.output
    assert (out / "budget-0" / "manifest.json").exists() and not (out / "sweep.json").exists()


def test_a_reordered_sakura_item_shows_and_is_judged_in_its_new_order(tmp_path):
    # SAKURA writes its options inside the instruction, and its prompt and official judge read
    # that text: under rotation 1 the prompt must list the options rotated, and the judge's
    # label must carry the letter the answer now has ("(a) dog" -> "(b) dog")
    from cafe.benchmarks import sakura
    from cafe.prompts import build_messages, load_template
    from tests.sakura_helpers import write_folder

    bench = BENCHMARKS.get("sakura")()
    samples = bench.load(str(write_folder(tmp_path))).samples
    original = next(s for s in samples if s.id == "Animal-a1-single")
    s = C.permute_sample(original, 1, "rotate", 0)
    assert s.choices == ["owl", "dog", "cat", "cow"] and s.answer == "dog"
    text = build_messages(load_template("sakura"), s)[-1]["content"][-1]["text"]
    assert "(a) owl (b) dog (c) cat (d) cow" in text and "(a) dog (b) cat" not in text
    fields = bench.official_judge.fields(s)
    assert fields["answer"] == "(b) dog" and "(b) dog (c) cat" in fields["question"]
    assert sakura.official_response(s, "[GROUND_TRUTH_ANSWER]") == "(b) dog"
    # the original order is untouched: its saved text and label, spaces and all
    assert C.permute_sample(original, 0, "rotate", 0).meta["instruction"] == (
        original.meta["instruction"])  # fmt: skip
    g = next(x for x in samples if x.id == "Gender-g1-single")
    assert bench.official_judge.fields(g)["answer"] == " (a) Female"
    assert bench.official_judge.fields(C.permute_sample(g, 1, "rotate", 0))["answer"] == (
        " (b) Female")  # fmt: skip


def test_a_sweep_written_before_the_decay_r_still_prints():
    # sweep.json files from before decay_r carry decay_rho: `cafe report` shows their table
    # with the decay column empty instead of failing on the missing key
    row = {"budget": 0, "n": 4, "acc": 50.0, "acc_ci95": None, "acc_per": None,
           "acc_per_ci95": None, "err_per": None, "err_per_ci95": None, "decay_rho": -0.5,
           "reasoning_tokens": 3.0, "method": "f"}  # fmt: skip
    line = B.format_sweep({"rows": [row]}).splitlines()[2]  # the row, above the footnote
    assert line.split()[:3] == ["0", "4", "50.00"] and "-0.5" not in line


@pytest.mark.parametrize("options", [["A", "B", "C", "D"], ["yes", "no", "yes", "no"]])
def test_a_model_that_always_answers_c_is_position_biased_whatever_the_option_texts(options):
    """Issue 45: choice-order figures mapped an answer by its option TEXT, so options that are
    letters or repeat gave a model that always answers "C" consistency 100 (letters) or all its
    answers at A (repeats: the first "yes"). By position: under 4 rotations it chose position C
    8 times (2 items), 4 different underlying options per item."""
    base = [_sample(sid, options, options[1]) for sid in ("a", "b")]
    orderings = []
    for k in range(4):
        shown = [C.permute_sample(s, k, "rotate", 0) for s in base]
        # the parser maps the reply "C" to the option TEXT "C" wherever it is shown (or to
        # position C's text, "yes" or "no"); the reply itself named position C
        preds = [Prediction(s.id, 0, "m", "s", "h", raw_output="C", answer_text="C",
                            answer=s.choices[2] if options[0] != "A" else "C")
                 for s in shown]  # fmt: skip
        ident = C.identity(k, 4, "rotate", 0) if k else {**C.identity(1, 4, "rotate", 0), "k": 0}
        orderings.append({"spec": ident, "samples": shown, "predictions": preds})
    sec = O.choices_section(base, orderings, resamples=50)
    assert sec["consistency"]["acc"] == 0.0  # options 2, 1, 0, 3 under rotations 0..3
    bias = sec["positional_bias"]
    assert bias["observed"] == {"A": 0, "B": 0, "C": 8, "D": 0}
    # expected 2 per position; chi-square = (8-2)^2/2 + 3 * (0-2)^2/2 = 18 + 6 = 24
    assert bias["chi2"] == 24.0


def test_a_reply_without_a_letter_on_options_that_read_as_letters_is_unmapped():
    s = _sample("a", ["A", "B"], "A")
    assert O.chosen_option(_pred("a", "A", True), s) == (0, 0)  # raw_output "A": position A
    shown = C.permute_sample(s, 1, "rotate", 0)  # ["B", "A"]
    assert O.chosen_option(_pred("a", "A", False), shown) == (0, 1)  # position A shows "B"
    p = Prediction("a", 0, "m", "s", "h", raw_output="the first one", answer="A")
    assert O.chosen_option(p, shown) is None


def test_permute_choices_beyond_the_distinct_orderings_is_capped_and_said(tmp_path, cache):
    """Issue 45: --permute-choices 100000 planned 99,999 folders for items of 4 options; rotate
    shows 4 different orderings: asked for 9, 3 folders are run and the cap is said."""
    from cafe.runner.cli import run_command

    out = tmp_path / "r"
    base = ["--version", "n20-seed0", "--limit", "2", "--no-progress", "--judge", "none"]
    res = CliRunner().invoke(run_command, [*base, "--out", str(out), "--permute-choices", "9"])
    assert res.exit_code == 0, res.output
    made = sorted(p.name for p in tmp_path.iterdir() if "-perm-" in p.name)
    assert made == [f"r-perm-rotate{k}of4" for k in (1, 2, 3)]  # synth items: 4 options
    assert "at most 4 options" in res.output and "running 4" in res.output
    assert _json(out / "metrics.json")["choices"]["orderings"] == 4
