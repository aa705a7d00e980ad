"""Prompt styles: text layout per SPEC §6, the authors' exact strings, hashes, overrides."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cafe.prompts import PROMPT_STYLES, TEMPLATES_DIR, build_request, load_template, style_label
from cafe.records import Sample

SAMPLE = Sample(
    id="s1",
    bench="mmar",
    version="v1",
    question="What sound comes first? ",
    choices=["a dog barking", "a car horn", "rain"],
    answer="rain",
    audio=["/data/a.wav"],
)


def _text(style: str) -> str:
    req = build_request(SAMPLE, style, 0, 0, {})
    return req.messages[-1]["content"][-1]["text"]


def test_all_styles_registered() -> None:
    assert set(PROMPT_STYLES.names()) == {
        "lalm", "larm", "rl-implicit", "rl-explicit", "mpar2", "authors-mmar", "authors-mmau",
        "lalm-verbatim", "rl-implicit-verbatim", "rl-explicit-verbatim",
        "sakura", "mmau-pro",  # benchmarks' own defaults (tests/test_benchmark_prompts.py)
        "mmsu-letter", "airbench-letter",  # the letter rule's benchmarks' own prompts
        "bigbenchaudio",  # the spoken question alone (tests/test_bigbenchaudio.py)
        "voicebench",  # the spoken instruction alone, no text (tests/test_voicebench.py)
        "starbench",  # STAR-Bench's own input (tests/test_starbench.py)
    }  # fmt: skip


def test_authors_texts_are_exact() -> None:
    choices = "a dog barking\na car horn\nrain"
    assert _text("authors-mmar") == (
        "What sound comes first?\nSelect one option from the provided choices:\n" + choices
    )
    assert _text("authors-mmau") == (
        "What sound comes first?Select one option from the provided choices:\n" + choices
    )
    req = build_request(SAMPLE, "authors-mmar", 0, 0, {})
    assert req.messages[0] == {"role": "system", "content": "You are a helpful assistant."}


def test_lalm_order_question_instruction_reasoning_line_then_choices() -> None:
    text = _text("lalm")
    lines = text.split("\n")
    assert lines[0] == "What sound comes first?"
    assert '"Reasoning:"' in lines[1] and "first" in lines[1]
    assert lines[-3:] == ["a dog barking", "a car horn", "rain"]  # plain, no letters


@pytest.mark.parametrize(
    ("style", "needles"),
    [
        ("larm", ["Choose one option"]),
        ("mpar2", ["Choose one option"]),
        ("rl-implicit", ["<ANSWER></ANSWER>"]),
        ("rl-explicit", ["<THINK></THINK>", "<ANSWER></ANSWER>"]),
    ],
)
def test_styles_ask_for_their_format(style: str, needles: list[str]) -> None:
    text = _text(style)
    assert text.startswith("What sound comes first?\n")
    assert text.endswith("a dog barking\na car horn\nrain")
    for n in needles:
        assert n in text
    assert "<THINK>" not in text or style == "rl-explicit"


def test_request_layout_and_hash() -> None:
    req = build_request(SAMPLE, "larm", 2, 9, {"max_new_tokens": 8})
    assert req.run_index == 2 and req.seed == 9 and req.generation == {"max_new_tokens": 8}
    assert len(req.messages) == 1 and req.messages[0]["role"] == "user"
    parts = req.messages[0]["content"]
    assert parts[0] == {"type": "audio", "path": "/data/a.wav"} and parts[1]["type"] == "text"
    expected = hashlib.sha256((TEMPLATES_DIR / "larm.txt").read_bytes()).hexdigest()
    assert req.template_hash == expected and req.prompt_style == "larm"
    system_text = (
        "You are a helpful assistant.\n\n" + (TEMPLATES_DIR / "authors-mmar.txt").read_text()
    )
    assert load_template("authors-mmar").hash == hashlib.sha256(system_text.encode()).hexdigest()


def test_user_template_file_with_literal_braces(tmp_path: Path) -> None:
    tpl = tmp_path / "t.txt"
    tpl.write_text('Reply as JSON {"answer": ...}.\n{question}\n{choices}\n')
    req = build_request(SAMPLE, "lalm", 0, 0, {}, template=tpl)
    text = req.messages[-1]["content"][-1]["text"]
    assert (
        text
        == 'Reply as JSON {"answer": ...}.\nWhat sound comes first?\n'
        + "a dog barking\na car horn\nrain"
    )
    assert req.template_hash == hashlib.sha256(tpl.read_bytes()).hexdigest()
    bad = tmp_path / "bad.txt"
    bad.write_text("no placeholder")
    with pytest.raises(ValueError, match="question"):
        load_template("lalm", bad)
    with pytest.raises(KeyError, match="did you mean"):
        load_template("lalmm")


VERBATIM = ("written exactly as it appears among the choices", "the text of that option")


@pytest.mark.parametrize("style", ["lalm", "rl-implicit", "rl-explicit"])
def test_paper_styles_ask_only_what_appendix_b_asks(style: str) -> None:
    """The paper's B.x prompts ask for the selected option, not for its text verbatim: the
    defaults add nothing that steers outputs towards the official string match."""
    text = _text(style)
    assert not any(v in text for v in VERBATIM)
    assert style_label(style) == style


@pytest.mark.parametrize(
    ("style", "base", "phrase"),
    [
        ("lalm-verbatim", "lalm", ", " + VERBATIM[0]),
        ("rl-implicit-verbatim", "rl-implicit", ", " + VERBATIM[1] + ","),
        ("rl-explicit-verbatim", "rl-explicit", ", " + VERBATIM[1] + ","),
    ],
)
def test_helpful_variants_are_named_styles_labelled_not_the_papers(style, base, phrase) -> None:
    text = _text(style)
    assert phrase in text
    # the variant is its base text plus the verbatim request, nothing else changed
    assert text.replace(phrase, "") == _text(base)
    assert style_label(style) == f"{style} (variant of {base}, not the paper's prompt)"
    assert load_template(style).hash != load_template(base).hash
