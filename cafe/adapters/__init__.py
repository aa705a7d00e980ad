"""Model adapters. Built-ins register lazily here (module imported on first use); other packages
register through the ``cafe.adapters`` entry-point group."""

from __future__ import annotations

from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard

# name -> "module:Class"; heavy engines import only when their adapter is asked for
for _name, _target in {
    "qwen2-audio": "cafe.adapters.hf.qwen2_audio:Qwen2AudioAdapter",
    "qwen2.5-omni": "cafe.adapters.hf.qwen2_5_omni:Qwen25OmniAdapter",
    "audio-flamingo-3": "cafe.adapters.hf.audio_flamingo3:AudioFlamingo3Adapter",
    "phi-4-multimodal": "cafe.adapters.hf.phi4mm:Phi4MultimodalAdapter",
    "hf-remote-code": "cafe.adapters.hf.remote:RemoteCodeAdapter",
    "desta2.5": "cafe.adapters.hf.remote:DeSTA25Adapter",
    "reference": "cafe.adapters.reference:ReferenceAdapter",
    "random": "cafe.adapters.random_baseline:RandomAdapter",
    "openai-compatible": "cafe.adapters.openai_compat:OpenAICompatAdapter",
    "openai-audio": "cafe.adapters.openai_audio:OpenAIAudioAdapter",
    "gemini": "cafe.adapters.gemini:GeminiAdapter",
    "vllm": "cafe.adapters.vllm:VLLMAdapter",
    "cascade": "cafe.adapters.cascade:CascadeAdapter",
    "llama-cpp": "cafe.adapters.llama_cpp:LlamaCppAdapter",
}.items():
    ADAPTERS.add_lazy(_name, _target)

__all__ = ["ADAPTERS", "Adapter", "ModelCard", "load_model"]


def load_model(
    model: str,
    checkpoint: str | None = None,
    cards: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
) -> tuple[Any, Adapter]:
    """(resolved model, loaded adapter) for a --model argument as `cafe run` resolves and loads
    it, with adapter ``options`` (-o pairs, endpoints). A model that cannot be found or loaded
    is one ModelNotFound / ModelLoadError line, never a traceback."""
    from cafe.adapters.resolve import load_adapter, resolve_model

    resolved = resolve_model(model, checkpoint, list(cards))
    adapter = load_adapter(resolved, options)
    return resolved, adapter


def list_models(cards: list[str] | tuple[str, ...] = ()) -> list[dict[str, str]]:
    """Every model card (name, adapter, engine, group, prompt style, decoding, checkpoint), then
    the registered adapters no card uses (run them with --model ADAPTER)."""
    from cafe.adapters.cards import load_cards

    all_cards = load_cards(list(cards))
    # decoding: greedy cards give identical --runs (marked "greedy"); unsupported ones say so
    rows = [
        {
            "name": c.name,
            "adapter": c.adapter,
            "engine": c.engine,
            "group": c.group,
            "prompt_style": c.prompt_style,
            "decoding": "unsupported" if c.unsupported else "greedy" if c.greedy else "sampled",
            "checkpoint": c.checkpoint or "-",
        }
        for c in sorted(all_cards.values(), key=lambda c: (c.group, c.name))
    ]
    used = {c.adapter for c in all_cards.values()}
    for name in ADAPTERS.names():
        if name not in used and name not in all_cards:
            rows.append(
                {
                    "name": name,
                    "adapter": name,
                    "engine": "-",
                    "group": "-",
                    "prompt_style": "-",
                    "decoding": "-",
                    "checkpoint": "(adapter, no card)",
                }
            )
    return rows


def show_model(name: str, cards: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """One model card (or an adapter's default card) as a dict, with its prompt template hash."""
    import dataclasses

    from cafe.adapters.resolve import resolve_model
    from cafe.prompts import load_template
    from cafe.redaction import scrub

    card = resolve_model(name, None, list(cards)).card
    data = scrub(dataclasses.asdict(card))  # card options may name credentials or URL keys
    data["prompt_template_hash"] = load_template(card.prompt_style).hash
    return data
