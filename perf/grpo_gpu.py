"""GRPO step time on a GPU machine: the tiny model (or --model CHECKPOINT, e.g. a Qwen2.5-Omni-3B
thinker) with transformers rollouts and, when vLLM is installed, vLLM colocate rollouts (audio
passed as multi_modal_data). Prints seconds per optimizer step for each, and peak GPU memory.

    PYTHONPATH=. python perf/grpo_gpu.py [--model PATH] [--steps 4] [--completion 256]

Not run in CI (needs CUDA); written for a lent device. The offline reward judge keeps the judge
out of the timing (see perf/reward_concurrency.py for judge concurrency)."""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path


def rows(root: Path, n: int) -> list[dict]:
    import numpy as np

    from cafe.audio import write_wav

    wav = root / "clip.wav"
    write_wav(wav, (0.3 * np.random.default_rng(0).standard_normal(16000 * 5)).astype("f4"))
    row = {
        "id": "p",
        "prompt": [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": str(wav), "text": None},
                    {"type": "text", "path": None, "text": "How many barks? one / two / three"},
                ],
            }
        ],
        "audio": str(wav),
        "question": "How many barks?",
        "answer": "two",
        "choices": ["one", "two", "three"],
        "caption": "",
        "events": [],
    }
    return [dict(row, id=f"p{i}") for i in range(n)]


def step_time(model_path: str, root: Path, steps: int, completion: int, vllm: bool) -> float:
    import torch
    from datasets import Dataset

    from cafe.training.grpo import _trainer_class, grpo_config, load_policy, make_reward_func
    from cafe.training.reward_judge import OfflineRewardJudge

    model, proc = load_policy(model_path, "bfloat16")
    extra = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3}
    args = grpo_config(
        {},
        root / ("out-vllm" if vllm else "out-hf"),
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=completion,
        bf16=True,
        beta=0.04,
        **(extra if vllm else {}),
    )
    trainer = _trainer_class()(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge())],
        args=args,
        train_dataset=Dataset.from_list(rows(root, 8 * steps)),
        processing_class=proc,
    )
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t
    times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    peak = torch.cuda.max_memory_allocated() / 2**30
    print(f"  peak GPU memory {peak:.2f} GiB, total {total:.1f} s")
    return sum(times[1:]) / max(1, len(times) - 1) if len(times) > 1 else times[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint folder [a tiny Qwen2.5-Omni built here]")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--completion", type=int, default=256)
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    root = Path(tempfile.mkdtemp(prefix="grpo-gpu-"))
    model = a.model
    if model is None:
        from cafe.testing.tiny_models import build_tiny_qwen2_5_omni

        model = str(build_tiny_qwen2_5_omni(root / "tiny"))
    print(f"GRPO, 8 completions x {a.completion} tokens, {a.steps} steps, model {model}")
    hf = step_time(model, root, a.steps, a.completion, vllm=False)
    print(f"transformers rollouts: {hf:.2f} s/step")
    if importlib.util.find_spec("vllm") is not None:
        colocate = step_time(model, root, a.steps, a.completion, vllm=True)
        print(f"vLLM colocate rollouts: {colocate:.2f} s/step")
    else:
        print("vLLM not installed: colocate rollouts not timed")


if __name__ == "__main__":
    main()
