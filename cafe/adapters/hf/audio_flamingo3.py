"""NVIDIA Audio Flamingo 3 (nvidia/audio-flamingo-3-hf): a LARM in the paper's grouping."""

from __future__ import annotations

from cafe.adapters.hf.base import TransformersAdapter


class AudioFlamingo3Adapter(TransformersAdapter):
    """AudioFlamingo3ForConditionalGeneration; the processor cuts audio into 30 s windows (up to
    10 minutes) and takes exactly one clip per prompt."""

    model_class = "AudioFlamingo3ForConditionalGeneration"
    MODEL_TYPES = {"audioflamingo3": "audio-flamingo-3"}
