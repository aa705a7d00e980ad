"""Tiny random-weight checkpoints of the audio LLM families cafe runs, for tests and smoke runs.

Each builder writes a real checkpoint folder (config, safetensors weights, a BPE tokenizer trained
on the spot with `tokenizers`, the family's processor) with ``save_pretrained`` and returns the
path, so adapters and trainers load it through the same ``from_pretrained`` path as a hub model.
Weights are random; outputs are gibberish but deterministic, and every model generates on CPU in
well under a second. torch/transformers are imported inside the builders (optional extras)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: sentences the BPE is trained on: enough merges that chat text tokenises into a few dozen ids
_CORPUS = [
    "You are a helpful assistant.",
    "Select one option from the provided choices:",
    "What sound is heard in the audio clip? A dog barks twice, then a car horn.",
    "Reasoning: the audio events that support the answer are a bell and a bird.",
    "<thinking><perception>1. [0.00, 1.20]: a dog barks</perception></thinking>",
    "<answer>option</answer> Sub-question: Answer: Evidence check: Logic check:",
    "system user assistant question choices counting pitch rhythm timbre temporal",
    "0 1 2 3 4 5 6 7 8 9 . , : ; ! ? ( ) [ ] < > / \n",
]

#: Qwen chat special tokens shared by Qwen2-Audio and the Qwen2.5-Omni thinker
_QWEN_SPECIALS = {
    "pad_token": "<|endoftext|>",
    "eos_token": "<|im_end|>",
    "bos": "<|im_start|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_token": "<|AUDIO|>",
    "audio_eos_token": "<|audio_eos|>",
}

# Qwen-style chat template: an audio part renders as <|audio_bos|><|AUDIO|><|audio_eos|>, which
# the processor expands to one <|AUDIO|> per audio frame embedding
_QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _train_tokenizer(
    specials: list[str],
    vocab_size: int = 400,
    extra: dict[str, Any] | None = None,
    corpus: Sequence[str] = (),
):
    """A byte-level BPE trained on _CORPUS (+ ``corpus``), wrapped as a fast tokenizer with
    ``specials`` as added special tokens (each one id, never split)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([*_CORPUS, *corpus], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **(extra or {}))


def _qwen_tokenizer(
    extra_tokens: dict[str, str], vocab_size: int = 400, corpus: Sequence[str] = ()
):
    specials = list(dict.fromkeys([*_QWEN_SPECIALS.values(), *extra_tokens.values()]))
    named = {k: v for k, v in {**_QWEN_SPECIALS, **extra_tokens}.items() if k != "bos"}
    core = {k: named.pop(k) for k in ("pad_token", "eos_token")}
    tok = _train_tokenizer(
        specials, vocab_size, extra={**core, "extra_special_tokens": named}, corpus=corpus
    )
    tok.padding_side = "left"
    return tok


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _tiny_text_config(tok, max_position_embeddings: int = 2048, **extra: Any) -> dict[str, Any]:
    """The tiny decoder every family shares (2 layers, width 32, 2 query heads to 1 key/value
    head), sized to ``tok``'s vocabulary and using its eos and pad ids."""
    return dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=max_position_embeddings,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **extra,
    )


#: the tiny Whisper-style audio encoder of Qwen2-Audio and the Qwen2.5-Omni thinker
_TINY_WHISPER_ENCODER = dict(
    d_model=32,
    encoder_layers=1,
    encoder_attention_heads=2,
    encoder_ffn_dim=64,
    num_mel_bins=128,
)


def _set_generation_ids(model, tok) -> None:
    gc = model.generation_config
    gc.eos_token_id = tok.eos_token_id
    gc.pad_token_id = tok.pad_token_id
    gc.bos_token_id = None


def _save_tiny(model_cls, config, tok, path: Path, processor=None) -> None:
    """Random-init ``model_cls`` from ``config``, point its generation config at ``tok``'s
    eos/pad ids, and save it (and ``processor``, when given) to ``path``."""
    model = model_cls(config).eval()
    _set_generation_ids(model, tok)
    model.save_pretrained(path)
    if processor is not None:
        processor.save_pretrained(path)


def _write_processor_folder(tok, path: Path, chat_template: str, body: dict[str, Any]) -> None:
    """Write a processor folder piecewise (tokenizer, chat template, processor_config.json ``body``)
    for processors that cannot be built in memory without torchvision."""
    import json

    tok.save_pretrained(path)
    (path / "chat_template.jinja").write_text(chat_template)
    (path / "processor_config.json").write_text(json.dumps(body, indent=2, default=str))


def build_tiny_qwen2_audio(
    path: str | Path,
    seed: int = 0,
    *,
    vocab_size: int = 400,
    corpus: Sequence[str] = (),
    text: dict[str, Any] | None = None,
) -> Path:
    """Qwen2-Audio-Instruct architecture (also Audio Reasoner, R1-AQA, SARI checkpoints).
    For the train smoke (a tiny model that has to learn the MPAR² format): ``corpus`` (+ a larger
    ``vocab_size``) trains the tokenizer on domain text too, so words are single tokens as in a
    real model's vocabulary, and ``text`` overrides decoder sizes (hidden_size, layers, …)."""
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    path = Path(path)
    _seed(seed)
    tok = _qwen_tokenizer({}, vocab_size, corpus)
    config = Qwen2AudioConfig(
        # the Whisper extractor pads to 3000 frames, so the encoder keeps 1500 positions
        audio_config=dict(**_TINY_WHISPER_ENCODER, max_source_positions=1500),
        text_config={**_tiny_text_config(tok, model_type="qwen2"), **(text or {})},
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    processor = Qwen2AudioProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_QWEN_CHAT_TEMPLATE,
    )
    _save_tiny(Qwen2AudioForConditionalGeneration, config, tok, path, processor)
    return path


def _omni_tokenizer():
    return _qwen_tokenizer(
        {
            "image_token": "<|IMAGE|>",
            "video_token": "<|VIDEO|>",
            "vision_bos_token": "<|vision_bos|>",
            "vision_eos_token": "<|vision_eos|>",
        }
    )


def omni_token_ids(tok) -> dict[str, int]:
    """The Qwen2.5-Omni thinker config's special-token ids, looked up in ``tok``."""
    ids = tok.convert_tokens_to_ids
    return dict(
        audio_token_index=ids("<|AUDIO|>"),
        image_token_index=ids("<|IMAGE|>"),
        video_token_index=ids("<|VIDEO|>"),
        audio_start_token_id=ids("<|audio_bos|>"),
        audio_end_token_id=ids("<|audio_eos|>"),
        vision_start_token_id=ids("<|vision_bos|>"),
        vision_end_token_id=ids("<|vision_eos|>"),
    )


def _omni_thinker_config(tok):
    from transformers import Qwen2_5OmniThinkerConfig

    return Qwen2_5OmniThinkerConfig(
        audio_config=dict(**_TINY_WHISPER_ENCODER, output_dim=32, n_window=50),
        vision_config=dict(
            depth=1,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=32,
            fullatt_block_indexes=[0],
        ),
        # transformers 5.x keeps rope settings in rope_parameters (mrope sections sum to
        # head_dim / 2 = 8)
        text_config=_tiny_text_config(
            tok,
            4096,
            rope_parameters={
                "rope_theta": 10000.0,
                "rope_type": "default",
                "mrope_section": [2, 3, 3],
            },
        ),
        **omni_token_ids(tok),
    )


def _save_omni_processor(tok, path: Path) -> None:
    """Save what Qwen2_5OmniProcessor.save_pretrained writes (tokenizer, chat template, the
    feature extractor and image processor inside processor_config.json). Written piecewise because
    the processor cannot be built without torchvision (its video processor), which audio-only use
    never needs; cafe's adapter loads such a folder either way (see qwen2_5_omni.py)."""
    from transformers import Qwen2VLImageProcessorPil, WhisperFeatureExtractor

    body = {
        "feature_extractor": WhisperFeatureExtractor(feature_size=128).to_dict(),
        "image_processor": Qwen2VLImageProcessorPil().to_dict(),
        "processor_class": "Qwen2_5OmniProcessor",
    }
    _write_processor_folder(tok, path, _QWEN_CHAT_TEMPLATE, body)


def build_tiny_qwen2_5_omni_thinker(path: str | Path, seed: int = 0) -> Path:
    """A thinker-only Qwen2.5-Omni checkpoint (model_type qwen2_5_omni_thinker), the layout
    MPAR² and most RL fine-tunes of Qwen2.5-Omni save."""
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    path = Path(path)
    _seed(seed)
    tok = _omni_tokenizer()
    _save_tiny(Qwen2_5OmniThinkerForConditionalGeneration, _omni_thinker_config(tok), tok, path)
    _save_omni_processor(tok, path)
    return path


def build_tiny_qwen2_5_omni(path: str | Path, seed: int = 0) -> Path:
    """The full Qwen2.5-Omni layout (model_type qwen2_5_omni, weights under ``thinker.``), as
    the released 3B/7B checkpoints ship. The speech half is switched off
    (enable_audio_output=False) to stay tiny; text generation never uses it."""
    import torch
    from transformers import Qwen2_5OmniConfig, Qwen2_5OmniForConditionalGeneration

    path = Path(path)
    _seed(seed)
    tok = _omni_tokenizer()
    thinker = _omni_thinker_config(tok)
    config = Qwen2_5OmniConfig(thinker_config=thinker.to_dict(), enable_audio_output=False)
    _save_tiny(Qwen2_5OmniForConditionalGeneration, config, tok, path)
    _save_omni_processor(tok, path)
    # the released layout ships its talker's speaker table; the full model loader reads it
    torch.save({}, path / "spk_dict.pt")
    return path


# Audio Flamingo 3 (Qwen2 text backbone): an audio part renders as the <sound> placeholder,
# which the processor expands to one token per encoder frame of each 30 s window
_AF3_CHAT_TEMPLATE = _QWEN_CHAT_TEMPLATE.replace("<|audio_bos|><|AUDIO|><|audio_eos|>", "<sound>")


def build_tiny_audio_flamingo3(path: str | Path, seed: int = 0) -> Path:
    """Audio Flamingo 3 architecture (Whisper-style encoder, projector, Qwen2 decoder)."""
    from transformers import (
        AudioFlamingo3Config,
        AudioFlamingo3ForConditionalGeneration,
        AudioFlamingo3Processor,
        WhisperFeatureExtractor,
    )

    path = Path(path)
    _seed(seed)
    tok = _qwen_tokenizer({"audio_token": "<sound>"})
    config = AudioFlamingo3Config(
        audio_config=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            num_mel_bins=128,
            max_source_positions=1500,
        ),
        text_config=_tiny_text_config(tok, model_type="qwen2"),
        audio_token_id=tok.convert_tokens_to_ids("<sound>"),
    )
    processor = AudioFlamingo3Processor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_AF3_CHAT_TEMPLATE,
    )
    _save_tiny(AudioFlamingo3ForConditionalGeneration, config, tok, path, processor)
    return path


# Phi-4-multimodal chat format: <|system|>…<|end|><|user|><|audio|>question<|end|><|assistant|>
_PHI4_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'audio' %}<|audio|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tiny_phi4mm(path: str | Path, seed: int = 0) -> Path:
    """Phi-4-multimodal-instruct architecture (conformer audio encoder, SigLIP vision tower,
    Phi-3 decoder), saved the way the -hf repos are: model plus a processor folder whose image
    processor is written as a plain config (it needs torchvision to be built in memory)."""
    from transformers import (
        Phi4MultimodalConfig,
        Phi4MultimodalFeatureExtractor,
        Phi4MultimodalForCausalLM,
    )

    path = Path(path)
    _seed(seed)
    tok = _train_tokenizer(
        ["<|endoftext|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
        + ["<|image|>", "<|audio|>"],
        extra={
            "pad_token": "<|endoftext|>",
            "eos_token": "<|end|>",
            "extra_special_tokens": {"image_token": "<|image|>", "audio_token": "<|audio|>"},
        },
    )
    tok.padding_side = "left"
    ids = tok.convert_tokens_to_ids
    config = Phi4MultimodalConfig(
        **_tiny_text_config(
            tok, 4096, original_max_position_embeddings=4096, bos_token_id=tok.pad_token_id
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            crop_size=28,
            patch_size=14,
            image_token_id=ids("<|image|>"),
        ),
        audio_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_blocks=1,
            num_attention_heads=2,
            ext_pw_out_channel=32,
            depthwise_separable_out_channel=32,
            nemo_conv_channels=32,
            audio_token_id=ids("<|audio|>"),
        ),
    )
    _save_tiny(Phi4MultimodalForCausalLM, config, tok, path)
    body = {
        "audio_processor": Phi4MultimodalFeatureExtractor().to_dict(),
        "image_processor": {"image_processor_type": "Phi4MultimodalImageProcessor"},
        "processor_class": "Phi4MultimodalProcessor",
    }
    _write_processor_folder(tok, path, _PHI4_CHAT_TEMPLATE, body)
    return path
