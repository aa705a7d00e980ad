"""Training recipes: YAML files naming the base model, data pipeline settings, SFT/GRPO trainer
arguments (any TRL SFTConfig / GRPOConfig field), LoRA, reward weights and the reward judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RECIPE_DIR = Path(__file__).parent
#: top-level recipe keys (``sft`` / ``grpo`` take any field of TRL's SFTConfig / GRPOConfig,
#: checked when the trainer is built; ``data`` any DataConfig field; ``rewards`` any
#: RewardWeights field)
KEYS = frozenset(
    {"name", "description", "recipe_file", "base_model", "model", "dtype", "tiny_model"}
    | {"data", "rewards", "judge", "lora", "sft", "grpo", "eval_seed", "eval_max_new_tokens"}
    | {"scripted_rollouts"}  # smoke only: rollouts.ScriptedRollouts
)
JUDGE_KEYS = frozenset(
    {"kind", "model", "endpoints", "cache", "templates", "concurrency", "thinking"}
    | {"thinking_budget", "parse"}
)


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def load_recipe(name_or_path: str | Path) -> dict[str, Any]:
    """A recipe by file path or by built-in name (see `recipe_names()`)."""
    path = Path(name_or_path)
    if not path.is_file():
        path = RECIPE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        import difflib

        close = difflib.get_close_matches(str(name_or_path), recipe_names(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"recipe {name_or_path!r} is neither a file nor a built-in recipe{hint} "
            f"(built-in: {', '.join(recipe_names())})"
        )
    from cafe.records import read_yaml

    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a recipe is a YAML mapping")
    check_recipe(data, path)
    data.setdefault("name", path.stem)
    data["recipe_file"] = str(path)
    return data


def _unknown(path: str | Path, where: str, keys: Any, known: Any) -> None:
    unknown = sorted(set(keys) - set(known))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"{path}: unknown recipe key {where}{unknown[0]!r}{hint} "
            f"(known: {', '.join(sorted(known))})"
        )


def check_recipe(data: dict[str, Any], path: str | Path) -> None:
    """Every key a recipe holds must be one something reads: a typo is an error naming the key
    and the file, never a setting silently ignored."""
    from dataclasses import fields

    from cafe.training.data.pipeline import DataConfig
    from cafe.training.rewards import RewardWeights

    _unknown(path, "", data, KEYS)
    blocks = {
        "data": {f.name for f in fields(DataConfig)},
        "rewards": {f.name for f in fields(RewardWeights)},
        "judge": JUDGE_KEYS,
    }
    for block, known in blocks.items():
        value = data.get(block)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ValueError(f"{path}: recipe key {block!r}: a mapping of settings")
        _unknown(path, f"{block}.", value, known)


def check_trainer_block(recipe: dict[str, Any], block: str, config_cls: type) -> None:
    """The recipe's ``sft:`` / ``grpo:`` keys must be fields of TRL's config class."""
    from dataclasses import fields

    value = recipe.get(block) or {}
    where = recipe.get("recipe_file") or f"recipe {recipe.get('name')!r}"
    _unknown(where, f"{block}.", value, {f.name for f in fields(config_cls)})
