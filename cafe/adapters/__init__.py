"""Model adapters. Built-ins register lazily here (module imported on first use); other packages
register through the ``cafe.adapters`` entry-point group."""

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard

# name -> "module:Class"; heavy engines import only when their adapter is asked for
for _name, _target in {
    "openai-compatible": "cafe.adapters.openai_compat:OpenAICompatAdapter",
    "openai-audio": "cafe.adapters.openai_audio:OpenAIAudioAdapter",
    "gemini": "cafe.adapters.gemini:GeminiAdapter",
    "vllm": "cafe.adapters.vllm:VLLMAdapter",
}.items():
    ADAPTERS.add_lazy(_name, _target)

__all__ = ["ADAPTERS", "Adapter", "ModelCard"]
