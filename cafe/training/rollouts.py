"""What AudioGRPOTrainer needs around its rollouts, below both it and cafe.training.grpo (which
builds the trainer): the audio feature keys, the audio placeholder id, the vLLM engine's
modality limits and weight names, and the smoke run's scripted rollouts. No torch or TRL here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

AUDIO_FEATURE_KEYS = ("input_features", "feature_attention_mask")

_ANY_TAG = re.compile(r"</?[A-Za-z_]+>")


@dataclass(frozen=True)
class ScriptedRollouts:
    """The last ``n`` completions of every GRPO group are written, not sampled: the row's
    reference MPAR² chain (the rule CoT writer on its events: format-correct, right answer)
    and, from the second on, that chain with its tags stripped (fails the format, scores 0).
    The group's rewards then differ by construction, so its advantages and the policy gradient
    are non-zero whatever a random policy samples; everything after generation (rewards,
    advantages, log-probs, loss, optimiser step) is TRL's real path. For the CPU smoke run
    (recipe key ``scripted_rollouts``); the paper's recipes never set it."""

    n: int
    cot_style: str = "full"

    def texts(self, row: dict[str, Any]) -> list[str]:
        from cafe.training.data.rules import write_cot

        question = {"answer_text": row["answer"], "dimension": row.get("dimension") or ""}
        gold = write_cot({"events": row.get("events") or []}, question, self.cot_style)
        stripped = " ".join(_ANY_TAG.sub(" ", gold).split())
        return [gold, *[stripped] * (self.n - 1)]

    def apply(
        self,
        completion_ids: list[list[int]],
        rows: list[dict[str, Any]],
        num_generations: int,
        tokenizer: Any,
        eos_id: int,
    ) -> list[list[int]]:
        """Rows come in groups of ``num_generations`` consecutive copies of one prompt (TRL's
        RepeatSampler); each group's last ``n`` completions are replaced."""
        if not 0 < self.n < num_generations:
            raise ValueError(
                f"scripted_rollouts: {self.n} must be at least 1 and below num_generations "
                f"({num_generations}), so every group keeps a sampled completion"
            )
        out = [list(c) for c in completion_ids]
        for start in range(0, len(out), num_generations):
            texts = self.texts(rows[start])
            for j, text in enumerate(texts):
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                out[start + num_generations - self.n + j] = [*ids, eos_id]
        return out

    @classmethod
    def from_recipe(cls, recipe: dict[str, Any]) -> ScriptedRollouts | None:
        n = int(recipe.get("scripted_rollouts") or 0)
        style = (recipe.get("data") or {}).get("cot_style") or "full"
        return cls(n, style) if n else None


def audio_token_id(config: Any) -> int | None:
    """The audio placeholder id a processor expands (audio_token_id or audio_token_index)."""
    for key in ("audio_token_id", "audio_token_index"):
        value = getattr(config, key, None)
        if value is not None:
            return int(value)
    return None


#: policy model_type -> the vLLM family its rollout engine belongs to (modality limits and
#: weight names; a thinker policy is served from the full Omni layout)
_POLICY_FAMILY = {
    "qwen2_5_omni_thinker": "qwen2.5-omni",
    "qwen2_audio": "qwen2-audio",
    "audioflamingo3": "audio-flamingo-3",
}


def vllm_engine_overrides(model: Any) -> dict[str, Any]:
    """LLM(...) keywords TRL's colocated engine needs for this policy: one clip per prompt
    and no other modality (vLLM's example sets image/video to 0; otherwise the Omni thinker
    builds its vision tower and loses KV-cache memory)."""
    from cafe.adapters.vllm_families import FAMILIES

    family = _POLICY_FAMILY.get(getattr(model.config, "model_type", ""))
    if family is None:
        return {}
    return {"limit_mm_per_prompt": FAMILIES.get(family).limits(1)}


def rename_weights_for_vllm(generation: Any, model_type: str) -> None:
    """Weight sync pushes each parameter under the name vLLM's loader takes for this family
    (transformers 5 names differ from the checkpoint names vLLM maps; see vllm_families)."""
    from cafe.adapters.vllm_families import FAMILIES

    family = _POLICY_FAMILY.get(model_type)
    rename = FAMILIES.get(family).weight_name if family else None
    if rename is None:
        return
    named = generation._iter_named_params

    def renamed():
        for name, param in named():  # every rank iterates (gathers are collective)
            new = rename(name)
            if new is not None:
                yield new, param

    generation._iter_named_params = renamed
