"""Model cards: YAML files in cafe/adapters/cards/ (one per engine family), plus any file a user
names with --cards or $CAFE_CARDS. A card maps a model name to adapter, checkpoint, prompt style,
generation defaults and paper group."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from cafe.adapters.base import ModelCard
from cafe.records import InputError, Problem, read_yaml

CARDS_DIR = Path(__file__).parent / "cards"
#: the card a checkpoint folder carries (`cafe train` writes one): `cafe run --model FOLDER`
#: runs the checkpoint under its own name, group and prompt style
FOLDER_CARD = "cafe-card.yaml"


def _read(path: Path) -> dict[str, ModelCard]:
    """A cards file; anything wrong in it is one InputError (file, card name, field)."""
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise InputError(Problem(str(path), "a cards file maps model names to cards"))
    cards = {}
    for name, body in data.items():
        if not isinstance(body, dict) or "adapter" not in body:
            raise InputError(Problem(str(path), "missing", f"card {name}", "adapter"))
        try:
            cards[str(name)] = ModelCard.from_dict(str(name), body)
        except (TypeError, ValueError) as e:
            raise InputError(Problem(str(path), str(e), f"card {name}")) from None
    return cards


@cache
def _builtin() -> dict[str, ModelCard]:
    cards: dict[str, ModelCard] = {}
    for path in sorted(CARDS_DIR.glob("*.yaml")):
        cards.update(_read(path))
    return cards


def load_cards(extra: list[str | Path] | None = None) -> dict[str, ModelCard]:
    """Built-in cards, then $CAFE_CARDS (os.pathsep-separated files), then ``extra``; later wins."""
    cards = dict(_builtin())
    env = [p for p in os.environ.get("CAFE_CARDS", "").split(os.pathsep) if p]
    for p in [*env, *(extra or [])]:
        cards.update(_read(Path(p)))
    return cards


def folder_card(folder: str | Path) -> ModelCard | None:
    """The card a checkpoint folder carries (its FOLDER_CARD: one card, its name inside), with
    the folder as its checkpoint; None where it has none. A damaged one is one InputError."""
    path = Path(folder) / FOLDER_CARD
    if not path.is_file():
        return None
    data = read_yaml(path)
    if not isinstance(data, dict) or not data.get("name") or "adapter" not in data:
        raise InputError(Problem(str(path), "a checkpoint's card needs a name and an adapter"))
    body = {k: v for k, v in data.items() if k != "name"}
    try:
        card = ModelCard.from_dict(str(data["name"]), {**body, "checkpoint": str(folder)})
    except (TypeError, ValueError) as e:
        raise InputError(Problem(str(path), str(e), f"card {data['name']}")) from None
    return card
