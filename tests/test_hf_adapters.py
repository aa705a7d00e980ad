"""transformers adapters on tiny random-weight checkpoints built here (locally trained BPE,
save_pretrained), loaded by the adapters from their folders like any hub checkpoint."""

from __future__ import annotations

import pytest
import torch  # noqa: F401  (needed installed: fail, never skip)
import transformers  # noqa: F401  (needed installed: fail, never skip)

pytest.register_assert_rewrite("hf_tiny_fixtures")

from hf_tiny_fixtures import FAMILIES, make_request  # noqa: E402

from cafe.adapters import ADAPTERS  # noqa: E402
from cafe.adapters.base import fallback_token_count  # noqa: E402

# session fixtures tiny_checkpoints, tiny_adapter, clips: built once for all test_hf_* modules
pytest_plugins = ["hf_tiny_fixtures"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_batch_with_left_padding_matches_single(family, tiny_adapter, clips):
    adapter = tiny_adapter(family)
    short = make_request("short", clips["tone"], "What sound?")
    long = make_request(
        "long", clips["noise44k"], "Select one option from the provided choices: a dog barks twice"
    )
    batch = adapter.generate([short, long])
    alone = adapter.generate([short])
    assert [c.sample_id for c in batch] == ["short", "long"]
    assert batch[0].error is None and batch[1].error is None
    # the short prompt is left-padded in the batch; greedy output must not notice
    assert batch[0].text == alone[0].text
    # how many of the 4 allowed tokens the random model uses is its own business; the count and
    # the finish reason must agree with each other and across batch and single
    n = batch[0].output_tokens
    assert n == alone[0].output_tokens and 1 <= n <= 4
    assert batch[0].backend["finish_reason"] == alone[0].backend["finish_reason"]
    assert batch[0].backend["finish_reason"] == ("length" if n == 4 else "stop")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_audio_reaches_the_model(family, tiny_adapter, clips):
    adapter = tiny_adapter(family)
    real = adapter.next_token_logits([make_request("a", clips["tone"], "What sound?")])
    silent = adapter.next_token_logits([make_request("a", clips["silence"], "What sound?")])
    same_again = adapter.next_token_logits([make_request("a", clips["tone"], "What sound?")])
    assert float((real - same_again).abs().max()) == 0.0  # deterministic
    assert float((real - silent).abs().max()) > 1e-4  # and the audio changes the logits


def test_bad_audio_fails_only_its_item(tiny_adapter, clips):
    adapter = tiny_adapter("qwen2-audio")
    good = make_request("good", clips["tone"], "What sound?")
    out = adapter.generate(
        [good, make_request("bad", clips["broken"], "x"), make_request("gone", "/no/such.wav", "x")]
    )
    assert out[0].error is None and out[0].text
    assert (
        out[1].text is None and "broken.wav: sample bad: field audio: cannot decode" in out[1].error
    )
    assert out[2].error == "/no/such.wav: sample gone: field audio: file not found"


def test_count_tokens_uses_the_checkpoint_tokenizer(tiny_adapter, tiny_checkpoints):
    adapter = tiny_adapter("qwen2.5-omni")
    text = "<|im_end|> a dog barks<|AUDIO|>"
    expected = len(adapter.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert adapter.count_tokens(text) == expected
    # special tokens are one id each; the word fallback would split them into pieces
    assert adapter.count_tokens("<|im_end|>") == 1 != fallback_token_count("<|im_end|>")
    assert adapter.token_counter == tiny_checkpoints("qwen2.5-omni")


def test_full_omni_layout_loads_only_the_thinker(tiny_adapter, tiny_checkpoints):
    from transformers import Qwen2_5OmniForConditionalGeneration

    adapter = tiny_adapter("qwen2.5-omni-full")
    assert type(adapter.model).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    # the same weights transformers' own full-model loader puts in its thinker
    full = Qwen2_5OmniForConditionalGeneration.from_pretrained(
        tiny_checkpoints("qwen2.5-omni-full")
    )
    want, got = full.thinker.state_dict(), adapter.model.state_dict()
    assert set(want) == set(got)
    for k, v in want.items():
        assert bool((got[k] == v).all()), k


def test_sampling_is_seeded(tiny_adapter, clips):
    adapter = tiny_adapter("qwen2-audio")
    r = make_request("s", clips["tone"], "What sound?", max_new_tokens=6)
    r.generation = {"max_new_tokens": 6, "temperature": 1.5, "top_p": 1.0}
    a, b = adapter.generate([r]), adapter.generate([r])
    assert a[0].text == b[0].text  # same seed, same sample
    # really sampling, with the request's seed: at temperature 1000 every next token is near
    # uniform over the vocabulary whatever the weights, so 4 seeds x 6 tokens give at least two
    # different texts (all equal: p < 1e-15), and each seed again gives its own text back
    r.generation = {"max_new_tokens": 6, "temperature": 1000.0, "top_p": 1.0}
    texts = {}
    for seed in range(4):
        r.seed = seed
        texts[seed] = adapter.generate([r])[0].text
    assert len(set(texts.values())) >= 2
    r.seed = 2
    assert adapter.generate([r])[0].text == texts[2]


def test_model_types_name_cards_of_their_own_adapter():
    from cafe.adapters.cards import load_cards
    from cafe.adapters.hf import HF_ADAPTERS, model_types

    types = model_types()
    assert types["qwen2_audio"] == "qwen2-audio-7b-instruct"
    assert types["qwen2_5_omni"] == types["qwen2_5_omni_thinker"] == "qwen2.5-omni-7b"
    cards = load_cards()
    for adapter in HF_ADAPTERS:
        for card in ADAPTERS.get(adapter).MODEL_TYPES.values():
            assert cards[card].adapter == adapter


def test_hf_cards_point_at_known_adapters_and_defaults():
    from cafe.adapters.cards import load_cards

    cards = load_cards()
    hf_adapters = {"qwen2-audio", "qwen2.5-omni", "audio-flamingo-3", "phi-4-multimodal"}
    for name in ["audio-reasoner", "r1-aqa", "sari"]:
        assert cards[name].adapter == "qwen2-audio" and cards[name].group == "LARM"
    for name in ["omni-r1", "audio-thinker", "mpar2-3b", "mpar2-7b"]:
        assert cards[name].adapter == "qwen2.5-omni"
    assert cards["mpar2-7b"].prompt_style == "mpar2"
    for card in cards.values():
        if card.adapter in hf_adapters:
            assert card.adapter in ADAPTERS
            assert card.generation["max_new_tokens"] == 2048
            # the paper averages three sampled runs: the checkpoint's published settings
            assert card.generation["do_sample"] is True and "temperature" not in card.generation
        if card.adapter == "openai-compatible":  # a server you start, or a hosted API
            assert card.options["endpoint"].startswith("http")
            hosted = card.options["endpoint"].startswith("https://") and card.options.get(
                "api_key_env"
            )
            assert card.launch or hosted, card.name
