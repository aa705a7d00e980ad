"""Qwen2.5-Omni thinker (3B, 7B) and its fine-tunes: Omni-R1, Audio-Thinker, MPAR².

Text output only needs the thinker. Two checkpoint layouts load:
- the full Omni layout (model_type ``qwen2_5_omni``: thinker + talker + token2wav, as released):
  only the thinker's weights are read (``thinker.`` prefix stripped), the speech parts never load;
- a thinker-only checkpoint (model_type ``qwen2_5_omni_thinker``), what RL fine-tunes save.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cafe.adapters.hf.base import TransformersAdapter


def _model_type(path: str) -> str | None:
    """model_type from a local folder's config.json, or from the hub cache for a hub id."""
    local = Path(path) / "config.json"
    try:
        if local.is_file():
            return json.loads(local.read_text()).get("model_type")
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(path).model_type
    except (OSError, ValueError):
        return None


class Qwen25OmniAdapter(TransformersAdapter):
    model_class = "Qwen2_5OmniThinkerForConditionalGeneration"
    processor_class = "Qwen2_5OmniProcessor"
    MODEL_TYPES = {"qwen2_5_omni": "qwen2.5-omni-7b", "qwen2_5_omni_thinker": "qwen2.5-omni-7b"}

    def load_model(self, path: str, **kwargs: Any) -> Any:
        from transformers import AutoConfig, Qwen2_5OmniThinkerForConditionalGeneration

        if _model_type(path) == "qwen2_5_omni":
            full = AutoConfig.from_pretrained(path)
            kwargs["config"] = full.thinker_config
            # read only thinker.* weights, renamed to the thinker's own names
            kwargs["key_mapping"] = {r"^thinker\.": ""}
        return Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, **kwargs)
