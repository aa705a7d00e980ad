"""The name a run's model goes by on every page, table, figure and leaderboard row: the model a
server-backed adapter asked for (``-o model=NAME``, the served name) before the card's name, so
two served models never both read "openai-compatible"; the adapter stays on its own line."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def served_model(manifest: dict[str, Any]) -> str | None:
    """The model a server-backed adapter asked for (``-o model=NAME``), from the run spec (or
    the adapter options of an older folder)."""
    options = (manifest.get("spec") or {}).get("adapter_options") or manifest.get("adapter_options")
    name = (options or {}).get("model") if isinstance(options, dict) else None
    return None if name is None else str(name)


def model_name(manifest: dict[str, Any]) -> str | None:
    """The served name, else the card's name (None when the manifest names neither)."""
    card = manifest.get("model")
    card_name = card.get("name") if isinstance(card, dict) else card
    return served_model(manifest) or (None if card_name is None else str(card_name))


def shared_path(path: str | Path) -> str:
    """A run folder as pages and leaderboards meant to be shared name it: relative to the
    working folder when inside it, else its own name; never the user's absolute path."""
    real = Path(path).resolve()
    try:
        return real.relative_to(Path.cwd().resolve()).as_posix() or "."
    except ValueError:
        return real.name


def without_machine_paths(text: str, *folders: str | Path) -> str:
    """``text`` with each run folder's full path (as given and as resolved) written as
    ``shared_path`` writes it: a message about the folder stays, the machine's path goes."""
    for folder in folders:
        for spelled in {str(Path(folder).resolve()), str(Path(folder).absolute())}:
            text = text.replace(spelled, shared_path(folder))
    return text
