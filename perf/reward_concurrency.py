"""MPAR² reward judging for one GRPO group: 8 completions x 7 judge calls (perception, 4 steps,
holistic, review) against a loopback OpenAI-compatible judge answering in 200 ms, scored with
every call in flight at once (cafe) vs one completion and one call at a time (the authors' code).
Then the time of one GRPO step of the tiny model on this CPU.

    PYTHONPATH=. python perf/reward_concurrency.py [--latency 0.2] [--no-grpo]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from cafe.clients import make_client
from cafe.parsing import parse_sections
from cafe.testing.loopback import OpenAILoopback
from cafe.training.reward_judge import (
    LLMRewardJudge,
    RewardItem,
    score_group,
    score_one_at_a_time,
)

COMPLETION = (
    "<thinking><perception>1. [0.00, 0.40]: a dog bark\n2. [1.00, 1.40]: a dog bark\n"
    "3. [2.00, 3.00]: a car horn</perception><reasoning>"
    "1. Sub-question: which sounds are present? Answer: dog bark, car horn\n"
    "2. Sub-question: how many barks? Answer: two\n"
    "3. Sub-question: does anything overlap? Answer: no\n"
    "4. Sub-question: which option fits? Answer: two</reasoning>"
    "<review>1. Evidence check: two barks heard. 2. Logic check: consistent.</review>"
    "</thinking><answer>two</answer>"
)


def items(n: int = 8) -> list[RewardItem]:
    caption = "A dog barks twice, then a car horn sounds."
    return [
        RewardItem(
            parse_sections(COMPLETION.replace("two barks", f"two barks (variant {i})")),
            True,
            "How many times does the dog bark?",
            "two",
            caption,
        )
        for i in range(n)
    ]


def time_rewards(latency: float) -> tuple[float, float, int]:
    group = items()
    with OpenAILoopback(reply=lambda body: "0.8", latency_s=latency) as server:
        client = make_client("openai-compatible", "judge", endpoints=[server.url], concurrency=64)
        judge = LLMRewardJudge(client, concurrency=64)
        t = time.perf_counter()
        asyncio.run(score_group(judge, group))
        concurrent = time.perf_counter() - t
        calls = len(server.requests)
        client = make_client("openai-compatible", "judge", endpoints=[server.url], concurrency=64)
        judge = LLMRewardJudge(client, concurrency=64)
        t = time.perf_counter()
        asyncio.run(score_one_at_a_time(judge, group))
        serial = time.perf_counter() - t
    return concurrent, serial, calls


def time_grpo_step(steps: int = 3) -> float:
    """Mean seconds per GRPO optimizer step (tiny Qwen2-Audio, 2 completions of 32 tokens,
    offline reward judge) from TRL's own step_time log."""
    import numpy as np
    from datasets import Dataset

    from cafe.audio import write_wav
    from cafe.testing.tiny_models import build_tiny_qwen2_audio
    from cafe.training.audio_grpo import AudioGRPOTrainer
    from cafe.training.grpo import grpo_config, load_policy, make_reward_func
    from cafe.training.reward_judge import OfflineRewardJudge

    root = Path(tempfile.mkdtemp(prefix="grpo-perf-"))
    write_wav(root / "a.wav", (0.3 * np.random.default_rng(0).standard_normal(32000)).astype("f4"))
    model, proc = load_policy(build_tiny_qwen2_audio(root / "m"))
    row = {
        "id": "p0",
        "prompt": [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": str(root / "a.wav"), "text": None},
                    {"type": "text", "path": None, "text": "How many barks?"},
                ],
            }
        ],
        "audio": str(root / "a.wav"),
        "question": "How many barks?",
        "answer": "two",
        "choices": ["one", "two", "three", "four"],
        "caption": "",
        "events": [],
    }
    args = grpo_config(
        {},
        root / "out",
        max_steps=steps,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=32,
        use_cpu=True,
        beta=0.04,
    )
    trainer = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge())],
        args=args,
        train_dataset=Dataset.from_list([row] * 8),
        processing_class=proc,
    )
    trainer.train()
    times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    return sum(times[1:]) / max(1, len(times) - 1) if len(times) > 1 else times[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--no-grpo", action="store_true")
    a = ap.parse_args()
    concurrent, serial, calls = time_rewards(a.latency)
    print(f"judge calls per group of 8 completions: {calls} ({calls / 8:.1f} per completion)")
    print(f"one at a time (authors): {serial:6.2f} s")
    print(f"all in flight (cafe):    {concurrent:6.2f} s")
    print(f"speed-up:                {serial / concurrent:6.1f}x")
    if not a.no_grpo:
        print(f"GRPO step, tiny Qwen2-Audio on CPU: {time_grpo_step():.2f} s/step")


if __name__ == "__main__":
    main()
