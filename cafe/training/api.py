"""MPAR² training as functions (what `cafe train …` runs): the data pipeline, SFT, GRPO and the
CPU smoke run. A recipe is a built-in name, a YAML path or an already loaded dict."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.errors import CafeError, CafeUsageError

Recipe = str | Path | dict[str, Any]


class RecipeError(CafeUsageError):
    """A recipe that cannot be used as given (not found, not a mapping, no model)."""


def load(name_or_path: Recipe) -> dict[str, Any]:
    """A recipe by built-in name or file path (a dict is returned as a copy)."""
    from cafe.training.recipes import load_recipe

    if isinstance(name_or_path, dict):
        return copy.deepcopy(name_or_path)
    try:
        return load_recipe(name_or_path)
    except ValueError as e:
        raise RecipeError(str(e)) from None


def _model(r: dict[str, Any], model: str | Path | None) -> str:
    path = model or r.get("model")
    if not path:
        raise RecipeError("no model: pass --model PATH or set `model:` in the recipe")
    return str(path)


def data(
    recipe: Recipe,
    *,
    workdir: str | Path | None = None,
    model: str | None = None,
    checkpoint: str | None = None,
    cards: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Build the SFT and RL files (resumable) -> {"sft": path, "rl": path, …}. ``model``,
    ``checkpoint``, ``cards`` and ``options`` override the difficulty filter's model as
    `cafe run` takes them (a served model: options={"endpoints": [URL], "model": NAME})."""
    from cafe.training.data.pipeline import run_pipeline

    r = load(recipe)
    d = r.setdefault("data", {})
    for key, value in (
        ("difficulty_model", model),
        ("difficulty_checkpoint", checkpoint),
        ("difficulty_cards", list(cards)),
        ("difficulty_options", dict(options or {})),
    ):
        if value:
            d[key] = value
    try:
        return run_pipeline(r, workdir=workdir, echo=echo)
    except ValueError as e:
        raise CafeError(str(e)) from None


def sft(
    recipe: Recipe,
    *,
    data: str | Path,
    out: str | Path,
    model: str | Path | None = None,
    max_steps: int | None = None,
) -> Path:
    """Supervised fine-tuning on MPAR² chains -> the checkpoint folder."""
    from cafe.training.sft import train_sft

    r = load(recipe)
    return train_sft(r, model_path=_model(r, model), data=data, out=out, max_steps=max_steps)


def grpo(
    recipe: Recipe,
    *,
    data: str | Path,
    out: str | Path,
    model: str | Path | None = None,
    judge: str | None = None,
    judge_model: str | None = None,
    judge_endpoints: list[str] | tuple[str, ...] = (),
    judge_concurrency: int | None = None,
    judge_api_key_env: str | None = None,
    max_steps: int | None = None,
) -> Path:
    """GRPO with the MPAR² rewards -> the checkpoint folder. ``judge``: "offline" or a chat
    client kind (default: the recipe's)."""
    from cafe.training.grpo import train_grpo

    r = load(recipe)
    from cafe.training.reward_judge import judge_from_recipe

    rj = judge_from_recipe(
        r, judge, judge_model, judge_endpoints, concurrency=judge_concurrency,
        api_key_env=judge_api_key_env,
    )  # fmt: skip
    return train_grpo(
        r, model_path=_model(r, model), data=data, out=out, judge=rj, max_steps=max_steps
    )


def smoke(
    workdir: str | Path | None = None,
    *,
    limit: int = 8,
    recipe: Recipe = "smoke",
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole MPAR² path at toy scale on a CPU -> before/after scores, checkpoint, signals."""
    from cafe.training.smoke import run_smoke

    return run_smoke(
        Path(workdir) if workdir else None, limit=limit, recipe=load(recipe), echo=echo
    )


def recipes() -> list[str]:
    """The built-in recipe names."""
    from cafe.training.recipes import recipe_names

    return recipe_names()
