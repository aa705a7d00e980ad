"""transformers adapters, one module per model family; see docs/adapters-hf.md.

Each family module declares ``MODEL_TYPES`` (HF config ``model_type`` -> adapter name) so a
checkpoint folder alone can pick its adapter; ``model_types()`` merges them without importing
torch or transformers."""

from __future__ import annotations

import importlib

FAMILY_MODULES = (
    "cafe.adapters.hf.qwen2_audio",
    "cafe.adapters.hf.qwen2_5_omni",
    "cafe.adapters.hf.audio_flamingo3",
    "cafe.adapters.hf.phi4mm",
    "cafe.adapters.hf.remote",
)


def model_types() -> dict[str, str]:
    """HF ``model_type`` -> cafe adapter name, over every family module."""
    out: dict[str, str] = {}
    for name in FAMILY_MODULES:
        out.update(getattr(importlib.import_module(name), "MODEL_TYPES", {}))
    return out
