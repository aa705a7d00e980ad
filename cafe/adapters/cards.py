"""Model cards: YAML files in cafe/adapters/cards/ (one per engine family), plus any file a user
names with --cards or $CAFE_CARDS. A card maps a model name to adapter, checkpoint, prompt style,
generation defaults and paper group."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from cafe.adapters.base import ModelCard
from cafe.records import InputError, Problem, read_yaml

CARDS_DIR = Path(__file__).parent / "cards"
#: the card a checkpoint folder carries (`cafe train` writes one): `cafe run --model FOLDER`
#: runs the checkpoint under its own name, group and prompt style
FOLDER_CARD = "cafe-card.yaml"
#: the groups `cafe train` gives its checkpoints (cafe.training.card): the only ones a folder's
#: card may claim unconfirmed
TRAINED_GROUPS = ("MPAR²", "Ours")
#: options that pick where calls go or which key they carry: only the user sets them (command
#: line, environment, their own --cards), never a card that arrived with downloaded weights
_REACHES_OUT = re.compile(
    r"(^|_)(endpoints?|url|urls|base|key|keys|host|port|token|address)(_env)?$"
)
#: options that place the work on a machine (a Ray cluster to join, vllm_dp's ``ray``)
_PLACES = ("ray",)
#: options naming another model a card's adapter calls (a cascade's back and front)
_PICKS_A_MODEL = ("back", "front", "card")
#: card fields of the same kind (``launch``: a command line to start a server)
_CARD_REACHES_OUT = ("launch",)
#: what makes the engine import Python shipped beside the weights: an adapter that always does
#: (``hf-remote-code``), or the option that tells transformers or vLLM to
_RUNS_CODE_ADAPTERS = ("hf-remote-code",)
_RUNS_CODE_OPTIONS = ("trust_remote_code",)


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
        if Path(p).name != FOLDER_CARD:  # a folder's card named to trust it (folder_card)
            cards.update(_read(Path(p)))
    return cards


def trusted_folder(folder: str | Path, cards_files: list[str | Path] | None) -> bool:
    """Whether the user vouched for ``folder``'s card: named it with --cards (or --trust-card,
    which names it so)."""
    own = (Path(folder) / FOLDER_CARD).resolve()
    return any(Path(p).resolve() == own for p in cards_files or [])


def untrusted_fields(data: dict, known_names: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What a folder's card ``data`` claims that only the user may (one ``field: why`` each):
    an endpoint or key option, a server launch line, a paper group other than a trained
    checkpoint's, another known model's name, running the code shipped with the weights."""
    out = []
    if str(data.get("adapter")) in _RUNS_CODE_ADAPTERS:
        out.append(f"adapter: {data.get('adapter')!r} runs the Python shipped with the weights")
    out += _option_claims(data.get("options"), "options")
    out += [f"{f}: a command to start a server" for f in _CARD_REACHES_OUT if data.get(f)]
    group = data.get("group")
    if group is not None and group not in TRAINED_GROUPS:
        trained = ", ".join(TRAINED_GROUPS)
        out.append(f"group: {group!r} (a trained checkpoint's is one of {trained})")
    if str(data.get("name")) in known_names:
        out.append(f"name: {data.get('name')!r} is another model's (a built-in card or adapter)")
    return out


def _option_claims(options: Any, at: str) -> list[str]:
    """What the options under ``at`` claim that only the user may, nested options included
    (``ray: {address: …}``, a cascade part's ``{url: …}``)."""
    if isinstance(options, list):  # a list of parts: each one's options under its index
        return [c for i, part in enumerate(options) for c in _option_claims(part, f"{at}[{i}]")]
    out = []
    for key in sorted(options, key=str) if isinstance(options, dict) else []:
        where = f"{at}.{key}"
        if _REACHES_OUT.search(str(key)):
            out.append(f"{where}: picks where calls go or which key they carry")
        elif key in _PICKS_A_MODEL:
            out.append(f"{where}: names another model to call (and so its service)")
        elif key in _PLACES:
            out.append(f"{where}: picks the cluster the model runs on")
        elif key in _RUNS_CODE_OPTIONS and options[key] not in (False, None, "false", "no", 0):
            out.append(f"{where}: runs the Python shipped with the weights")
        else:
            out += _option_claims(options[key], where)
    return out


def folder_card(
    folder: str | Path, trusted: bool = False, known_names: set[str] | frozenset[str] = frozenset()
) -> ModelCard | None:
    """The card a checkpoint folder carries (its FOLDER_CARD: one card, its name inside), with
    the folder as its checkpoint; None where it has none. A damaged one is one InputError, and
    so is one claiming what only the user may (``untrusted_fields``) unless ``trusted``: it
    came with the weights, from whoever made them."""
    path = Path(folder) / FOLDER_CARD
    if not path.is_file():
        return None
    data = read_yaml(path)
    if not isinstance(data, dict) or not data.get("name") or "adapter" not in data:
        raise InputError(Problem(str(path), "a checkpoint's card needs a name and an adapter"))
    claims = [] if trusted else untrusted_fields(data, known_names)
    more = f" ({len(claims) - 1} more such field(s))" if len(claims) > 1 else ""
    if claims:
        raise InputError(
            Problem(
                str(path),
                f"field {claims[0]}; a card that came with the weights may name its model and "
                "prompt only: pass that option yourself, or --trust-card to accept the card "
                f"as written{more}",
            )
        )
    body = {k: v for k, v in data.items() if k != "name"}
    try:
        card = ModelCard.from_dict(str(data["name"]), {**body, "checkpoint": str(folder)})
    except (TypeError, ValueError) as e:
        raise InputError(Problem(str(path), str(e), f"card {data['name']}")) from None
    return card
