"""From a --model argument to a model card, a checkpoint and a loaded adapter: the one model
resolution that `cafe run`, doctor, attention, the training data filter and GRPO all use."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard
from cafe.errors import CafeError


class ModelNotFound(CafeError, ValueError):
    """--model names no card, adapter or checkpoint folder; the message says what to pass."""


class ModelLoadError(CafeError, RuntimeError):
    """The adapter could not load the model (no weights, no key, missing extra): one line."""


@dataclass
class ResolvedModel:
    card: ModelCard
    label: str  # names the default run folder
    checkpoint: str | None


def default_card(name: str, cls: type[Adapter]) -> ModelCard:
    """The card of an adapter named directly: its ``default_card`` or one from its attributes."""
    card = getattr(cls, "default_card", None)
    if isinstance(card, ModelCard):
        return card
    return ModelCard(
        name=name,
        adapter=name,
        prompt_style=getattr(cls, "prompt_style", "lalm"),
        group=getattr(cls, "group", "Baseline"),
        engine=getattr(cls, "engine", "cpu"),
        description=(cls.__doc__ or "").strip().split("\n")[0],
    )


#: why adapters were skipped by the last model_type_cards() (their module would not import)
IMPORT_FAILURES: list[str] = []


def model_type_cards() -> dict[str, str]:
    """config.json ``model_type`` -> card or adapter name, from the ``MODEL_TYPES`` dicts that
    adapter classes or their modules declare (e.g. ``MODEL_TYPES = {"qwen2_audio":
    "qwen2-audio"}``). Only used when --model is a checkpoint folder; adapters whose engine is
    not installed are skipped."""
    mapping: dict[str, str] = {}
    IMPORT_FAILURES.clear()
    for name in ADAPTERS.names():
        try:
            cls = ADAPTERS.get(name)
        except Exception as e:  # an optional engine not installed, or a broken module
            IMPORT_FAILURES.append(str(e))
            continue
        module = sys.modules.get(getattr(cls, "__module__", ""))
        mapping.update(getattr(module, "MODEL_TYPES", None) or {})
        mapping.update(getattr(cls, "MODEL_TYPES", None) or {})
    return mapping


def resolve_model(
    model: str, checkpoint: str | None = None, cards_files: list[str] | None = None
) -> ResolvedModel:
    """--model is a card name, a registered adapter name, or a checkpoint folder."""
    from cafe.adapters.cards import load_cards

    cards = load_cards(list(cards_files or []))
    if model in cards:
        card = cards[model]
        label = card.name if checkpoint is None else f"{card.name}@{Path(checkpoint).name}"
        return ResolvedModel(card, label, checkpoint or card.checkpoint)
    if model in ADAPTERS.names():
        card = default_card(model, ADAPTERS.get(model))
        label = model if checkpoint is None else f"{model}@{Path(checkpoint).name}"
        return ResolvedModel(card, label, checkpoint or card.checkpoint)
    path = Path(model)
    if path.is_dir():
        from cafe.adapters.cards import folder_card, trusted_folder

        trusted = trusted_folder(path, cards_files)
        known = set(cards) | set(ADAPTERS.names())
        own = folder_card(path, trusted, known)  # a trained checkpoint runs as itself
        if own is not None:  # its run folders say its name, and which folder held it
            label = own.name if own.name == path.name else f"{own.name}@{path.name}"
            return ResolvedModel(own, label, str(path))
        config = path / "config.json"
        if not config.exists():
            raise ModelNotFound(f"{path}: not a checkpoint folder (no config.json)")
        try:
            model_type = json.loads(config.read_text()).get("model_type")
        except (json.JSONDecodeError, AttributeError):
            raise ModelNotFound(f"{config}: field model_type: not readable JSON") from None
        name = model_type_cards().get(str(model_type))
        if name in cards:
            card = cards[name]
        elif name is not None and name in ADAPTERS.names():
            card = default_card(name, ADAPTERS.get(name))
        else:
            skipped = f"; adapters that could not be imported: {'; '.join(IMPORT_FAILURES)}"
            raise ModelNotFound(
                f"{config}: field model_type: no adapter declares {model_type!r}; "
                "pass --model CARD --checkpoint PATH (see `cafe adapters list`)"
                + (skipped if IMPORT_FAILURES else "")
            )
        return ResolvedModel(replace(card, checkpoint=str(path)), path.name, str(path))
    import difflib

    known = sorted(set(cards) | set(ADAPTERS.names()))
    close = difflib.get_close_matches(model, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ModelNotFound(
        f"unknown model {model!r}{hint} (a card name, an adapter name or a checkpoint folder; "
        "`cafe adapters list` shows them)"
    )


#: a hub repository id (org/name), as opposed to a local path
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
#: seconds to wait for the hub before saying it cannot be reached
HUB_PROBE_S = 3.0


def check_loadable(resolved: ResolvedModel) -> None:
    """What can be known without loading, said at once (ModelLoadError): an engine that is not
    installed (named with the extra that installs it), weights that are neither local nor in
    the Hugging Face cache while the hub is off or out of reach (instead of minutes of
    retries). Checked before any run folder is made."""
    import importlib.util

    card = resolved.card
    cls = ADAPTERS.get(card.adapter)
    ckpt = resolved.checkpoint or card.checkpoint
    what = f"cannot load model {card.name!r} (adapter {card.adapter}, checkpoint {ckpt or '-'})"
    need = getattr(cls, "requires", None)
    if need and importlib.util.find_spec(need[0]) is None:
        how = getattr(cls, "install", None) or (
            f'pip install -e ".[{need[1]}]" (from a checkout; or pip install '
            f'"cafe-audio-eval[{need[1]}]")'
        )
        raise ModelLoadError(f"{what}: it needs {need[0]}, which is not installed here: {how}")
    if not getattr(cls, "weights_from_hub", False) or not ckpt or Path(ckpt).expanduser().exists():
        return
    if not _REPO_ID.fullmatch(ckpt):
        raise ModelLoadError(f"{what}: no such folder")
    if _in_hub_cache(ckpt):
        return
    cache = os.environ.get("HF_HUB_CACHE") or _hub_cache_dir()
    advice = (
        f"pass --checkpoint PATH to a local copy, or fetch {ckpt} where the hub is reachable "
        f"(`hf download {ckpt}`) into the cache ({cache})"
    )
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ModelLoadError(
            f"{what}: its weights {ckpt} are not in the local Hugging Face cache and the hub "
            f"is switched off (HF_HUB_OFFLINE=1); {advice}"
        )
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    if not _reachable(endpoint):
        raise ModelLoadError(
            f"{what}: its weights {ckpt} are not in the local Hugging Face cache and the hub "
            f"({endpoint}) cannot be reached; {advice}; set HF_HUB_OFFLINE=1 to work offline "
            "without waiting on the network"
        )


def _hub_cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _in_hub_cache(repo: str) -> bool:
    """Whether the repo's config.json is in the hub cache (read where HF_HUB_CACHE says now)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return True  # no hub client: the adapter's own loader says what is wrong
    cache = os.environ.get("HF_HUB_CACHE") or _hub_cache_dir()
    return isinstance(try_to_load_from_cache(repo, "config.json", cache_dir=cache), str)


def _reachable(url: str) -> bool:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=HUB_PROBE_S).close()
    except OSError:
        return False
    return True


def load_adapter(resolved: ResolvedModel, options: dict[str, Any] | None = None) -> Adapter:
    """Construct (load) the resolved model's adapter with ``options`` (the -o pairs; ``ray``:
    its placement on Ray actors, cafe.cluster.pool). A model
    that cannot load is one ModelLoadError line naming model, adapter and checkpoint (what can
    be known before loading, at once: ``check_loadable``)."""
    card = resolved.card
    check_loadable(resolved)
    cls = ADAPTERS.get(card.adapter)
    options = dict(options or {})
    placement = options.pop("ray", None)  # --engine ray: the adapter's replicas on Ray actors
    try:
        if placement:
            from cafe.cluster.pool import RayAdapter

            return RayAdapter(card.adapter, card, resolved.checkpoint, options, **placement)
        return cls(card, checkpoint=resolved.checkpoint, **options)
    except (OSError, ValueError, ImportError) as e:  # missing weights, key, extra
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ModelLoadError(
            f"cannot load model {card.name!r} (adapter {card.adapter}, checkpoint "
            f"{resolved.checkpoint or '-'}): {first}"
        ) from e
