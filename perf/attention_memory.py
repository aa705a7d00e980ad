"""Memory of audio attention tracing per generated token, on a tiny Qwen2.5-Omni thinker built on
the spot (random weights), against what keeping transformers' full attention maps would cost.

    PYTHONPATH=. python perf/attention_memory.py [--tokens 32] [--seconds 10]

Prints: tokens traced, layers, audio positions, bytes the trace keeps per generated token, the
largest attention tensor one decode step produces (freed at once), the bytes that
generate(output_attentions=True) would hold per generated token for the same run, and the same
two per-token figures projected for Qwen2.5-Omni-7B (28 layers, 28 heads) on a 30 s clip."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()

    from cafe.adapters.base import ModelCard
    from cafe.adapters.hf.attention import trace_audio_attention
    from cafe.adapters.hf.qwen2_5_omni import Qwen25OmniAdapter
    from cafe.audio import write_wav
    from cafe.records import Request
    from cafe.testing.tiny_models import build_tiny_qwen2_5_omni_thinker

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = build_tiny_qwen2_5_omni_thinker(Path(tmp) / "omni")
        clip = Path(tmp) / "clip.wav"
        n = int(16_000 * args.seconds)
        write_wav(clip, (0.3 * np.random.default_rng(0).standard_normal(n)).astype(np.float32))
        adapter = Qwen25OmniAdapter(ModelCard("tiny", "qwen2.5-omni"), checkpoint=str(ckpt))
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": str(clip)},
                    {"type": "text", "text": "What sound is heard?"},
                ],
            }
        ]
        req = Request("x", 0, messages, [str(clip)], {"max_new_tokens": args.tokens}, 0, "lalm", "")
        start = time.perf_counter()
        trace = trace_audio_attention(adapter, req)
        elapsed = time.perf_counter() - start
        cfg = adapter.model.config.get_text_config()
        layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
        prompt = len(adapter.prepare_requests([req])["input_ids"][0])
        steps = len(trace.ratios)
        # output_attentions keeps (layers x heads x q x keys) floats per step: the prefill map
        # (prompt x prompt) plus one row per decode step
        full = 4 * layers * heads * (prompt * prompt + sum(prompt + i for i in range(1, steps)))
        print(f"tokens traced            {steps}  ({elapsed:.2f} s)")
        print(
            f"decoder layers x heads   {layers} x {heads}; prompt {prompt} tokens, "
            f"{len(trace.audio_positions)} audio"
        )
        print(f"trace bytes / token      {trace.bytes_per_token}")
        print(f"largest decode-step map  {trace.step_bytes} bytes (one layer, freed at once)")
        print(f"output_attentions bytes / token  {full // max(1, steps)}")
        # Qwen2.5-Omni-7B: 28 layers, 28 heads; 30 s of audio = 750 tokens, ~800-token prompt
        p7, l7, h7 = 800, 28, 28
        print(
            f"7B projection: trace {4 * l7} bytes/token; output_attentions "
            f"{4 * l7 * h7 * (p7 * p7 + 512 * (p7 + 256)) // 512 / 2**20:.1f} MiB/token "
            "over 512 generated tokens"
        )


if __name__ == "__main__":
    main()
