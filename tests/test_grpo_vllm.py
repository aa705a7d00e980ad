"""GRPO with vLLM rollouts, through TRL's own VLLMGeneration (generate + weight sync) with a test
double of the ENGINE only (vllm.LLM: records what it is handed). vLLM is not installed here.

- the token prompt vLLM gets holds ONE audio token per clip (vLLM expands it), while the ids
  the policy trains on hold the processor's expansion;
- the weight sync pushes the names vLLM's Qwen2.5-Omni thinker loader maps (written down below
  from vllm/model_executor/models/qwen2_5_omni_thinker.py);
- transformers rollouts suppress the audio placeholder token."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trl  # noqa: F401  (needed installed: fail, never skip)
from safetensors import safe_open

from cafe.audio import write_wav
from cafe.testing import tiny_models
from cafe.training.grpo import (
    grpo_config,
    load_policy,
    make_reward_func,
)
from cafe.training.reward_judge import OfflineRewardJudge
from cafe.training.rollouts import audio_token_id, rename_weights_for_vllm, vllm_engine_overrides

# vLLM's Qwen2_5OmniThinkerForConditionalGeneration.hf_to_vllm_mapper (orig_to_new_prefix), and
# the prefixes its load_weights skips (talker, token2wav; visual when image/video limits are 0)
VLLM_OMNI_MAPPER = {
    "thinker.lm_head.": "language_model.lm_head.",
    "thinker.model.": "language_model.model.",
    "thinker.": "",
}
VLLM_OMNI_MODULES = ("language_model.model.", "language_model.lm_head.", "audio_tower.")


def vllm_map(name: str) -> str:
    for old, new in VLLM_OMNI_MAPPER.items():  # WeightsMapper: first matching prefix
        if name.startswith(old):
            return new + name[len(old) :]
    return name


class _Logprob:
    def __init__(self, value: float):
        self.logprob, self.rank = value, 1


class _Out:
    def __init__(self, ids):
        self.token_ids = ids
        self.logprobs = [{t: _Logprob(-1.0)} for t in ids]


class _RequestOutput:
    def __init__(self, prompt_ids, completion):
        self.prompt_token_ids = prompt_ids
        self.outputs = [_Out(completion)]


class EngineDouble:
    """Stands in for vllm.LLM: records generate() inputs and load_weights() names."""

    def __init__(self, completion: list[int]):
        self.completion = completion
        self.requests: list[dict] = []
        self.loaded: list[str] = []
        model = type("M", (), {"load_weights": lambda _, w: self.loaded.extend(n for n, _ in w)})
        runner = type("R", (), {"model": model()})
        worker = type("W", (), {"model_runner": runner()})
        executor = type("E", (), {"driver_worker": worker()})
        self.llm_engine = type("L", (), {"model_executor": executor()})()

    def generate(self, requests, sampling_params=None, use_tqdm=False):
        self.requests.extend(requests)
        return [_RequestOutput(r["prompt_token_ids"], self.completion) for r in requests]

    def reset_prefix_cache(self):
        pass


def _row(path: str) -> dict:
    return {
        "id": "s1",
        "prompt": [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": path, "text": None},
                    {"type": "text", "path": None, "text": "What sound comes first?"},
                ],
            }
        ],
        "audio": path,
        "question": "What sound comes first?",
        "answer": "dog bark",
        "choices": ["dog bark", "car horn"],
        "caption": "",
        "events": [],
    }


def _vllm_generation(trainer, engine):
    """TRL's own VLLMGeneration in colocate mode, its engine replaced by the double."""
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    gen = object.__new__(VLLMGeneration)
    gen.__dict__.update(
        model=trainer.model, accelerator=trainer.accelerator, mode="colocate",
        _dist=DistributedBackend(trainer.accelerator), tensor_parallel_size=1,
        enable_sleep_mode=False, _llm_weights_sleeping=False, structured_outputs_regex=None,
        temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0,
        max_completion_length=4, logprobs=0, generation_kwargs={}, llm=engine,
    )  # fmt: skip
    return gen


# tokens per clip, by hand: both processors count the clip's real frames (feature attention
# mask), 1 s = 100 frames -> conv stride 2: (100 - 1) // 2 + 1 = 50 -> pool 2:
# (50 - 2) // 2 + 1 = 25
AUDIO_TOKENS_PER_SECOND = 25


@pytest.mark.parametrize("family", ["qwen2_audio", "qwen2_5_omni"])
def test_vllm_gets_unexpanded_prompt_and_mapped_weights(tmp_path, monkeypatch, family):
    import trl.generation.vllm_generation as trl_vllm
    from datasets import Dataset

    from cafe.training.audio_grpo import AudioGRPOTrainer

    monkeypatch.setattr(trl_vllm, "SamplingParams", lambda **kw: kw, raising=False)
    t = np.arange(16000) / 16000
    write_wav(tmp_path / "a.wav", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    ckpt = getattr(tiny_models, f"build_tiny_{family}")(tmp_path / "policy")
    model, proc = load_policy(ckpt)
    rows = [_row(str(tmp_path / "a.wav"))] * 2
    args = grpo_config(
        {}, tmp_path / "out", per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, beta=0.0, max_steps=1, use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge())],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=proc,
    )
    audio = audio_token_id(model.config)
    eos = proc.tokenizer.eos_token_id
    engine = EngineDouble([proc.tokenizer.convert_tokens_to_ids("<answer>") or 5, eos])
    trainer.vllm_generation = _vllm_generation(trainer, engine)
    rename_weights_for_vllm(trainer.vllm_generation, model.config.model_type)
    trainer.use_vllm = True
    trainer._last_loaded_step = -1

    batch = trainer._generate_and_score_completions([dict(r) for r in rows])

    assert len(engine.requests) == 2
    n = AUDIO_TOKENS_PER_SECOND
    for req, ids, mask in zip(
        engine.requests, batch["prompt_ids"], batch["prompt_mask"], strict=True
    ):
        vllm_ids = req["prompt_token_ids"]
        train_ids = ids[mask.bool()].tolist()
        assert vllm_ids.count(audio) == 1  # one placeholder: vLLM expands it once
        assert train_ids.count(audio) == n  # the processor's expansion, for the log-probs
        k = vllm_ids.index(audio)
        assert train_ids == vllm_ids[:k] + [audio] * n + vllm_ids[k + 1 :]
        wave, sr = req["multi_modal_data"]["audio"]
        assert sr == 16000 and len(wave) == 16000
    # the completions came from the engine, and the audio features travel with the batch
    assert batch["completion_ids"][0, :2].tolist() == engine.completion
    assert batch["input_features"].size(0) == 2

    if family == "qwen2_5_omni":
        # every trained parameter but the vision tower, under the released checkpoint's name
        with safe_open(str(next(ckpt.glob("*.safetensors"))), "pt") as st:
            released = {k for k in st.keys() if k.startswith("thinker.")}
        expected = {k for k in released if not k.startswith("thinker.visual.")}
        assert set(engine.loaded) == expected
        assert len(engine.loaded) == len(expected)  # each once
        for name in (
            "thinker.model.embed_tokens.weight",
            "thinker.model.layers.0.self_attn.q_proj.weight",
            "thinker.lm_head.weight",
            "thinker.audio_tower.conv1.weight",
        ):
            assert name in engine.loaded
        # and vLLM's mapper turns them into its own module names
        assert all(vllm_map(n).startswith(VLLM_OMNI_MODULES) for n in engine.loaded)
        assert vllm_map("thinker.model.layers.0.mlp.up_proj.weight") == (
            "language_model.model.layers.0.mlp.up_proj.weight"
        )
        assert vllm_engine_overrides(model) == {
            "limit_mm_per_prompt": {"image": 0, "video": 0, "audio": 1}
        }
    else:  # no verified map for Qwen2-Audio: TRL's own names go through unchanged
        assert set(engine.loaded) == {n for n, _ in model.named_parameters()}


def test_transformers_rollouts_suppress_the_audio_token(tmp_path):
    from datasets import Dataset

    from cafe.training.audio_grpo import AudioGRPOTrainer

    model, proc = load_policy(tiny_models.build_tiny_qwen2_5_omni(tmp_path / "policy"))
    args = grpo_config(
        {}, tmp_path / "out", per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, use_cpu=True,
    )  # fmt: skip
    trainer = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge())],
        args=args,
        train_dataset=Dataset.from_list([_row("x.wav")] * 2),
        processing_class=proc,
    )
    audio = proc.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    image = proc.tokenizer.convert_tokens_to_ids("<|IMAGE|>")
    assert audio != image
    assert set(trainer.generation_config.suppress_tokens) == {image, audio}
    assert getattr(model.config, "image_token_id", None) == image  # the alias never stays
    # generation never samples it: its logit is pushed to -inf by the suppression processor
    ids = torch.tensor([[proc.tokenizer.eos_token_id]])
    out = model.generate(
        input_ids=ids, generation_config=trainer.generation_config, max_new_tokens=6
    )
    assert audio not in out[0, 1:].tolist()
