"""MPAR² SFT on TRL's SFTTrainer with an audio-aware collator.

TRL 1.16 prepares text and image datasets only, so preparation is skipped and
`AudioSFTCollator` does the work per batch: the processor renders each chat with its clip (the
audio placeholder expands to one token per audio frame embedding), and labels are -100 on the
prompt (system, user text, every audio position) and on padding, so only the assistant's MPAR²
answer is learned. Full fine-tuning or LoRA (peft) from the recipe; LoRA is merged on save.

Rows (written by `cafe train data`): messages (user turn with an audio part, assistant turn with
the target text), audio (path). Torch/TRL import lazily (train extra)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.training.grpo import (
    load_training_inputs,
    log_to_file,
    lora_config,
    save_checkpoint,
    save_log_history,
    trainer_dir,
    trl_args,
)


class AudioSFTCollator:
    def __init__(self, processor: Any, max_length: int | None = None):
        self.processor = processor
        self.max_length = max_length

    def _render(self, messages: list[dict[str, Any]], prompt_only: bool) -> str:
        return self.processor.apply_chat_template(
            messages[:-1] if prompt_only else messages,
            add_generation_prompt=prompt_only,
            tokenize=False,
        )

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        from cafe.audio import load_audio

        prompts = [self._render(r["messages"], True) for r in rows]
        fulls = [self._render(r["messages"], False) for r in rows]
        for r, p, f in zip(rows, prompts, fulls, strict=True):
            if not f.startswith(p):  # the mask below relies on the prompt being a prefix
                raise ValueError(f"sample {r.get('id')}: chat template does not extend the prompt")
        audios = [load_audio(r["audio"], sample_id=r.get("id")) for r in rows]
        tok = self.processor.tokenizer
        side = tok.padding_side
        tok.padding_side = "right"
        try:
            enc = self.processor(
                text=fulls, audio=audios, sampling_rate=16_000, padding=True, return_tensors="pt"
            )
            prompt_enc = self.processor(
                text=prompts, audio=audios, sampling_rate=16_000, padding=True, return_tensors="pt"
            )
        finally:
            tok.padding_side = side
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        prompt_lens = prompt_enc["attention_mask"].sum(dim=1)
        for i, n in enumerate(prompt_lens.tolist()):
            labels[i, :n] = -100  # system, user text and every audio position
        batch = {**enc, "labels": labels}
        if self.max_length is not None:
            for key in ("input_ids", "attention_mask", "labels"):
                batch[key] = batch[key][:, : self.max_length]
        return dict(batch)


def sft_config(recipe: dict[str, Any], output_dir: str | Path, **overrides: Any):
    from trl import SFTConfig

    from cafe.training.recipes import check_trainer_block

    check_trainer_block(recipe, "sft", SFTConfig)
    # TRL prepares text and image datasets only: AudioSFTCollator renders each batch instead
    skip = {"skip_prepare_dataset": True}
    return SFTConfig(**trl_args(recipe, "sft", output_dir, overrides, dataset_kwargs=skip))


def build_sft_trainer(
    recipe: dict[str, Any], model: Any, processor: Any, rows: list[dict], out: str | Path, **kw
):
    from datasets import Dataset
    from trl import SFTTrainer

    args = sft_config(recipe, trainer_dir(out), **kw)
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=processor,
        data_collator=AudioSFTCollator(processor, args.max_length),
        peft_config=lora_config(recipe),
    )


def train_sft(
    recipe: dict[str, Any],
    *,
    model_path: str | Path,
    data: str | Path,
    out: str | Path,
    max_steps: int | None = None,
    quiet: bool = False,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """SFT from a recipe; saves the merged checkpoint (+ processor) to ``out``. The trainer's
    per-step logs go to `<out>.trainer/log.jsonl` (``quiet``: only there; ``echo``: a line
    per step as well)."""
    model, processor, rows = load_training_inputs(recipe, model_path, data, "SFT")
    overrides = {"max_steps": max_steps} if max_steps else {}
    trainer = build_sft_trainer(recipe, model, processor, rows, out, **overrides)
    log_to_file(trainer, out, quiet=quiet, echo=echo)
    trainer.train()
    save_log_history(trainer, out)
    saved = save_checkpoint(trainer.model, processor, out, base=model_path)
    from cafe.training.card import write_card

    write_card(saved, recipe, model_path, data, "sft")  # runs as itself: `cafe run --model`
    return saved
