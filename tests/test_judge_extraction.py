"""Judge reply parsing and the extraction prompt: malformed, partial, refused, fenced replies."""

from __future__ import annotations

import json

import pytest

from cafe.judge import JUDGES
from cafe.judge.extraction import KEYS, build_prompt, parse_reply
from cafe.prompts import text_template

FULL = {k: [] for k in KEYS} | {"matched_events": ["dog barks"], "missed_events": ["bell"]}


def test_plain_json_is_parsed():
    lists, reason = parse_reply(json.dumps(FULL))
    assert reason is None and lists["matched_events"] == ["dog barks"]
    assert lists["missed_events"] == ["bell"] and set(lists) == set(KEYS)


def test_code_fence_and_trailing_text_are_tolerated():
    text = "Here you go:\n```json\n" + json.dumps(FULL) + "\n```\nHope this helps {not json}"
    lists, reason = parse_reply(text)
    assert reason is None and lists["matched_events"] == ["dog barks"]
    lists, _ = parse_reply(json.dumps(FULL) + "\nNote: the bell {is faint}.")
    assert lists["missed_events"] == ["bell"]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("I cannot help with that request.", "no JSON object"),
        ("", "empty reply"),
        ('{"matched_events": ["a"], "error_matched": [', "no JSON object"),  # truncated
        (json.dumps({k: [] for k in KEYS if k != "error_use"}), "'error_use' is a required"),
        (json.dumps(FULL | {"neutral_events": "rain"}), "neutral_events"),  # not a list
        (json.dumps(FULL | {"matched_events": [{"event": "dog"}]}), "matched_events/0"),
        ("[1, 2, 3]", "no JSON object"),
    ],
)
def test_bad_replies_give_a_reason(text, fragment):
    lists, reason = parse_reply(text)
    assert lists is None
    assert fragment in reason


def test_template_names_every_key_and_placeholder():
    text, digest = text_template("extraction")
    for key in KEYS:
        assert key in text
    for ph in ("{question}", "{answer}", "{caption}", "{output}"):
        assert ph in text
    assert len(digest) == 64
    prompt = build_prompt(text, question="Q?", answer="A", caption="C.", output="O")
    assert "Q?" in prompt and "{question}" not in prompt
    assert '"required_events": []' in prompt  # JSON example braces survive filling


def test_user_template_changes_the_hash(tmp_path):
    p = tmp_path / "mine.txt"
    p.write_text("Judge {output} against {caption}. JSON only.")
    text, digest = text_template("extraction", p)
    assert text.startswith("Judge") and digest != text_template("extraction")[1]


def test_registry_names_and_llm_judge_needs_a_model():
    assert {"rule", "openai-compatible", "openai", "gemini"} <= set(JUDGES.names())
    with pytest.raises(ValueError, match="needs a model"):
        JUDGES.get("openai")(kind="openai")
