"""vLLM adapter: run grouping and prompt inputs on CPU; generation itself only where a GPU and
vLLM are present (marked gpu, skipped cleanly elsewhere)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from cafe.adapters.base import ModelCard
from cafe.audio import load_audio, write_wav
from cafe.records import Request


def _req(sid, run, seed, temperature=0.0, clip=None):
    clip = clip or "/nonexistent.wav"
    return Request(
        sample_id=sid,
        run_index=run,
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {
                "role": "user",
                "content": [{"type": "audio", "path": clip}, {"type": "text", "text": f"Q {sid}"}],
            },
        ],  # fmt: skip
        audio=[clip],
        generation={"max_new_tokens": 16, "temperature": temperature},
        seed=seed,
        prompt_style="lalm",
        template_hash="t",
    )


def _bare(**options):
    """The adapter's planning logic without an engine (no vLLM on CPU machines)."""
    from cafe.adapters.vllm import VLLMAdapter

    ad = object.__new__(VLLMAdapter)
    ad.options = options
    return ad


def test_greedy_runs_of_one_prompt_share_one_call():
    reqs = [_req("a", 0, 10), _req("a", 1, 11), _req("b", 0, 10), _req("a", 2, 12)]
    plan = _bare().plan(reqs)
    assert sorted((tuple(i), n) for i, _, n in plan) == [((0, 1, 3), 1), ((2,), 1)]


def test_sampled_runs_one_call_per_seed_or_n_samples():
    reqs = [_req("a", 1, 11, 0.7), _req("a", 0, 10, 0.7), _req("b", 0, 10, 0.7)]
    per_seed = _bare().plan(reqs)
    assert sorted((tuple(i), s, n) for i, s, n in per_seed) == [
        ((0,), 11, 1), ((1,), 10, 1), ((2,), 10, 1),
    ]  # fmt: skip
    as_n = _bare(runs_as="n").plan(reqs)
    # runs in run order, seeded by run 0's seed, n = number of runs
    assert sorted((tuple(i), s, n) for i, s, n in as_n) == [((1, 0), 10, 2), ((2,), 10, 1)]


def test_processor_chat_has_placeholders_and_clips_in_order(tmp_path):
    from cafe.adapters.vllm import to_processor_chat

    p = tmp_path / "c.wav"
    write_wav(p, (0.2 * np.sin(np.arange(3200) / 5)).astype(np.float32))
    conv, clips = to_processor_chat(_req("a", 0, 1, clip=str(p)), 16000)
    assert conv[1]["content"] == [{"type": "audio"}, {"type": "text", "text": "Q a"}]
    assert conv[0]["content"] == [{"type": "text", "text": "You are a helpful assistant."}]
    assert len(clips) == 1 and np.array_equal(clips[0], load_audio(p))


def _gpu_ready() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA GPU and vLLM")
def test_vllm_generates_with_audio_on_tiny_qwen2_audio(tmp_path):
    from cafe.adapters import ADAPTERS

    tiny = pytest.importorskip("cafe.testing.tiny_models")  # the transformers helper's builders
    ckpt = tiny.build_tiny_qwen2_audio(tmp_path / "tiny")
    clip = tmp_path / "c.wav"
    write_wav(clip, (0.3 * np.sin(np.arange(16000) / 7)).astype(np.float32))
    card = ModelCard(name="tiny-vllm", adapter="vllm", checkpoint=str(ckpt), engine="vllm")
    ad = ADAPTERS.get("vllm")(
        card, gpu_memory_utilization=0.2, max_model_len=2048, enforce_eager=True,
        ignore_eos=True, min_tokens=8,
    )  # fmt: skip
    reqs = [_req("a", 0, 1, clip=str(clip)), _req("a", 1, 2, clip=str(clip)),
            _req("b", 0, 1, 0.8, clip=str(clip))]  # fmt: skip
    out = ad.generate(reqs)
    ad.close()
    assert [c.sample_id for c in out] == ["a", "a", "b"]
    assert all(c.error is None and c.output_tokens == 16 for c in out)
    assert out[0].text == out[1].text  # greedy runs share one generation
    assert out[0].backend["prompt_tokens"] > 20  # the audio placeholder was expanded


@pytest.mark.slow
def test_render_uses_the_checkpoints_chat_template_and_passes_audio_arrays(tmp_path):
    """What the adapter hands LLM.generate, built from a real (tiny) Qwen2.5-Omni folder."""
    from transformers import AutoTokenizer

    from cafe.adapters.vllm import _load_renderer, _sampling_rate
    from cafe.adapters.vllm_families import FAMILIES
    from cafe.testing import tiny_models as tiny

    ckpt = tiny.build_tiny_qwen2_5_omni_thinker(tmp_path / "omni")
    clip = tmp_path / "c.wav"
    write_wav(clip, (0.3 * np.sin(np.arange(8000) / 3)).astype(np.float32))
    ad = _bare()
    ad.family = FAMILIES.get("chat-template")  # the checkpoint's own template
    ad.renderer = _load_renderer(str(ckpt), {}, AutoTokenizer.from_pretrained(ckpt))
    ad.sampling_rate = _sampling_rate(ad.renderer)
    prompt = ad.render(_req("a", 0, 1, clip=str(clip)))
    assert prompt["prompt"] == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|audio_bos|><|AUDIO|><|audio_eos|>Q a<|im_end|>\n<|im_start|>assistant\n"
    )
    array, sr = prompt["multi_modal_data"]["audio"]
    assert sr == 16000 and np.array_equal(array, load_audio(clip))
