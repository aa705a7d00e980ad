"""The audio reaches the GRPO policy: per-token log-probs of the same completion differ between the
real clip and a silent clip of the same length, through AudioGRPOTrainer's own generation batch
and log-prob path; the reference pass sees the same audio; the loss path reads it from the batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trl  # noqa: F401  (needed installed: fail, never skip)

from cafe.audio import write_wav
from cafe.testing import tiny_models
from cafe.training.grpo import (
    grpo_config,
    load_policy,
    make_reward_func,
)
from cafe.training.reward_judge import OfflineRewardJudge
from cafe.training.rollouts import AUDIO_FEATURE_KEYS


def _row(audio_path: str) -> dict:
    return {
        "id": "s1",
        "prompt": [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": audio_path, "text": None},
                    {"type": "text", "path": None, "text": "What sound comes first?"},
                ],
            }
        ],
        "audio": audio_path,
        "question": "What sound comes first?",
        "answer": "dog bark",
        "choices": ["dog bark", "car horn"],
        "caption": "A dog barks, then a car horn.",
        "events": [{"label": "dog_bark", "onset": 0.0, "offset": 0.5, "required": True}],
    }


@pytest.fixture(scope="module", params=["qwen2_audio", "qwen2_5_omni"])
def trainer(tmp_path_factory, request):
    from datasets import Dataset

    from cafe.training.audio_grpo import AudioGRPOTrainer

    root = tmp_path_factory.mktemp("grpo")
    t = np.arange(16000) / 16000
    write_wav(root / "real.wav", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    write_wav(root / "silent.wav", np.zeros(16000, dtype=np.float32))
    build = getattr(tiny_models, f"build_tiny_{request.param}")  # Omni: the full layout
    model, proc = load_policy(build(root / "policy"))
    rows = [_row(str(root / "real.wav"))] * 2
    args = grpo_config(
        {},
        root / "out",
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=6,
        beta=0.04,
        max_steps=1,
        use_cpu=True,
        seed=0,
    )
    tr = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge())],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=proc,
    )
    tr.model.train()
    tr._test_rows = {"real": rows, "silent": [_row(str(root / "silent.wav"))] * 2}
    return tr


def test_logps_depend_on_audio(trainer):
    batch = trainer._generate_and_score_completions([dict(r) for r in trainer._test_rows["real"]])
    for key in AUDIO_FEATURE_KEYS:
        assert key in batch and batch[key].size(0) == 2
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    k = batch["completion_ids"].size(1)

    def logps(features):
        trainer._audio_forward = features
        try:
            with torch.no_grad():
                return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, k)[0]
        finally:
            trainer._audio_forward = None

    real = logps({key: batch[key] for key in AUDIO_FEATURE_KEYS})
    # the silent clip has the same length, so the prompt tokens are identical; only audio differs
    trainer._audio_rows = [trainer._load_row_audio(r) for r in trainer._test_rows["silent"]]
    prompts = [r["prompt"] for r in trainer._test_rows["silent"]]
    silent_ids, _, silent_feats = trainer._tokenize_prompts(prompts)
    trainer._audio_rows = None
    unpadded = [
        row[m.bool()].tolist()
        for row, m in zip(batch["prompt_ids"], batch["prompt_mask"], strict=True)
    ]
    assert silent_ids == unpadded
    silent = logps(silent_feats)

    cmask = batch["completion_mask"].bool()
    assert cmask.any()
    diff = (real - silent).abs()[cmask]
    assert diff.max().item() > 1e-4, "log-probs ignore the audio"
    # the reference pass ran with the real clip: same initial weights, same log-probs
    assert torch.allclose(batch["ref_per_token_logps"][cmask], real[cmask], atol=1e-5)
    assert not torch.allclose(batch["ref_per_token_logps"][cmask], silent[cmask], atol=1e-5)

    # the policy loss path reads the features from the batch: swapping in the silent clip's
    # features changes the loss
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    with torch.no_grad():
        loss_real = trainer.compute_loss(trainer.model, batch)
        loss_silent = trainer.compute_loss(trainer.model, {**batch, **silent_feats})
    assert torch.isfinite(loss_real) and trainer._audio_forward is None
    assert abs(loss_real.item() - loss_silent.item()) > 1e-7


def test_rewards_through_trl_with_loopback_judge(tmp_path):
    """TRL's own reward dispatch (async reward function on its event loop) with the LLM reward
    judge talking to a loopback OpenAI-compatible server: every call of the batch in flight."""
    import threading
    import time

    from datasets import Dataset

    from cafe.clients import make_client
    from cafe.testing.loopback import OpenAILoopback
    from cafe.training.audio_grpo import AudioGRPOTrainer
    from cafe.training.reward_judge import LLMRewardJudge

    good = (
        "<thinking><perception>1. [0.00, 0.50]: a dog bark</perception><reasoning>1. Sub-question:"
        " what comes first? Answer: dog bark</reasoning><review>1. Evidence check: heard. "
        "2. Logic check: fine.</review></thinking><answer>dog bark</answer>"
    )
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def reply(body):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.2)
        with lock:
            state["now"] -= 1
        return "0.5"

    t = np.arange(16000) / 16000
    write_wav(tmp_path / "a.wav", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    rows = [_row(str(tmp_path / "a.wav"))] * 2
    model, proc = load_policy(tiny_models.build_tiny_qwen2_audio(tmp_path / "m"))
    with OpenAILoopback(reply=reply) as server:
        client = make_client("openai-compatible", "judge", endpoints=[server.url], concurrency=64)
        judge = LLMRewardJudge(client)
        args = grpo_config(
            {}, tmp_path / "out", per_device_train_batch_size=2, num_generations=2,
            max_completion_length=4, use_cpu=True,
        )  # fmt: skip
        trainer = AudioGRPOTrainer(
            model=model,
            reward_funcs=[make_reward_func(judge)],
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=proc,
        )
        completions = [[{"role": "assistant", "content": c}] for c in (good, "no tags")]
        rewards = trainer._calculate_rewards(
            [dict(r) for r in rows], [r["prompt"] for r in rows], completions, [[1], [1]]
        )
    # good: perception, 1 step, holistic, review (correct) = 4 calls, all scored 0.5:
    # 1.5*0.5 + (0.7*0.5 + 0.3*0.5) + 1.5*(1 + 0.5*0.5) + 0.1*1 = 3.225; "no tags": 0 calls, 0
    assert rewards[:, 0].tolist() == pytest.approx([3.225, 0.0])
    assert len(server.requests) == 4 and state["peak"] == 4


def test_scripted_rollouts_give_the_group_different_rewards(trainer):
    """The smoke recipe's scripted completions (ScriptedRollouts): each group's last completion is
    the row's reference MPAR² chain, so its reward (format 1, right answer: >= gamma + delta =
    1.6) beats the sampled one (6 tokens cannot hold the tagged format: <= gamma = 1.5) and the
    group's advantages are non-zero with opposite signs, whatever the random policy samples."""
    from cafe.parsing import parse_sections
    from cafe.training.rollouts import ScriptedRollouts

    scripted = ScriptedRollouts(1, "concise")
    row = trainer._test_rows["real"][0]
    (gold,) = scripted.texts(row)
    assert parse_sections(gold).format_ok and parse_sections(gold).answer == "dog bark"
    trainer._scripted = scripted
    try:
        batch = trainer._generate_and_score_completions(
            [dict(r) for r in trainer._test_rows["real"]]
        )
    finally:
        trainer._scripted = None
    ids = batch["completion_ids"][1][batch["completion_mask"][1].bool()].tolist()
    assert ids[-1] == trainer.eos_token_ids[0]
    assert trainer._tokenizer.decode(ids[:-1]) == gold  # the scripted one is the second of two
    sampled, written = batch["advantages"].tolist()
    assert written > 0 > sampled


def test_scripted_rollouts_replace_the_last_n_of_each_group():
    from cafe.parsing import parse_sections
    from cafe.training.rollouts import ScriptedRollouts

    class Tok:  # one id per character: what went in is what the ids spell
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(c) for c in text]}

    rows = [dict(_row("a.wav"), answer=a) for a in ("dog bark", "car horn")]
    group = [rows[0]] * 4 + [rows[1]] * 4
    sampled = [[i] for i in range(8)]
    out = ScriptedRollouts(2, "concise").apply(sampled, group, 4, Tok(), eos_id=0)
    assert out[0:2] == [[0], [1]] and out[4:6] == [[4], [5]]  # sampled ones kept
    texts = ["".join(map(chr, ids[:-1])) for ids in out]
    assert all(ids[-1] == 0 for ids in (out[2], out[3], out[6], out[7]))
    gold, stripped = parse_sections(texts[2]), parse_sections(texts[3])
    assert gold.format_ok and gold.answer == "dog bark"
    assert parse_sections(texts[6]).answer == "car horn"
    assert (
        not stripped.format_ok
        and "<" not in texts[3]
        and texts[3] == texts[7].replace("car horn", "dog bark")
    )
    with pytest.raises(ValueError, match="below num_generations"):
        ScriptedRollouts(4).apply(sampled, group, 4, Tok(), eos_id=0)
