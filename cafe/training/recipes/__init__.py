"""Training recipes: YAML files naming the base model, data pipeline settings, SFT/GRPO trainer
arguments (any TRL SFTConfig / GRPOConfig field), LoRA, reward weights and the reward judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RECIPE_DIR = Path(__file__).parent


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def load_recipe(name_or_path: str | Path) -> dict[str, Any]:
    """A recipe by file path or by built-in name (see `recipe_names()`)."""
    import yaml

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
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a recipe is a YAML mapping")
    data.setdefault("name", path.stem)
    return data
