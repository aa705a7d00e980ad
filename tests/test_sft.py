"""SFT collator: labels masked on prompt, audio and padding; the SFT loss depends on the audio;
a LoRA step is merged into a checkpoint that loads back as a plain model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trl  # noqa: F401  (needed installed: fail, never skip)

from cafe.audio import write_wav
from cafe.testing.tiny_models import build_tiny_qwen2_audio as build_tiny_policy
from cafe.training.grpo import load_policy
from cafe.training.sft import AudioSFTCollator, build_sft_trainer

TARGET = "<thinking><perception>1. [0.00, 1.00]: a dog bark</perception></thinking>"


def _row(i: int, audio: str, target: str = TARGET) -> dict:
    return {
        "id": f"s{i}",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": audio, "text": None},
                    {"type": "text", "path": None, "text": "What sound comes first?"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "path": None, "text": target}]},
        ],
        "audio": audio,
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    t = np.arange(16000) / 16000
    write_wav(root / "real.wav", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    write_wav(root / "silent.wav", np.zeros(16000, dtype=np.float32))
    write_wav(root / "short.wav", (0.3 * np.sin(2 * np.pi * 220 * t[:8000])).astype(np.float32))
    path = build_tiny_policy(root / "policy")
    return root, path


def test_collator_masks_prompt_audio_and_padding(setup):
    root, path = setup
    _, proc = load_policy(path)
    collate = AudioSFTCollator(proc)
    rows = [_row(0, str(root / "real.wav")), _row(1, str(root / "short.wav"), "<answer>x</answer>")]
    batch = collate(rows)
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    audio_id = proc.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    assert (ids == audio_id).sum().item() > 0
    assert (labels[ids == audio_id] == -100).all()  # no audio position is learned
    assert (labels[mask == 0] == -100).all()
    assert "input_features" in batch and batch["input_features"].size(0) == 2
    for i, target in enumerate([TARGET, "<answer>x</answer>"]):
        learned = ids[i][labels[i] != -100].tolist()
        # exactly the assistant turn: target text + end-of-turn marker and newline
        assert proc.tokenizer.decode(learned).startswith(target)
        assert proc.tokenizer.decode(learned).replace(target, "").strip() == "<|im_end|>"
    assert mask[1].sum() < mask[0].sum()  # the shorter clip and answer are right-padded


def test_sft_loss_hears_audio_and_lora_merges(setup, tmp_path):
    root, path = setup
    model, proc = load_policy(path)
    rows = [_row(0, str(root / "real.wav"))] * 2
    recipe = {"lora": {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}}
    trainer = build_sft_trainer(
        recipe,
        model,
        proc,
        rows,
        tmp_path,
        max_steps=1,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        use_cpu=True,
    )
    collate = trainer.data_collator
    real = collate(rows)
    silent = collate([_row(0, str(root / "silent.wav"))] * 2)
    assert torch.equal(real["input_ids"], silent["input_ids"])
    with torch.no_grad():
        loss_real = trainer.compute_loss(trainer.model, dict(real))
        loss_silent = trainer.compute_loss(trainer.model, dict(silent))
    assert abs(loss_real.item() - loss_silent.item()) > 1e-6
    trainer.train()
    from cafe.training.grpo import save_checkpoint

    out = save_checkpoint(trainer.model, proc, tmp_path / "ckpt")
    merged, _ = load_policy(out)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    base, _ = load_policy(path)
    changed = [
        n
        for (n, a), (_, b) in zip(merged.named_parameters(), base.named_parameters(), strict=True)
        if not torch.equal(a, b)
    ]
    assert changed, "the LoRA step was not merged into the saved weights"


def test_save_into_full_omni_layout(tmp_path):
    """A thinker trained from a full Qwen2.5-Omni folder is written back as the full layout:
    the base's config and other files, the trained thinker tensors, loadable as before."""
    import json

    from cafe.testing.tiny_models import build_tiny_qwen2_5_omni
    from cafe.training.grpo import adapter_for_checkpoint, save_checkpoint

    base = build_tiny_qwen2_5_omni(tmp_path / "base")
    (base / "spk_dict.pt").write_bytes(b"speaker table stand-in")  # a non-weight file to carry
    model, proc = load_policy(base)
    assert type(model).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)  # "training"
    out = save_checkpoint(model, proc, tmp_path / "out", base=base)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_omni"
    assert (out / "spk_dict.pt").read_bytes() == b"speaker table stand-in"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert all(k.startswith("thinker.") for k in index["weight_map"])
    assert adapter_for_checkpoint(out).__name__ == adapter_for_checkpoint(base).__name__
    reloaded, _ = load_policy(out)
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)
    original, _ = load_policy(base)
    assert not torch.equal(original.lm_head.weight, reloaded.lm_head.weight)


def test_every_builtin_recipe_builds_its_trl_configs(tmp_path):
    from cafe.training.grpo import grpo_config, lora_config
    from cafe.training.recipes import load_recipe, recipe_names
    from cafe.training.rewards import RewardWeights
    from cafe.training.sft import sft_config

    cpu = {"use_cpu": True, "bf16": False}
    for name in recipe_names():
        r = load_recipe(name)
        RewardWeights.from_dict(r.get("rewards"))
        lora_config(r)
        if r.get("sft"):
            sft_config(r, tmp_path, **cpu)
        if r.get("grpo"):
            c = grpo_config(r, tmp_path, use_vllm=False, **cpu)
            if name.startswith("mpar2-7b-grpo"):  # the paper's GRPO numbers
                assert (c.num_generations, c.learning_rate, c.temperature) == (8, 1e-5, 1.0)
                assert (c.per_device_train_batch_size, c.gradient_accumulation_steps) == (1, 2)
    authors = load_recipe("mpar2-7b-grpo-authors")
    assert authors["lora"]["r"] == 32 and authors["lora"]["lora_alpha"] == 64
    assert authors["grpo"]["beta"] == 0.04 and authors["grpo"]["epsilon"] == 0.2
