"""Each benchmark owns its default prompt (Benchmark.default_prompt_style): SAKURA's instruction
with its inline options as is; MMAU-Pro per category (closed: the question and its choices; open:
free text; instruction following: the instruction as is). `cafe run` uses it unless
--prompt-style names another; the paper's styles stay available, and reports label a
benchmark's own style as not the paper's."""

from __future__ import annotations

import dataclasses
import json

from click.testing import CliRunner
from sakura_helpers import write_folder as sakura_folder
from test_mmau_pro import ROWS, write_folder

from cafe.benchmarks.mmau_pro import MMAUPro
from cafe.benchmarks.sakura import SAKURA
from cafe.cli import main
from cafe.prompts import PromptTemplate, build_request, load_template, style_label


def _text(sample, style):
    return build_request(sample, style, 0, 0, {}).messages[-1]["content"][-1]["text"]


def test_sakura_prompt_is_the_instruction_as_is(tmp_path):
    samples = SAKURA().load(str(sakura_folder(tmp_path / "s"))).samples
    g1 = next(s for s in samples if s.id == "Gender-g1-single")
    assert SAKURA.default_prompt_style == "sakura"
    assert _text(g1, "sakura") == "Please identify the gender [g1s]. (a) Female (b) Male"
    assert "Choices:" in _text(g1, "lalm")  # the paper's style: still there
    # on an item without an instruction the style writes the options inline the same way
    other = dataclasses.replace(g1, meta={})
    assert _text(other, "sakura") == "Please identify the gender [g1s]. (a) Female (b) Male"
    assert style_label("sakura") == "sakura (sakura's own prompt, not the paper's)"


def test_mmau_pro_prompt_per_category(tmp_path):
    by_id = {s.id: s for s in MMAUPro().load(str(write_folder(tmp_path / "d"))).samples}
    assert _text(by_id["c1"], "mmau-pro") == (
        "What is heard [c1]?\nChoose one of these options:\ndog barking\nviolin solo\nrain falling"
    )
    assert _text(by_id["o1"], "mmau-pro") == "What is heard [o1]?\nAnswer in your own words."
    assert _text(by_id["i1"], "mmau-pro") == "What is heard [i1]?"  # the instruction as is
    # each form's text is part of the style's identity
    main_text_only = PromptTemplate("mmau-pro", load_template("mmau-pro").text, None, "x")
    assert load_template("mmau-pro").hash != main_text_only.hash


def test_cafe_run_uses_the_benchmark_prompt_unless_told(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    data = write_folder(tmp_path / "d", ROWS[:3])
    for style, out in ((None, "own"), ("lalm", "paper")):
        args = ["run", "--model", "random", "--bench", "mmau-pro", "--data", str(data),
                "--out", str(tmp_path / out), "--no-progress"]  # fmt: skip
        res = CliRunner().invoke(main, args + (["--prompt-style", style] if style else []))
        assert res.exit_code == 0, res.output
    for out, style in (("own", "mmau-pro"), ("paper", "lalm")):
        preds = (tmp_path / out / "predictions.jsonl").read_text().splitlines()
        assert {json.loads(p)["prompt_style"] for p in preds} == {style}
