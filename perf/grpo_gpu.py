"""GRPO step time on a GPU machine with vLLM colocate rollouts on dummy weights (and, unless
--skip-transformers, transformers rollouts for comparison).

The policy is a tiny full-layout Qwen2.5-Omni (or --model CHECKPOINT, e.g. a Qwen2.5-Omni-3B):
the thinker trains in transformers; TRL's colocated vLLM engine starts from dummy weights
(load_format "dummy") and gets the policy's weights through the first weight sync, so the step
also exercises cafe's weight-name mapping for vLLM's Omni thinker loader and the unexpanded
audio prompt. Prints seconds per optimizer step, peak GPU memory, and the mean of each reward:
the MPAR² reward (offline judge; a random-weight policy rarely writes the format, so it may be
0) and a plumbing reward (1 per non-empty completion: proves completions reach the rewards).

    PYTHONPATH=. python perf/grpo_gpu.py [--model PATH] [--steps 2] [--completion 64]

Not run in CI (needs CUDA and vLLM). The offline reward judge keeps the judge out of the timing
(see perf/reward_concurrency.py for judge concurrency)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
from pathlib import Path


def rows(root: Path, n: int) -> list[dict]:
    import numpy as np

    from cafe.audio import write_wav

    out = []
    for i in range(n):  # one clip per row: nothing is cached across rows
        wav = root / f"clip{i}.wav"
        x = 0.3 * np.random.default_rng(i).standard_normal(16000 * 5)
        write_wav(wav, x.astype("f4"))
        out.append(
            {
                "id": f"p{i}",
                "prompt": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "audio", "path": str(wav), "text": None},
                            {"type": "text", "path": None, "text": "How many barks? one / two"},
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
        )
    return out


def nonempty_completion(prompts, completions, **kw) -> list[float]:
    """Plumbing reward: 1.0 for every completion with text (rollouts reach the rewards)."""
    from cafe.training.grpo import completion_text

    return [1.0 if completion_text(c).strip() else 0.0 for c in completions]


def step_time(model_path: str, root: Path, steps: int, completion: int, vllm: bool) -> dict:
    import torch
    from datasets import Dataset

    from cafe.training.audio_grpo import AudioGRPOTrainer
    from cafe.training.grpo import grpo_config, load_policy, make_reward_func
    from cafe.training.reward_judge import OfflineRewardJudge

    model, proc = load_policy(model_path, "bfloat16")
    model.to("cuda")
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
    t0 = time.perf_counter()
    trainer = AudioGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(OfflineRewardJudge()), nonempty_completion],
        args=args,
        train_dataset=Dataset.from_list(rows(root, 8 * steps)),
        processing_class=proc,
        vllm_engine_args={"load_format": "dummy", "enforce_eager": True} if vllm else None,
    )
    setup = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t
    logs = [h for h in trainer.state.log_history if "step_time" in h]
    times = [h["step_time"] for h in logs]
    rewards = {
        k.split("/")[1]: [h[k] for h in logs]
        for k in (logs[0] if logs else {})
        if k.startswith("rewards/") and k.endswith("/mean")
    }
    return {
        "setup_s": setup,
        "total_s": total,
        "step_times": times,
        # the first step holds compilation and the first weight sync; later steps are steady
        "s_per_step": sum(times[1:]) / (len(times) - 1) if len(times) > 1 else times[0],
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
        "rewards": rewards,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint folder [a tiny full-layout Qwen2.5-Omni]")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--completion", type=int, default=64)
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true", help="transformers rollouts only")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    if not a.skip_vllm and importlib.util.find_spec("vllm") is None:
        raise SystemExit("needs vLLM (pip install 'cafe-audio-eval[vllm]'), or --skip-vllm")
    root = Path(tempfile.mkdtemp(prefix="grpo-gpu-"))
    model = a.model
    if model is None:
        from cafe.testing.tiny_models import build_tiny_qwen2_5_omni

        model = str(build_tiny_qwen2_5_omni(root / "tiny"))
    print(f"GRPO, 8 completions x {a.completion} tokens, {a.steps} steps, model {model}")
    runs = ({} if a.skip_vllm else {"vllm-colocate": True}) | (
        {} if a.skip_transformers else {"transformers": False}
    )
    for name, vllm in runs.items():
        r = step_time(model, root, a.steps, a.completion, vllm=vllm)
        rewards = ", ".join(f"{k} mean {v}" for k, v in r["rewards"].items())
        nonzero = any(x != 0 for v in r["rewards"].values() for x in v)
        print(
            f"{name} rollouts: {r['s_per_step']:.2f} s/step (steps {r['step_times']}), "
            f"setup {r['setup_s']:.0f} s, peak GPU {r['peak_gib']:.2f} GiB\n"
            f"  rewards: {rewards}  -> rewards non-zero: {nonzero}",
            flush=True,
        )
        print("RESULT " + json.dumps({"grpo": name, **r}), flush=True)


if __name__ == "__main__":
    main()
