"""Reasoning length in the model's own tokens for every API adapter, the counter named truthfully
(SPEC §3): a served model through the server's /tokenize, GPT-4o through tiktoken o200k_base,
Gemini through countTokens, the word fallback only where nothing else exists, labelled words."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cafe.adapters import ADAPTERS, ModelCard
from cafe.adapters.base import fallback_token_count
from cafe.adapters.token_counts import (
    BPE_SHA256,
    _shipped_bpe,
    length_label,
    length_unit,
    tiktoken_encoding,
)
from cafe.cli import main
from cafe.testing.loopback import GeminiLoopback, OpenAILoopback, loopback_tokens

FAST = {"base_delay": 0.01, "max_delay": 0.05, "timeout_s": 5.0}
REASONING = "The dog barks twice, then a car horn sounds."
# words and marks: The dog barks twice , then a car horn sounds . = 11
WORDS = 11
# the loopback's tokenizer cuts words into pieces of <= 4 characters: barks, twice and sounds
# are two pieces each, so 11 + 3 = 14
LOOPBACK_TOKENS = 14


def _card(adapter: str, checkpoint: str, **options) -> ModelCard:
    return ModelCard(name=f"t-{adapter}", adapter=adapter, checkpoint=checkpoint, options=options)


def test_the_hand_counts_hold():
    assert fallback_token_count(REASONING) == WORDS
    assert len(loopback_tokens(REASONING)) == LOOPBACK_TOKENS


def test_served_model_counts_with_the_servers_tokenize():
    with OpenAILoopback() as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "Qwen/Qwen2.5-Omni-7B"), endpoint=srv.url, **FAST
        )
        assert ad.token_counter == "server-tokenize:Qwen/Qwen2.5-Omni-7B"
        assert ad.count_tokens(REASONING) == LOOPBACK_TOKENS  # before: 11 (words)
        assert ad.count_tokens(REASONING) == LOOPBACK_TOKENS
        assert ad.count_tokens("") == 0
        ad.close()
    # one probe at load, then the text once (asked again, it is remembered); no model call
    assert srv.tokenized == ["a", REASONING] and srv.count == 0


def test_server_without_tokenize_falls_back_to_words_and_says_so(capsys):
    with OpenAILoopback(tokenize=False) as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m"), endpoint=srv.url, **FAST
        )
        assert ad.token_counter == "fallback-words"
        assert ad.count_tokens(REASONING) == WORDS
        ad.close()
    err = capsys.readouterr().err
    assert "no /tokenize" in err and "counted in words" in err and "tokenizer=hf:" in err
    assert length_unit(ad.token_counter) == "words"


def test_tokenizer_option_words_asks_nothing():
    with OpenAILoopback() as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m", tokenizer="words"), endpoint=srv.url, **FAST
        )
        assert ad.token_counter == "fallback-words" and ad.count_tokens(REASONING) == WORDS
        ad.close()
    assert srv.tokenized == []


def test_gpt4o_audio_counts_with_o200k_base(monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "sk-fake-not-used")
    with OpenAILoopback() as srv:
        ad = ADAPTERS.get("openai-audio")(
            _card("openai-audio", "gpt-4o-audio-preview"), endpoint=srv.url, **FAST
        )
        assert ad.token_counter == "tiktoken:o200k_base"
        # o200k_base: "hello world" is the two tokens 24912 (hello), 2375 ( world)
        assert tiktoken_encoding("o200k_base").encode("hello world") == [24912, 2375]
        # The, dog, twice, ",", then, a, car, horn, sounds, "." are one token each in
        # o200k_base and " barks" two (" b" + "arks"): 12 tokens, where words gave 11
        assert ad.count_tokens(REASONING) == 12
        ad.close()
    assert srv.tokenized == []  # counted locally, not by the server


def test_shipped_bpe_file_is_the_official_one():
    data = _shipped_bpe("o200k_base")
    assert data is not None and len(data.splitlines()) == 199998  # ranks 0..199997
    assert _shipped_bpe("cl100k_base") is None  # no published hash pinned here: not used
    assert BPE_SHA256["o200k_base"].startswith("446a9538")


def test_gemini_counts_with_count_tokens(monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "gemini-fake-key")
    with GeminiLoopback() as srv:
        ad = ADAPTERS.get("gemini")(_card("gemini", "gemini-2.5-flash"), endpoint=srv.url, **FAST)
        assert ad.token_counter == "gemini-count_tokens:gemini-2.5-flash"
        assert ad.count_tokens(REASONING) == LOOPBACK_TOKENS
        ad.close()
    assert srv.tokenized == [REASONING] and srv.count == 0


def test_labels_say_words_for_the_fallback_and_older_runs():
    assert length_unit("fallback-words") == "words"
    assert length_unit("server-usage") == "words"  # what older chat-API runs recorded
    assert length_unit("tiktoken:o200k_base") == "tokens"
    assert length_label(None) == "Reasoning length (words; no tokenizer)"
    assert length_label("hf:Qwen/Qwen2.5-Omni-7B") == "Reasoning length (tokens)"


def test_cafe_run_records_server_token_counts_and_the_counter(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    reply = f"(A)\nReasoning: {REASONING}"
    with OpenAILoopback(reply=lambda b: reply) as srv:
        args = ["run", "--model", "openai-compatible", "-o", "model=served-x",
                "--bench", "synth", "--version", "n4-seed0", "--out", str(out),
                "--judge", "none", "--quiet", "--endpoint", srv.url]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 4
    assert {p["reasoning_tokens"] for p in preds} == {LOOPBACK_TOKENS}  # not 11 words
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["token_counter"] == "server-tokenize:served-x"
    assert manifest["length_unit"] == "tokens"
    # the server's usage counts the whole reply (answer line too): 14 words + marks here
    assert manifest["usage"]["completion_tokens"] == 4 * fallback_token_count(reply)


@pytest.mark.parametrize("counter,unit", [("fallback-words", "words"), ("hf:x", "tokens")])
def test_decay_section_names_its_unit(counter, unit):
    from cafe.metrics.decay import decay_section
    from cafe.records import Prediction

    preds = [
        Prediction(
            sample_id=f"s{i}",
            run_index=0,
            model="m",
            prompt_style="lalm",
            template_hash="t",
            raw_output="x",
            reasoning_tokens=10 * i,
            correct=bool(i % 2),
        )  # fmt: skip
        for i in range(6)
    ]
    section = decay_section(preds, counter=counter)
    assert section["settings"]["length_unit"] == unit
    assert section["settings"]["token_counter"] == counter


def test_tokenizer_option_counts_with_a_local_copy_of_the_models_tokenizer(tmp_path):
    """-o tokenizer=hf:<folder>: the served model's tokenizer, loaded locally; the server's
    /tokenize is then never asked. The count equals that tokenizer's own encoding."""
    from transformers import AutoTokenizer

    from cafe.testing.tiny_models import _train_tokenizer

    folder = tmp_path / "tok"
    _train_tokenizer(["<|endoftext|>"], vocab_size=300).save_pretrained(folder)
    expected = len(
        AutoTokenizer.from_pretrained(folder).encode(REASONING, add_special_tokens=False)
    )
    assert expected not in (WORDS, LOOPBACK_TOKENS)  # a 300-symbol BPE splits most words
    with OpenAILoopback() as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m", tokenizer=f"hf:{folder}"), endpoint=srv.url, **FAST
        )
        assert ad.token_counter == f"hf:{folder}"
        assert ad.count_tokens(REASONING) == expected
        ad.close()
    assert srv.tokenized == []


def test_a_word_counted_run_says_words_in_its_manifest_summary_and_decay(tmp_path, monkeypatch):
    """A server without /tokenize: the manifest, metrics.json's decay section, `cafe decay`'s
    text and the run summary all say the lengths are words."""
    from cafe.reports.leaderboard import load_leaderboard
    from cafe.reports.run_report import write_run_report

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    with OpenAILoopback(reply=lambda b: f"(A)\nReasoning: {REASONING}", tokenize=False) as srv:
        args = ["run", "--model", "openai-compatible", "-o", "model=served-x",
                "--bench", "synth", "--version", "n8-seed0", "--out", str(out),
                "--judge", "none", "--quiet", "--endpoint", srv.url]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["token_counter"], manifest["length_unit"]) == ("fallback-words", "words")
    res = CliRunner().invoke(main, ["decay", str(out)], catch_exceptions=False)
    assert "reasoning length in words (fallback-words)" in res.output
    summary = (write_run_report(out, load_leaderboard(), draw=False) / "summary.md").read_text()
    assert "reasoning length in words (fallback-words)" in summary
