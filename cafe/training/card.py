"""The card a trained checkpoint carries (cafe.adapters.cards.FOLDER_CARD): `cafe train sft` and
`cafe train grpo` write it beside the weights, so `cafe run --model FOLDER` runs the checkpoint
as itself (its name in the report title, the leaderboard row and the figures; group MPAR²; the
mpar2 prompt it was trained on) instead of as the base model its config.json names."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

GROUP = "MPAR²"


def _sha256_of(path: str | Path) -> str | None:
    """The data's content hash: a file's bytes, a folder's content fingerprint."""
    p = Path(path)
    if p.is_file():
        return hashlib.sha256(p.read_bytes()).hexdigest()
    from cafe.manifest import checkpoint_fingerprint

    return checkpoint_fingerprint(p)


def card_name(recipe: dict[str, Any], stage: str) -> str:
    """The recipe's ``card_name``, else its name with the stage (once: mpar2-7b-grpo stays)."""
    if recipe.get("card_name"):
        return str(recipe["card_name"])
    name = str(recipe.get("name") or "mpar2")
    return name if name.endswith(stage) else f"{name}-{stage}"


def write_card(
    out: str | Path, recipe: dict[str, Any], base: str | Path, data: str | Path, stage: str
) -> Path:
    """Write ``out``/cafe-card.yaml for the checkpoint just saved there: the adapter its
    config.json resolves to (or its base's own card's), then its own name, group, prompt style
    and what made it (stage, base model, recipe name and sha256, data sha256)."""
    import yaml

    from cafe import __version__
    from cafe.adapters.cards import FOLDER_CARD, folder_card
    from cafe.adapters.resolve import resolve_model

    out = Path(out)
    (out / FOLDER_CARD).unlink(missing_ok=True)  # a retrain into the same folder: resolve anew
    parent = folder_card(base) if Path(base).is_dir() else None
    adapter_card = parent or resolve_model(str(out)).card
    recipe_json = json.dumps(recipe, sort_keys=True, ensure_ascii=False, default=str)
    trained = {
        "stage": stage,
        "base_model": str(base),
        **({"base_card": parent.name} if parent is not None else {}),
        "base_family": recipe.get("base_model"),
        "recipe": recipe.get("name"),
        "recipe_sha256": hashlib.sha256(recipe_json.encode()).hexdigest(),
        "data": str(data),
        "data_sha256": _sha256_of(data),
        "cafe": __version__,
    }
    card = dataclasses.replace(
        adapter_card,
        name=card_name(recipe, stage),
        group=str(recipe.get("card_group") or GROUP),
        prompt_style="mpar2",
        description=f"MPAR² {stage} checkpoint trained by cafe (recipe {recipe.get('name')})",
        trained=trained,
    )
    body = {k: v for k, v in dataclasses.asdict(card).items() if k != "checkpoint"}
    path = out / FOLDER_CARD
    path.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
