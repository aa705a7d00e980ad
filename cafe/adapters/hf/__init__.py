"""transformers adapters, one module per model family; see docs/adapters-hf.md.

Each adapter class declares ``MODEL_TYPES`` (HF config ``model_type`` -> model card name), which
the runner's resolver reads so that ``cafe run --model <checkpoint folder>`` picks the card;
``model_types()`` merges them (importing numpy, never torch or transformers)."""

from __future__ import annotations

from cafe.adapters.base import ADAPTERS

#: the adapters this package registers (see cafe/adapters/__init__.py)
HF_ADAPTERS = ("qwen2-audio", "qwen2.5-omni", "audio-flamingo-3", "phi-4-multimodal")


def model_types() -> dict[str, str]:
    """HF ``model_type`` -> card name, over this package's adapters."""
    out: dict[str, str] = {}
    for name in HF_ADAPTERS:
        out.update(getattr(ADAPTERS.get(name), "MODEL_TYPES", {}))
    return out
