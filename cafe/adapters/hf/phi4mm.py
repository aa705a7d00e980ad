"""Microsoft Phi-4-multimodal-instruct (the transformers-native -hf layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.adapters.hf.base import TransformersAdapter


class Phi4MultimodalAdapter(TransformersAdapter):
    """Phi4MultimodalForCausalLM. Use the transformers-native checkpoint
    (microsoft/Phi-4-multimodal-instruct at revision refs/pr/70, or a copy converted with
    transformers' convert script); the original repo's remote code targets transformers 4.48."""

    model_class = "Phi4MultimodalForCausalLM"
    processor_class = "Phi4MultimodalProcessor"
    MODEL_TYPES = {"phi4_multimodal": "phi-4-multimodal"}

    def load_model(self, path: str, **kwargs: Any) -> Any:
        model = super().load_model(path, **kwargs)
        # the released checkpoint hears speech through a LoRA adapter (subfolder speech-lora);
        # the card names it; a local folder without it (merged or converted) runs as it is
        sub = self.options.get("speech_lora")
        if sub and (not Path(path).is_dir() or (Path(path) / sub).is_dir()):
            model.load_adapter(path, adapter_name="speech", adapter_kwargs={"subfolder": sub})
            model.set_adapter("speech")
        return model
