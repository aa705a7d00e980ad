"""MPAR² GRPO on TRL's GRPOTrainer (trl==1.16.0), extended so the audio reaches the model.

TRL 1.16 threads images only. `AudioGRPOTrainer` adds audio at the three places it matters:
1. prompt tokenisation (`_tokenize_prompts`): the processor renders each chat with its clip, so the
   audio placeholder is expanded and `input_features` / `feature_attention_mask` are produced; the
   regular generation path forwards those tensors to `generate`;
2. every log-prob forward (`_get_per_token_logps_and_entropies`): old-policy, reference (full
   model or PEFT with the adapter disabled) and policy passes get the rows' audio features;
3. the generation batch (`_generate_and_score_completions`): the features travel in the output
   dict, so TRL's shuffle/split across gradient-accumulation steps keeps them aligned with rows.
vLLM rollouts (colocate, tensor parallel 1) get the clip as `multi_modal_data["audio"]` with the
prompt's token ids UNEXPANDED (one audio token per clip: vLLM expands it itself; handing it the
processor's expanded ids would expand them twice), while training keeps the expanded ids. The
colocated engine gets the family's modality limits, and the weight sync renames transformers 5
parameter names to the ones vLLM's loader maps (cafe/adapters/vllm_families.py). Transformers
rollouts suppress the audio placeholder token (TRL suppresses only the image token).

Dataset rows (written by `cafe train data`): prompt (chat messages with an audio part), audio
(path), answer, choices, caption, events. Torch/TRL import lazily (train extra)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.benchmarks.string_match import is_correct
from cafe.parsing import parse_sections
from cafe.store import iter_jsonl
from cafe.training.reward_judge import RewardItem, RewardJudge, score_group
from cafe.training.rewards import RewardWeights, compute_rewards
from cafe.training.rollouts import ScriptedRollouts


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": text}]."""
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))
    return str(completion or "")


def make_reward_func(judge: RewardJudge, weights: RewardWeights | None = None):
    """The TRL reward function: async, so TRL runs it on its event loop and every judge call of
    the whole generation batch is in flight at once (score_group)."""
    w = weights or RewardWeights()

    async def mpar2_reward(prompts, completions, answer, choices, **kw) -> list[float]:
        captions = kw.get("caption") or [""] * len(completions)
        events = kw.get("events") or [[] for _ in completions]
        questions = kw.get("question") or [""] * len(completions)
        items = []
        for i, c in enumerate(completions):
            s = parse_sections(completion_text(c))
            # the benchmarks' one rule: the official match on the answer text (no mapping)
            ok = is_correct(s.answer, answer[i], list(choices[i]))
            items.append(
                RewardItem(s, ok, questions[i], answer[i], captions[i] or "", list(events[i] or []))
            )
        asked, failed = judge.asked, judge.failed
        scores = await score_group(judge, items)
        step_asked, step_failed = judge.asked - asked, judge.failed - failed
        parts = [
            compute_rewards(it.sections, it.correct, sc, w)
            for it, sc in zip(items, scores, strict=True)
        ]
        log_metric = kw.get("log_metric")
        if log_metric is not None and parts:
            for name in ("format", "perception", "spr", "rea", "acc"):
                log_metric(f"mpar2/{name}", sum(getattr(p, name) for p in parts) / len(parts))
            # never a silent 0: the share of judge scores that fell back to 0 this step
            log_metric("mpar2/judge_failed", step_failed / step_asked if step_asked else 0.0)
        if step_asked and step_failed * 2 > step_asked:
            warnings.warn(
                f"reward judge {judge.identity}: {step_failed} of {step_asked} scores this step "
                "had no number after the retries and count 0 (the judged rewards are off; "
                "check the judge server, its thinking and its token budget)",
                stacklevel=1,
            )
        return [p.total for p in parts]

    return mpar2_reward


def load_policy(path: str | Path, dtype: str = "float32"):
    """Model + processor from a checkpoint folder, loaded the way the harness's transformers
    adapter loads it (its card's adapter names the model and processor classes), so whatever
    `cafe run` can score, training can start from. A full Qwen2.5-Omni checkpoint loads as its
    thinker (the part that is trained; `save_checkpoint` writes it back into the full layout)."""
    import torch
    import transformers
    from transformers import AutoProcessor

    from cafe.adapters.hf.base import audio_only_processor

    adapter = adapter_for_checkpoint(path)
    model_class = getattr(adapter, "model_class", None)
    if model_class is None:
        raise ValueError(f"{path}: its adapter {adapter.__name__} is not a transformers adapter")
    model = getattr(transformers, model_class).from_pretrained(path, dtype=getattr(torch, dtype))
    try:
        processor = AutoProcessor.from_pretrained(path)
    except (ImportError, OSError, ValueError) as e:
        # omni processors bundle image/video halves that need torchvision; audio never does
        if getattr(adapter, "processor_class", None) is None:
            raise
        if "torchvision" not in str(e).lower() and "video processor" not in str(e).lower():
            raise
        processor = audio_only_processor(adapter.processor_class, str(path))
    processor.tokenizer.padding_side = "left"
    return model, processor


def adapter_for_checkpoint(path: str | Path) -> type:
    """The adapter class `cafe run --model PATH` would use for this checkpoint folder."""
    from cafe.adapters import ADAPTERS
    from cafe.adapters.resolve import resolve_model

    return ADAPTERS.get(resolve_model(str(path)).card.adapter)  # ModelNotFound: a ValueError


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a pipeline JSONL file (the store's reader: a torn last line is skipped)."""
    return list(iter_jsonl(Path(path)))


def load_training_inputs(
    recipe: dict[str, Any], model_path: str | Path, data: str | Path, what: str
):
    """(model, processor, rows) for a trainer; an empty data file is an error naming it."""
    model, processor = load_policy(model_path, recipe.get("dtype", "float32"))
    rows = read_rows(data)
    if not rows:
        raise ValueError(f"{data}: no {what} rows")
    return model, processor, rows


# full checkpoints whose trained part is a sub-model: model_type -> weight-name prefix of the part
_WRAPPED_LAYOUTS = {"qwen2_5_omni": "thinker."}


def save_checkpoint(model, processor, out: str | Path, base: str | Path | None = None) -> Path:
    """Save in the layout the harness's adapters load: LoRA merged into the weights, config +
    safetensors + processor (tokenizer, feature extractor, chat template). When ``base`` is a
    full checkpoint whose trained part is a sub-model (Qwen2.5-Omni: thinker + talker +
    token2wav), the output is that full layout with the trained part's tensors replaced."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    prefix = _wrapped_prefix(base)
    if prefix is None:
        model.save_pretrained(out, safe_serialization=True)
    else:
        _save_into_full_layout(model, Path(base), out, prefix)
    _save_processor(processor, out, base)
    return out


def _save_processor(processor, out: Path, base: str | Path | None) -> None:
    """The processor, or for an audio-only build (image/video halves left out, which
    save_pretrained cannot write) its tokenizer, audio feature extractor and chat template,
    with the base checkpoint's processor_config.json naming the processor class."""
    import shutil

    try:
        processor.save_pretrained(out)
        return
    except AttributeError:
        pass
    processor.tokenizer.save_pretrained(out)
    for attr in ("feature_extractor", "audio_processor"):
        part = getattr(processor, attr, None)
        if part is not None:
            part.save_pretrained(out)
    if getattr(processor, "chat_template", None):
        (out / "chat_template.jinja").write_text(processor.chat_template)
    if base is not None and (Path(base) / "processor_config.json").is_file():
        shutil.copy2(Path(base) / "processor_config.json", out / "processor_config.json")


def _wrapped_prefix(base: str | Path | None) -> str | None:
    if base is None or not (Path(base) / "config.json").is_file():
        return None
    model_type = json.loads((Path(base) / "config.json").read_text()).get("model_type")
    return _WRAPPED_LAYOUTS.get(model_type)


def _save_into_full_layout(model, base: Path, out: Path, prefix: str) -> None:
    """Trained sub-model tensors (saved with their full-layout names) + every other tensor and
    file of the base checkpoint, as two safetensors shards with an index."""
    import shutil
    import tempfile

    from safetensors import safe_open
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        trained = {}
        for f in sorted(Path(tmp).glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                trained.update({k: st.get_tensor(k) for k in st.keys()})
    if not all(k.startswith(prefix) for k in trained):
        raise ValueError(f"trained weights are not named {prefix}* (transformers layout changed?)")
    rest = {}
    for f in sorted(base.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            rest.update({k: st.get_tensor(k) for k in st.keys() if not k.startswith(prefix)})
    for item in base.iterdir():  # config, speaker dictionary, generation config, …
        if item.is_file() and not item.name.endswith((".safetensors", ".safetensors.index.json")):
            shutil.copy2(item, out / item.name)
    shards = {"model-00001-of-00002.safetensors": trained}
    shards["model-00002-of-00002.safetensors"] = rest
    weight_map = {}
    for name, tensors in shards.items():
        tensors = {k: v.contiguous() for k, v in tensors.items()}
        save_file(tensors, str(out / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in tensors})
    total = sum(v.numel() * v.element_size() for t in shards.values() for v in t.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def trainer_dir(out: str | Path) -> Path:
    """TRL's own output (logs, intermediate checkpoints) beside the final checkpoint, not inside
    it, so the checkpoint folder holds only what the harness loads."""
    out = Path(out)
    return out.with_name(out.name + ".trainer")


def save_log_history(trainer, out: str | Path) -> Path:
    """The trainer's per-step log (loss, grad norm, GRPO reward mean/std, …) as
    `<out>.trainer/log_history.json`: with save_strategy "no" TRL writes no trainer state."""
    path = trainer_dir(out) / "log_history.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trainer.state.log_history, indent=1, default=float))
    return path


#: the figures a step line shows, where the trainer logged them (SFT: loss; GRPO: reward too)
STEP_FIGURES = ("loss", "reward", "reward_std", "grad_norm")


def step_line(step: int, max_steps: int, logs: dict[str, Any]) -> str:
    """One line per logged step: ``step 3/40  loss 2.310  reward 0.500``."""
    shown = [f"{k} {logs[k]:.3f}" for k in STEP_FIGURES if isinstance(logs.get(k), int | float)]
    return "  ".join([f"step {step}/{max_steps}", *shown])


def log_to_file(
    trainer, out: str | Path, *, quiet: bool = False, echo: Callable[[str], None] | None = None
) -> Path:
    """Every log dict the trainer emits, appended as a JSON line to `<out>.trainer/log.jsonl`
    as it comes (a killed run keeps its steps). ``quiet`` also takes transformers' console
    printers off (the progress bar and the raw dict per step), for callers that print their
    own summary (`cafe train smoke`); ``echo`` gets one short line per logged step instead."""
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback

    path = trainer_dir(out) / "log.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)

    class LogFile(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and state.is_world_process_zero:
                with path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"step": state.global_step, **logs}, default=float) + "\n")
                if echo is not None and any(k in logs for k in STEP_FIGURES):
                    echo(step_line(state.global_step, state.max_steps, logs))

    trainer.add_callback(LogFile())
    if quiet:
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
    return path


def trl_args(
    recipe: dict[str, Any],
    block: str,
    output_dir: str | Path,
    overrides: dict[str, Any],
    **defaults: Any,
) -> dict[str, Any]:
    """Fields for a TRL trainer config: the CPU-safe defaults every cafe trainer uses (plus
    ``defaults``), then the recipe's ``block`` section (any field of that config), then
    ``overrides``."""
    return {
        "output_dir": str(output_dir),
        "report_to": [],
        "save_strategy": "no",
        "logging_steps": 1,
        "remove_unused_columns": False,
        "gradient_checkpointing": False,
        **defaults,
        **(recipe.get(block) or {}),
        **overrides,
    }


def grpo_config(recipe: dict[str, Any], output_dir: str | Path, **overrides: Any):
    """TRL GRPOConfig from the recipe's `grpo:` block (any GRPOConfig field), CPU-safe defaults."""
    from trl import GRPOConfig

    from cafe.training.recipes import check_trainer_block

    check_trainer_block(recipe, "grpo", GRPOConfig)
    return GRPOConfig(**trl_args(recipe, "grpo", output_dir, overrides))


def lora_config(recipe: dict[str, Any]):
    spec = recipe.get("lora")
    if not spec:
        return None
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", **spec)


def train_grpo(
    recipe: dict[str, Any],
    *,
    model_path: str | Path,
    data: str | Path,
    out: str | Path,
    judge: RewardJudge,
    max_steps: int | None = None,
    quiet: bool = False,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """Run GRPO from a recipe and save the merged checkpoint to ``out``; returns ``out``.
    The trainer's per-step logs go to `<out>.trainer/log.jsonl` (``quiet``: only there;
    ``echo``: a line per step as well)."""
    from datasets import Dataset

    model, processor, rows = load_training_inputs(recipe, model_path, data, "RL")
    overrides = {"max_steps": max_steps} if max_steps else {}
    args = grpo_config(recipe, trainer_dir(out), **overrides)
    from cafe.training.audio_grpo import AudioGRPOTrainer  # torch and TRL: the train extra

    trainer = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(judge, RewardWeights.from_dict(recipe.get("rewards")))],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=processor,
        peft_config=lora_config(recipe),
        scripted_rollouts=ScriptedRollouts.from_recipe(recipe),
    )
    log_to_file(trainer, out, quiet=quiet, echo=echo)
    trainer.train()
    save_log_history(trainer, out)
    saved = save_checkpoint(trainer.model, processor, out, base=model_path)
    from cafe.training.card import write_card

    write_card(saved, recipe, model_path, data, "grpo")  # runs as itself: `cafe run --model`
    return saved
