"""`cafe train smoke` and the trainers say where they stand: a line per logged step (SFT took
8 silent minutes on a CPU), with the per-step log named before training starts."""

from __future__ import annotations

import json

import numpy as np
import trl  # noqa: F401  (needed installed: fail, never skip)

from cafe.audio import write_wav
from cafe.testing.tiny_models import build_tiny_qwen2_audio
from cafe.training.grpo import load_policy, log_to_file, step_line, trainer_dir
from cafe.training.sft import build_sft_trainer


def test_each_logged_step_is_one_line_beside_the_log_file(tmp_path) -> None:
    t = np.arange(16000) / 16000
    write_wav(tmp_path / "a.wav", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    model, proc = load_policy(build_tiny_qwen2_audio(tmp_path / "policy"))
    audio = str(tmp_path / "a.wav")
    row = {"id": "s0", "audio": audio, "messages": [
        {"role": "user", "content": [{"type": "audio", "path": audio, "text": None},
                                     {"type": "text", "path": None, "text": "What?"}]},
        {"role": "assistant", "content": [{"type": "text", "path": None,
                                           "text": "<answer>a tone</answer>"}]},
    ]}  # fmt: skip
    trainer = build_sft_trainer({}, model, proc, [row] * 2, tmp_path / "sft", max_steps=2,
                                per_device_train_batch_size=2, use_cpu=True)  # fmt: skip
    lines: list[str] = []
    log = log_to_file(trainer, tmp_path / "sft", quiet=True, echo=lines.append)
    assert log == trainer_dir(tmp_path / "sft") / "log.jsonl"
    trainer.train()
    steps = [json.loads(x) for x in log.read_text().splitlines() if '"loss"' in x]
    assert [line.split()[:2] for line in lines] == [["step", "1/2"], ["step", "2/2"]]
    assert [f"{s['loss']:.3f}" for s in steps] == [line.split()[3] for line in lines]


def test_a_step_line_shows_the_figures_logged() -> None:
    assert step_line(3, 40, {"loss": 2.3104, "learning_rate": 1e-5}) == "step 3/40  loss 2.310"
    line = step_line(1, 3, {"loss": 0.5, "reward": 0.25, "reward_std": 0.1, "grad_norm": 1.0})
    assert line == "step 1/3  loss 0.500  reward 0.250  reward_std 0.100  grad_norm 1.000"
