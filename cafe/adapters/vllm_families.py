"""How each audio family's prompt is written for offline vLLM, following vLLM's own example
(examples/offline_inference/audio_language.py) rather than each checkpoint's chat template:
several released templates do not render a bare ``{"type": "audio"}`` part (Qwen2-Audio's tests
for an ``audio`` / ``audio_url`` key; Phi-4-multimodal's concatenates the content as a string),
and vLLM expands exactly one placeholder per clip.

A family is picked by the card's ``family`` option, else by the checkpoint's ``model_type``
(``FAMILY_BY_MODEL_TYPE``); a family not listed renders through the checkpoint's own template.
Each family also says which other modalities vLLM must not reserve memory for (vLLM's example
sets image and video to 0: otherwise the Qwen2.5-Omni thinker builds its vision tower), which
audio token vLLM expands (what GRPO hands vLLM unexpanded), how trained parameter names map to
vLLM's loader, and, for checkpoints vLLM cannot serve as cafe needs, why not."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cafe.registry import Registry

Conv = list[dict[str, Any]]  # processor chat format: [{"role", "content": [parts]}]

_QWEN_SYSTEM = "You are a helpful assistant."
# vLLM's Qwen2.5-Omni / Qwen3-Omni examples use the Omni system prompt when the prompt has none
_OMNI_SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
    "perceiving auditory and visual inputs, as well as generating text and speech."
)
_GRANITE_SYSTEM = (
    "Knowledge Cutoff Date: April 2024.\nToday's Date: December 19, 2024.\n"
    "You are Granite, developed by IBM. You are a helpful AI assistant"
)


@dataclass(frozen=True)
class VLLMFamily:
    name: str
    #: the placeholder of clip ``i`` (1-based) as the prompt text holds it
    placeholder: Callable[[int], str] | None = None
    #: the chat layout the placeholders sit in (None: the tokenizer's own chat template)
    layout: Callable[[Conv, str | None], str] | None = None
    default_system: str | None = None
    #: the token vLLM's multimodal processor replaces by one token per audio embedding
    audio_token: str | None = None
    #: limit_mm_per_prompt for the modalities cafe never sends
    other_modalities: dict[str, int] = field(default_factory=lambda: {"image": 0, "video": 0})
    #: transformers parameter name -> the name vLLM's load_weights takes (None: skip it)
    weight_name: Callable[[str], str | None] | None = None
    #: why cafe does not run this family on offline vLLM (None: it does)
    unsupported: str | None = None

    def render(self, conv: Conv, tokenizer: Any) -> str:
        """The prompt text with one placeholder per clip, in the family's chat layout."""
        if self.unsupported:
            raise ValueError(self.unsupported)
        if self.placeholder is None:  # the checkpoint's own template with bare audio parts
            return tokenizer.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        flat = _flatten(conv, self.placeholder)
        if self.layout is None:  # string content through the tokenizer's template (Ultravox)
            return tokenizer.apply_chat_template(flat, add_generation_prompt=True, tokenize=False)
        return self.layout(flat, self.default_system)

    def limits(self, audio: int) -> dict[str, int]:
        return {**self.other_modalities, "audio": audio}


def _flatten(conv: Conv, placeholder: Callable[[int], str]) -> Conv:
    """Content parts -> one string per message, each audio part its numbered placeholder."""
    n = 0
    out = []
    for m in conv:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        text = []
        for part in content or []:
            if part.get("type") == "audio":
                n += 1
                text.append(placeholder(n))
            elif part.get("type") == "text":
                text.append(part.get("text") or "")
            else:
                raise ValueError(f"vLLM prompt: unsupported content part {part.get('type')!r}")
        out.append({"role": m["role"], "content": "".join(text)})
    return out


def _chatml(conv: Conv, system: str | None) -> str:
    msgs = conv if conv and conv[0]["role"] == "system" or system is None else [
        {"role": "system", "content": system}, *conv
    ]  # fmt: skip
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
    return body + "<|im_start|>assistant\n"


def _phi(conv: Conv, system: str | None) -> str:
    body = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in conv)
    return body + "<|assistant|>"


def _granite(conv: Conv, system: str | None) -> str:
    msgs = conv if conv and conv[0]["role"] == "system" or system is None else [
        {"role": "system", "content": system}, *conv
    ]  # fmt: skip
    body = "".join(
        f"<|start_of_role|>{m['role']}<|end_of_role|>{m['content']}<|end_of_text|>\n" for m in msgs
    )
    return body + "<|start_of_role|>assistant<|end_of_role|>"


# ---- weight names for GRPO's weight sync (vLLM colocate) ----------------------------------
# vLLM's Qwen2_5OmniThinkerForConditionalGeneration.load_weights runs its hf_to_vllm_mapper
# (prefixes "thinker.lm_head." -> "language_model.lm_head.", "thinker.model." ->
# "language_model.model.", "thinker." -> "") over the names it is given, i.e. it expects the
# released checkpoint's names. transformers 5 names the thinker's parameters
# model.language_model.*, model.audio_tower.*, model.visual.* and lm_head.*; the released
# checkpoint (and transformers' own save) calls them thinker.model.*, thinker.audio_tower.*,
# thinker.visual.* and thinker.lm_head.*.
_OMNI_THINKER_NAMES = (
    (re.compile(r"^model\.language_model\."), "thinker.model."),
    (re.compile(r"^model\.audio_tower\."), "thinker.audio_tower."),
    (re.compile(r"^model\.visual\."), None),  # vision tower off (image/video limits 0)
    (re.compile(r"^lm_head\."), "thinker.lm_head."),
)


def omni_thinker_weight_name(name: str) -> str | None:
    for pattern, new in _OMNI_THINKER_NAMES:
        if pattern.match(name):
            return None if new is None else pattern.sub(new, name, count=1)
    raise ValueError(f"{name}: no vLLM Qwen2.5-Omni thinker name for this parameter")


FAMILIES: Registry[VLLMFamily] = Registry("vLLM prompt family")


def _add(family: VLLMFamily) -> None:
    FAMILIES.add(family.name, family)


_add(VLLMFamily("chat-template"))  # the checkpoint's own chat template (bare audio parts)
_add(
    VLLMFamily(
        "qwen2-audio",
        placeholder=lambda i: f"Audio {i}: <|audio_bos|><|AUDIO|><|audio_eos|>\n",
        layout=_chatml,
        default_system=_QWEN_SYSTEM,
        audio_token="<|AUDIO|>",
    )
)
_add(
    VLLMFamily(
        "qwen2.5-omni",
        placeholder=lambda i: "<|audio_bos|><|AUDIO|><|audio_eos|>\n",
        layout=_chatml,
        default_system=_OMNI_SYSTEM,
        audio_token="<|AUDIO|>",
        weight_name=omni_thinker_weight_name,
    )
)
_add(
    VLLMFamily(
        "qwen2.5-omni-thinker",
        unsupported=(
            "a thinker-only Qwen2.5-Omni checkpoint (model_type qwen2_5_omni_thinker) is not in "
            "vLLM's model registry, which takes the full Omni layout (Qwen2_5OmniModel); run it "
            "with the transformers adapter, or save it into the full layout "
            "(cafe.training.grpo.save_checkpoint with base= the released checkpoint)"
        ),
    )
)
_add(
    VLLMFamily(
        "qwen3-omni",
        placeholder=lambda i: "<|audio_start|><|audio_pad|><|audio_end|>",
        layout=_chatml,
        default_system=_OMNI_SYSTEM,
        audio_token="<|audio_pad|>",
    )
)
_add(
    VLLMFamily(
        "audio-flamingo-3",
        placeholder=lambda i: "<sound>",
        layout=_chatml,
        default_system=_QWEN_SYSTEM,
        audio_token="<sound>",
    )
)
# the original repo (remote code, vLLM's phi4mm.py) numbers its clips, as vLLM's example does
_add(
    VLLMFamily(
        "phi-4-multimodal",
        placeholder=lambda i: f"<|audio_{i}|>",
        layout=_phi,
        audio_token=None,
    )
)
# the transformers-native layout (vLLM's phi4_multimodal.py): one <|audio|> per clip
_add(
    VLLMFamily(
        "phi-4-multimodal-hf",
        placeholder=lambda i: "<|audio|>",
        layout=_phi,
        audio_token="<|audio|>",
    )
)
_add(
    VLLMFamily(
        "granite-speech",
        placeholder=lambda i: "<|audio|>",
        layout=_granite,
        default_system=_GRANITE_SYSTEM,
        audio_token="<|audio|>",
    )
)
_add(VLLMFamily("ultravox", placeholder=lambda i: "<|audio|>\n", audio_token="<|audio|>"))
_add(
    VLLMFamily(
        "kimi-audio",
        unsupported=(
            "vLLM serves Kimi-Audio as a transcription model (no chat template, no question "
            "prompt); use the kimi-audio card (OpenAI-compatible server) instead"
        ),
    )
)

#: HF config model_type -> family (a checkpoint passed with --checkpoint finds its family here)
FAMILY_BY_MODEL_TYPE = {
    "qwen2_audio": "qwen2-audio",
    "qwen2_5_omni": "qwen2.5-omni",
    "qwen2_5_omni_thinker": "qwen2.5-omni-thinker",
    "qwen3_omni_moe": "qwen3-omni",
    "audioflamingo3": "audio-flamingo-3",
    "phi4mm": "phi-4-multimodal",
    "phi4_multimodal": "phi-4-multimodal-hf",
    "granite_speech": "granite-speech",
    "ultravox": "ultravox",
    "kimi_audio": "kimi-audio",
}


def family_for(options: dict[str, Any], model_type: str | None) -> VLLMFamily:
    """The card's ``family`` option, else the checkpoint's model_type, else its chat template.
    A thinker-only Omni checkpoint is refused whatever the card says (vLLM cannot load it)."""
    by_type = FAMILY_BY_MODEL_TYPE.get(model_type or "")
    if by_type and FAMILIES.get(by_type).unsupported:
        return FAMILIES.get(by_type)
    return FAMILIES.get(options.get("family") or by_type or "chat-template")
