"""Output parsing and answer extraction on hand-written outputs of every style."""

from __future__ import annotations

import pytest

from cafe.parsing import extract_answer, parse_sections, reasoning_text

MPAR2 = (
    "<thinking><perception>1. [0.00, 1.20]: a dog barks twice\n"
    "2. [1.50, 3.00]: a car passes from left to right</perception>\n"
    "<reasoning>1. Sub-question: how many barks are there? Answer: two\n"
    "2. Sub-question: which comes first? Answer: the dog</reasoning>\n"
    "<review>1. Evidence check: both events heard. 2. Logic check: order holds.</review>"
    "</thinking>\n<answer>the dog barking</answer>"
)


def test_mpar2_sections_events_and_steps() -> None:
    s = parse_sections(MPAR2)
    assert s.format_ok
    assert s.perception_events == [
        {"start": 0.0, "end": 1.2, "text": "a dog barks twice"},
        {"start": 1.5, "end": 3.0, "text": "a car passes from left to right"},
    ]
    assert s.steps == [
        "Sub-question: how many barks are there? Answer: two",
        "Sub-question: which comes first? Answer: the dog",
    ]
    assert s.review == "1. Evidence check: both events heard. 2. Logic check: order holds."
    assert s.answer == "the dog barking"
    assert s.think is not None and s.think.startswith("<perception>")
    assert reasoning_text(MPAR2, s) == s.think
    # by hand: the sections are the literal text between their tags, the think part everything
    # inside <thinking>...</thinking>
    assert s.perception == MPAR2[len("<thinking><perception>") : MPAR2.index("</perception>")]
    assert s.reasoning == (
        "1. Sub-question: how many barks are there? Answer: two\n"
        "2. Sub-question: which comes first? Answer: the dog"
    )
    think = MPAR2[len("<thinking>") : MPAR2.index("</thinking>")]
    assert s.think == think and reasoning_text(MPAR2, s) == think


@pytest.mark.parametrize(
    "text",
    [
        "Sure! " + MPAR2,  # text outside the tags
        MPAR2 + " done",
        MPAR2.replace("<review>", "<reviewx>").replace("</review>", "</reviewx>"),
        MPAR2.replace("<reasoning>", "<r>").replace("</reasoning>", "</r>"),
        MPAR2 + "<answer>again</answer>",
        MPAR2.replace("</thinking>\n", "") + "</thinking>",  # answer inside thinking
    ],
)
def test_format_is_strict(text: str) -> None:
    assert parse_sections(text).format_ok is False


def test_format_allows_whitespace_between_tags() -> None:
    assert parse_sections("\n  " + MPAR2.replace("><", ">\n\n<") + "\n").format_ok


def test_think_answer_tags_case_insensitive_first_answer() -> None:
    s = parse_sections("<THINK>it sounds high</THINK><ANSWER>high</ANSWER><answer>low</answer>")
    assert (s.think, s.answer, s.format_ok) == ("it sounds high", "high", False)
    s = parse_sections("<thinking>hmm</thinking>\n<answer> B </answer>")
    assert (s.think, s.answer) == ("hmm", "B")
    s = parse_sections("<think>long thought</think>\nThe answer is rain.")
    assert s.answer == "The answer is rain." and reasoning_text("x", s) == "long thought"
    s = parse_sections("<think>cut off before an answer")
    assert s.answer is None


def test_reasoning_line_style() -> None:
    text = "a car horn\nReasoning: a short honk is heard at 2 s."
    s = parse_sections(text)
    assert s.answer == "a car horn" and s.reasoning == "a short honk is heard at 2 s."
    assert reasoning_text(text, s) == "a short honk is heard at 2 s."
    assert parse_sections("**Reasoning:** only reasoning").answer is None


def test_plain_answer_and_empty() -> None:
    assert parse_sections("  rain \n").answer == "rain"
    assert reasoning_text("rain", parse_sections("rain")) == "rain"
    assert parse_sections("").answer is None and parse_sections(None).answer is None


CHOICES = ["a dog barking", "a car horn", "rain", "a dog"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A Car  Horn", ("a car horn", "ok")),
        ("rain.", ("rain", "ok")),
        ("B", ("a car horn", "ok")),
        ("(C)", ("rain", "ok")),
        ("D.", ("a dog", "ok")),
        ("b", ("a car horn", "ok")),
        ("(B) a car horn", ("a car horn", "ok")),
        ("A. a dog barking", ("a dog barking", "ok")),
        ("Answer: rain", ("rain", "ok")),
        ("I clearly hear a car horn twice", ("a car horn", "ok")),
        # "a dog" is inside "a dog barking": the longer found choice wins
        ("It is a dog barking loudly", ("a dog barking", "ok")),
        ("a car horn, then rain", (None, "unmapped")),  # two choices: ambiguous
        ("E", (None, "unmapped")),  # a letter past the choices
        ("thunder", (None, "unmapped")),
        ("", (None, "no_answer")),
        (None, (None, "no_answer")),
    ],
)
def test_extract_answer(text: str | None, expected: tuple[str | None, str]) -> None:
    assert extract_answer(text, CHOICES) == expected


def test_extract_answer_duplicate_choices_map_to_the_text() -> None:
    assert extract_answer("Rain", ["rain", "snow", "rain"]) == ("rain", "ok")
    assert extract_answer("C", ["rain", "snow", "rain"]) == ("rain", "ok")


@pytest.mark.parametrize(
    ("text", "choices"),
    [
        # "2" is a substring of "12" but not one of its words: both are named, so ambiguous
        ("2 or 12", ["2", "12", "3"]),
        # "cat" is a substring of "bobcat", not one of its words: both are named
        ("cat or bobcat", ["cat", "bobcat"]),
        # the letter's option plus another option: the text names two choices
        ("(A) cat and dog", ["cat", "dog"]),
    ],
)
def test_extract_answer_naming_two_choices_is_ambiguous(text: str, choices: list[str]) -> None:
    # a prediction that names two options must not be mapped to one (and so scored correct)
    assert extract_answer(text, choices) == (None, "unmapped")


def test_extract_answer_choice_only_inside_a_longer_one_still_yields() -> None:
    assert extract_answer("12 barks", ["2", "12"]) == ("12", "ok")
    # "a dog" is words of "a dog barking": as under the official rule, the longer choice wins
    assert extract_answer("a dog, or maybe a dog barking", CHOICES) == ("a dog barking", "ok")
    assert extract_answer("(B) the dog barks twice", ["cat", "dog barks"]) == ("dog barks", "ok")
