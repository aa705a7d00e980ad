"""Shared fixtures of the tiny transformers checkpoints (imported by tests/test_hf_*.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cafe.adapters import ADAPTERS
from cafe.adapters.base import ModelCard
from cafe.audio import write_wav
from cafe.records import Request
from cafe.testing import tiny_models

# adapter name -> builder of its tiny checkpoint
FAMILIES = {
    "qwen2-audio": tiny_models.build_tiny_qwen2_audio,
    "qwen2.5-omni": tiny_models.build_tiny_qwen2_5_omni_thinker,
    "qwen2.5-omni-full": tiny_models.build_tiny_qwen2_5_omni,
    "audio-flamingo-3": tiny_models.build_tiny_audio_flamingo3,
    "phi-4-multimodal": tiny_models.build_tiny_phi4mm,
}


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_hf")
    cache: dict[str, str] = {}

    def get(family: str) -> str:
        if family not in cache:
            cache[family] = str(FAMILIES[family](root / family))
        return cache[family]

    return get


@pytest.fixture(scope="session")
def tiny_adapter(tiny_checkpoints):
    cache: dict[str, object] = {}

    def get(family: str):
        if family not in cache:
            name = family.removesuffix("-full")
            card = ModelCard(name=f"tiny-{family}", adapter=name)
            cache[family] = ADAPTERS.get(name)(card, checkpoint=tiny_checkpoints(family))
        return cache[family]

    return get


@pytest.fixture(scope="session")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(0)
    t = np.arange(32_000) / 16_000
    tone = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(t.size)).astype(
        np.float32
    )
    write_wav(d / "tone.wav", tone)
    write_wav(d / "silence.wav", np.zeros_like(tone))
    # a 44.1 kHz stereo file: the adapter must resample and downmix it
    write_wav(d / "noise44k.wav", rng.standard_normal((44_100, 2)).astype(np.float32) * 0.3, 44_100)
    (d / "broken.wav").write_bytes(b"RIFF not really a wave file")
    return {p.stem: str(p) for p in d.iterdir()}


def make_request(sample_id: str, audio: str, question: str, max_new_tokens: int = 4) -> Request:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [{"type": "audio", "path": audio}, {"type": "text", "text": question}],
        },
    ]
    return Request(
        sample_id=sample_id,
        run_index=0,
        messages=messages,
        audio=[audio],
        generation={"max_new_tokens": max_new_tokens, "temperature": 0.0},
        seed=0,
        prompt_style="lalm",
        template_hash="test",
    )
