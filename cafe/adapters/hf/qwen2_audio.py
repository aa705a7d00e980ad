"""Qwen2-Audio-7B-Instruct and checkpoints of its architecture (Audio Reasoner, R1-AQA, SARI)."""

from __future__ import annotations

from cafe.adapters.hf.base import TransformersAdapter


class Qwen2AudioAdapter(TransformersAdapter):
    """Qwen2AudioForConditionalGeneration with its processor (Whisper features, 30 s window:
    longer clips are cut at 30 s by the feature extractor, as in the authors' own inference)."""

    model_class = "Qwen2AudioForConditionalGeneration"
    MODEL_TYPES = {"qwen2_audio": "qwen2-audio-7b-instruct"}
