"""GPU throughput on MMAR-shaped work (needs a CUDA GPU, vLLM, torch and transformers).

Qwen2.5-Omni-7B-shaped model (config written here, no download: vLLM loads dummy weights,
transformers loads random weights saved once), ~30 s audio per item, exactly 512 generated tokens
per item (ignore_eos + min_tokens). Prints items/s for

  harness-vllm   cafe's "vllm" adapter: render + decode audio + LLM.generate, as a run does it
  raw-vllm       LLM.generate alone on the same prompts (rendered beforehand)
  transformers   cafe's "qwen2.5-omni" transformers adapter (batch 16)

and the ratios the targets name: vLLM >= 20x transformers, harness >= 90% of raw vLLM.

Unbiased by construction: every item has its own clip (no clip repeats), vLLM's multimodal
processor cache is off (mm_processor_cache_gb=0) and prefix caching is off, so neither phase
gets the other's feature extraction or prefill for free; harness and raw passes alternate
(harness, raw, raw, harness) after a warm-up, and the ratio is over their summed times.

    PYTHONPATH=. python perf/gpu_throughput.py [--items 128] [--tf-items 32] [--skip-transformers]

Each engine runs in its own subprocess (vLLM does not hand its GPU memory back in-process)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# Qwen2.5-Omni-7B thinker dimensions (from the released config)
TEXT_7B = dict(
    vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
    num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
    rms_norm_eps=1e-6, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default",
                                        "mrope_section": [16, 24, 24]},
)  # fmt: skip
AUDIO_7B = dict(
    d_model=1280, encoder_layers=32, encoder_attention_heads=20, encoder_ffn_dim=5120,
    num_mel_bins=128, output_dim=3584, n_window=100, max_source_positions=1500,
)  # fmt: skip
VISION_7B = dict(
    depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
    fullatt_block_indexes=[7, 15, 23, 31],
)  # fmt: skip


# ---- build --------------------------------------------------------------------------------
def build(work: Path, with_weights: bool) -> None:
    """work/vllm: full Omni layout config + tokenizer/processor (vLLM loads dummy weights);
    work/hf: thinker-only checkpoint with random bf16 weights for the transformers adapter."""
    import importlib

    from transformers import AutoTokenizer, Qwen2_5OmniConfig

    # the transformers helper's tiny builder writes the tokenizer and processor files
    tiny_models = importlib.import_module("cafe.testing.tiny_models")
    tiny = tiny_models.build_tiny_qwen2_5_omni_thinker(work / "tiny")
    tok = AutoTokenizer.from_pretrained(tiny)
    thinker = dict(
        text_config={**TEXT_7B, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id},
        audio_config=AUDIO_7B,
        vision_config=VISION_7B,
        **tiny_models.omni_token_ids(tok),
    )
    vdir = work / "vllm"
    vdir.mkdir(parents=True, exist_ok=True)
    cfg = Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    cfg.architectures = ["Qwen2_5OmniModel"]  # as the released checkpoint names it
    cfg.save_pretrained(vdir)
    _copy_processor(tiny, vdir)
    if with_weights:
        import torch
        from transformers import Qwen2_5OmniThinkerForConditionalGeneration

        hdir = work / "hf"
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = Qwen2_5OmniThinkerForConditionalGeneration._from_config(
                cfg.thinker_config, dtype=torch.bfloat16
            )
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
        model.save_pretrained(hdir)
        _copy_processor(tiny, hdir)


def _copy_processor(src: Path, dst: Path) -> None:
    for f in src.iterdir():
        if f.name not in ("config.json", "generation_config.json") and f.suffix != ".safetensors":
            shutil.copy(f, dst / f.name)


def _clips(work: Path, n: int, seconds: float) -> list[str]:
    from cafe.audio import write_wav

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        p = work / "audio" / f"clip{i:03d}.wav"
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            t = np.arange(int(16000 * seconds)) / 16000
            x = 0.2 * np.sin(2 * np.pi * (150 + 40 * i) * t) + 0.05 * rng.standard_normal(len(t))
            write_wav(p, x.astype(np.float32))
        out.append(str(p))
    return out


def _requests(clips: list[str], n: int, max_new: int, offset: int = 0) -> list[Any]:
    from cafe.records import Request

    question = (
        "Which sound source is heard first, and how many times does it repeat?\n"
        "Select one option from the provided choices:\n(A) a dog\n(B) a bell\n(C) a car\n(D) rain"
    )
    return [
        Request(
            sample_id=f"item{offset + i:04d}",
            run_index=0,
            messages=[
                {"role": "system", "content": "You are a helpful assistant."},
                {
                    "role": "user",
                    "content": [
                        {"type": "audio", "path": clips[offset + i]},
                        {"type": "text", "text": question},
                    ],
                },
            ],  # fmt: skip
            audio=[clips[offset + i]],
            generation={"max_new_tokens": max_new, "temperature": 0.0},
            seed=i,
            prompt_style="lalm",
            template_hash="perf",
        )
        for i in range(n)
    ]


# ---- phases (each in its own process) ------------------------------------------------------
def phase_vllm(args: argparse.Namespace) -> dict[str, Any]:
    from cafe.adapters import ADAPTERS, ModelCard

    work = Path(args.work)
    warm = 8
    clips = _clips(work, warm + args.items, args.clip_seconds)  # one clip per item
    warmup = _requests(clips, warm, args.max_new_tokens)
    reqs = _requests(clips, args.items, args.max_new_tokens, offset=warm)
    card = ModelCard(name="omni7b-shaped", adapter="vllm", engine="vllm")
    ad = ADAPTERS.get("vllm")(
        card, checkpoint=str(work / "vllm"), load_format="dummy", dtype="bfloat16",
        max_model_len=4096, gpu_memory_utilization=args.gpu_memory_utilization,
        ignore_eos=True, min_tokens=args.max_new_tokens, max_new_tokens=args.max_new_tokens,
        family="qwen2.5-omni",
        # identical inputs must not make a later pass cheaper
        enable_prefix_caching=False, engine_args={"mm_processor_cache_gb": 0},
    )  # fmt: skip
    ad.generate(warmup)  # CUDA graphs, kernels
    sp = ad.sampling_params(reqs[0].generation, None)

    def harness() -> tuple[float, list[Any]]:
        t0 = time.perf_counter()
        out = ad.generate(reqs)  # render + decode audio + generate, as a run does it
        return time.perf_counter() - t0, out

    def raw() -> tuple[float, list[Any]]:
        prompts = [ad.render(r) for r in reqs]  # rendered beforehand: not timed
        t0 = time.perf_counter()
        out = ad.llm.generate(prompts, [sp] * len(prompts), use_tqdm=False)
        return time.perf_counter() - t0, out

    times: dict[str, list[float]] = {"harness": [], "raw": []}
    outs: dict[str, Any] = {}
    for name in ("harness", "raw", "raw", "harness"):  # ABBA: drift cancels
        dt, out = (harness if name == "harness" else raw)()
        times[name].append(dt)
        outs[name] = out
    h, r = sum(times["harness"]), sum(times["raw"])
    return {
        "harness_items_per_s": len(times["harness"]) * len(reqs) / h,
        "raw_items_per_s": len(times["raw"]) * len(reqs) / r,
        "passes_s": times,
        "items": len(reqs),
        "harness_tokens": sorted({c.output_tokens for c in outs["harness"]}),
        "raw_tokens": sorted({len(o.outputs[0].token_ids) for o in outs["raw"]}),
        "prompt_tokens": len(outs["raw"][0].prompt_token_ids or []),
        "errors": [c.error for c in outs["harness"] if c.error][:3],
    }


def phase_transformers(args: argparse.Namespace) -> dict[str, Any]:
    from cafe.adapters import ADAPTERS, ModelCard

    work = Path(args.work)
    warm = args.tf_batch_size
    clips = _clips(work, warm + args.tf_items, args.clip_seconds)
    warmup = _requests(clips, warm, args.max_new_tokens)
    reqs = _requests(clips, args.tf_items, args.max_new_tokens, offset=warm)
    card = ModelCard(name="omni7b-shaped-hf", adapter="qwen2.5-omni")
    ad = ADAPTERS.get("qwen2.5-omni")(
        card, checkpoint=str(work / "hf"), dtype="bfloat16", device_map="cuda",
        batch_size=args.tf_batch_size, max_new_tokens=args.max_new_tokens,
    )  # fmt: skip
    ad.model.generation_config.min_new_tokens = args.max_new_tokens  # fixed length, like vLLM
    ad.generate(warmup)
    t0 = time.perf_counter()
    out = []
    for i in range(0, len(reqs), args.tf_batch_size):
        out += ad.generate(reqs[i : i + args.tf_batch_size])
    dt = time.perf_counter() - t0
    return {
        "items_per_s": len(reqs) / dt,
        "items": len(reqs),
        "tokens": sorted({c.output_tokens for c in out}),
        "errors": [c.error for c in out if c.error][:3],
    }


def _sub(phase: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", phase, *sys.argv[1:]]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", ".")}
    res = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, text=True)
    if res.returncode != 0:
        raise SystemExit(f"phase {phase} failed (exit {res.returncode})")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/cafe-gpu-perf")
    ap.add_argument("--items", type=int, default=128)
    ap.add_argument("--tf-items", type=int, default=32)
    ap.add_argument("--tf-batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--clip-seconds", type=float, default=30.0)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true", help="transformers phase only")
    ap.add_argument("--phase", choices=["build", "vllm", "transformers"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)

    if args.phase == "build":
        build(work, with_weights=not args.skip_transformers)
        print(json.dumps({"built": str(work)}))
        return
    if args.phase == "vllm":
        print(json.dumps(phase_vllm(args)))
        return
    if args.phase == "transformers":
        print(json.dumps(phase_transformers(args)))
        return

    t0 = time.perf_counter()
    if not (work / "vllm" / "config.json").exists() or (
        not args.skip_transformers and not (work / "hf" / "config.json").exists()
    ):
        _sub("build", args)
    print(f"built in {time.perf_counter() - t0:.0f} s: {work}", flush=True)
    v = None if args.skip_vllm else _sub("vllm", args)
    if v is not None:
        print(
            f"harness-vllm  {v['harness_items_per_s']:.2f} items/s  ({v['items']} items, "
            f"tokens/item {v['harness_tokens']}, prompt tokens {v['prompt_tokens']})\n"
            f"raw-vllm      {v['raw_items_per_s']:.2f} items/s  (tokens/item {v['raw_tokens']})\n"
            f"passes (s)    {v['passes_s']}\n"
            f"harness/raw   {100 * v['harness_items_per_s'] / v['raw_items_per_s']:.1f}% "
            "(target >= 90%)",
            flush=True,
        )
        if v["errors"]:
            print(f"harness errors: {v['errors']}")
        print("RESULT " + json.dumps({"vllm": v}), flush=True)
    if not args.skip_transformers:
        t = _sub("transformers", args)
        print(
            f"transformers  {t['items_per_s']:.3f} items/s  ({t['items']} items, "
            f"tokens/item {t['tokens']})",
            flush=True,
        )
        if v is not None:
            ratio = v["harness_items_per_s"] / t["items_per_s"]
            print(f"vllm/transformers {ratio:.1f}x (target >= 20x)")
        print("RESULT " + json.dumps({"transformers": t}), flush=True)


if __name__ == "__main__":
    main()
