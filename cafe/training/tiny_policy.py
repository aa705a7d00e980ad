"""The tiny policy checkpoint `cafe train smoke` and the training tests start from.

It is the model helper's `cafe.testing.tiny_models.build_tiny_qwen2_audio` when that module is
present; until that branch is merged, `_build_fallback` writes the same kind of checkpoint
(random weights, BPE trained on the spot, Qwen chat template, Whisper extractor) so the trainer
can be tested. Delete the fallback once `cafe.testing.tiny_models` is on main."""

from __future__ import annotations

from pathlib import Path

_CORPUS = [
    "You are a helpful assistant. Select one option from the provided choices:",
    "How many times does the dog bark? What sound comes first? Which event is longer?",
    "<thinking><perception>1. [0.00, 1.20]: a dog bark</perception><reasoning>",
    "1. Sub-question: what is heard first? Answer: a dog bark</reasoning><review>",
    "1. Evidence check: the bark is heard. 2. Logic check: consistent.</review></thinking>",
    "<answer>dog bark</answer> bell bird car horn siren whistle drum piano violin beep",
    "one two three four five rising falling steady fast slow high low before after",
    "0 1 2 3 4 5 6 7 8 9 . , : ; ! ? ( ) [ ] < > / \n",
]
_TEMPLATE = (
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


def build_tiny_policy(path: str | Path, seed: int = 0) -> Path:
    try:
        from cafe.testing.tiny_models import build_tiny_qwen2_audio
    except ImportError:
        return _build_fallback(Path(path), seed)
    return Path(build_tiny_qwen2_audio(path, seed=seed))


def _build_fallback(path: Path, seed: int) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    torch.manual_seed(seed)
    specials = ["<|endoftext|>", "<|im_end|>", "<|im_start|>", "<|audio_bos|>", "<|AUDIO|>"]
    specials.append("<|audio_eos|>")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        _CORPUS,
        trainer=trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        extra_special_tokens={
            "audio_bos_token": "<|audio_bos|>",
            "audio_token": "<|AUDIO|>",
            "audio_eos_token": "<|audio_eos|>",
        },
    )
    tok.padding_side = "left"
    config = Qwen2AudioConfig(
        audio_config=dict(
            d_model=32,
            encoder_layers=1,
            encoder_attention_heads=2,
            encoder_ffn_dim=64,
            num_mel_bins=128,
            max_source_positions=1500,  # the Whisper extractor pads to 3000 frames
        ),
        text_config=dict(
            model_type="qwen2",
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=4096,
        ),
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    config.text_config.eos_token_id = tok.eos_token_id
    config.text_config.pad_token_id = tok.pad_token_id
    model = Qwen2AudioForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    processor = Qwen2AudioProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_TEMPLATE,
    )
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
