"""Adapter "vllm": offline vLLM (``vllm.LLM``) for the audio architectures vLLM supports
(Qwen2.5-Omni thinker, Qwen2-Audio, Audio Flamingo 3, Phi-4-multimodal, Kimi-Audio, Voxtral,
Granite Speech, Ultravox, Qwen3-Omni).

Prompts are rendered with the checkpoint's own processor chat template (audio parts become the
model's placeholder); clips go in as ``multi_modal_data={"audio": (array, sr)}`` and vLLM's
multimodal processor expands the placeholder, exactly as its own examples do.

Options: ``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``,
``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``, ``dtype``, ``load_format``,
``enforce_eager``, ``trust_remote_code``, ``limit_audio`` (clips per prompt, default 1),
``engine_args`` (any other ``LLM(...)`` keyword), ``chat_template`` (a Jinja file overriding
the checkpoint's), ``runs_as`` ("seeds": one request per run with seed+k, resumable run by run;
"n": one request with ``SamplingParams.n = K`` per item, one prefill for all runs),
``max_new_tokens`` (caps every request), ``ignore_eos``/``min_tokens`` (fixed-length perf runs),
``lora_path`` (a LoRA every request uses, e.g. Phi-4-multimodal's ``speech-lora`` or Granite
Speech's built-in one as "."; relative paths resolve inside the checkpoint).
Greedy requests of the same prompt are generated once and shared by their runs."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard
from cafe.adapters.hf.base import to_processor_chat
from cafe.records import Completion, InputError, Request

#: LLM(...) keywords the adapter forwards from options as they are
_ENGINE_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "dtype",
    "load_format",
    "enforce_eager",
    "trust_remote_code",
    "enable_prefix_caching",
    "hf_overrides",
    "seed",
)


#: options that change what the model generates (part of the identity, hence of cache keys)
_SHAPING = (
    "dtype", "load_format", "hf_overrides", "engine_args", "chat_template", "lora_path",
    "max_new_tokens", "ignore_eos", "min_tokens", "runs_as",
)  # fmt: skip


@ADAPTERS.register("vllm")
class VLLMAdapter(Adapter):
    default_batch_size = 512  # vLLM schedules continuously; large batches keep it full
    default_concurrency = 1  # one engine per process

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        if not self.checkpoint:
            raise ValueError(f"model card {card.name!r}: vllm needs a checkpoint (--checkpoint)")
        from vllm import LLM

        o = self.options
        engine = {k: o[k] for k in _ENGINE_KEYS if o.get(k) is not None}
        engine["limit_mm_per_prompt"] = {"audio": int(o.get("limit_audio", 1))}
        self.lora = None
        if o.get("lora_path"):
            engine.setdefault("enable_lora", True)
            engine.setdefault("max_lora_rank", int(o.get("max_lora_rank", 320)))
        engine.update(o.get("engine_args") or {})
        self.llm = LLM(model=str(self.checkpoint), **engine)
        if o.get("lora_path"):
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, _lora_dir(str(self.checkpoint), o["lora_path"]))
        self.tokenizer = self.llm.get_tokenizer()
        self.renderer = _load_renderer(str(self.checkpoint), o, self.tokenizer)
        self.sampling_rate = _sampling_rate(self.renderer)
        self.token_counter = str(getattr(self.tokenizer, "name_or_path", "") or self.checkpoint)
        self.default_batch_size = int(o.get("batch_size", self.default_batch_size))

    # -- inputs ------------------------------------------------------------------------------
    def render(self, request: Request) -> dict[str, Any]:
        """One vLLM prompt dict: chat-template text plus the decoded clips."""
        conv, clips = to_processor_chat(request, self.sampling_rate)
        text = self.renderer.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        prompt: dict[str, Any] = {"prompt": text}
        if clips:
            audio = [(c, self.sampling_rate) for c in clips]
            prompt["multi_modal_data"] = {"audio": audio[0] if len(audio) == 1 else audio}
        return prompt

    def sampling_params(self, generation: dict[str, Any], seed: int | None, n: int = 1) -> Any:
        from vllm import SamplingParams

        g = generation
        greedy = not g.get("do_sample", (g.get("temperature") or 0) > 0) or (
            g.get("temperature") is not None and g["temperature"] <= 0
        )
        kw: dict[str, Any] = {
            "n": n,
            "max_tokens": int(self.options.get("max_new_tokens") or g.get("max_new_tokens", 2048)),
            "temperature": 0.0 if greedy else float(g.get("temperature", 1.0)),
            "seed": seed,
        }
        for k in ("top_p", "top_k", "min_p", "repetition_penalty", "stop"):
            if g.get(k) is not None and not (greedy and k in ("top_p", "top_k", "min_p")):
                kw[k] = g[k]
        for k in ("ignore_eos", "min_tokens"):
            if self.options.get(k) is not None:
                kw[k] = self.options[k]
        return SamplingParams(**kw)

    # -- generation --------------------------------------------------------------------------
    def plan(self, requests: list[Request]) -> list[tuple[list[int], int | None, int]]:
        """Group requests into vLLM calls: (indices, seed, n). Greedy runs of one prompt share a
        call (identical outputs); sampled runs are one call each (seed+k), or one call with
        ``n`` samples under ``runs_as: n``."""
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            key = (
                r.sample_id,
                r.template_hash,
                repr(r.messages),
                repr(sorted(r.generation.items())),
            )
            groups[key].append(i)
        plan = []
        as_n = self.options.get("runs_as", "seeds") == "n"
        for idx in groups.values():
            g = requests[idx[0]].generation
            greedy = not g.get("do_sample", (g.get("temperature") or 0) > 0) or (
                g.get("temperature") is not None and g["temperature"] <= 0
            )
            if greedy:
                plan.append((idx, requests[idx[0]].seed, 1))
            elif as_n:
                first = min(idx, key=lambda i: requests[i].run_index)
                ordered = sorted(idx, key=lambda i: requests[i].run_index)
                plan.append((ordered, requests[first].seed, len(idx)))
            else:
                plan.extend(([i], requests[i].seed, 1) for i in idx)
        return plan

    def generate(self, requests: list[Request]) -> list[Completion]:
        out: list[Completion | None] = [None] * len(requests)
        prompts, params, calls = [], [], []
        for idx, seed, n in self.plan(requests):
            r = requests[idx[0]]
            try:
                prompt = self.render(r)
            except InputError as e:
                for i in idx:
                    out[i] = _failed(requests[i], str(e))
                continue
            prompts.append(prompt)
            params.append(self.sampling_params(r.generation, seed, n))
            calls.append((idx, n))
        if prompts:
            t0 = time.perf_counter()
            try:
                results = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora)
            except Exception as e:  # engine errors (prompt too long…): every item fails alike
                results = None
                reason = f"vllm: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            latency = (time.perf_counter() - t0) / max(1, len(prompts))
            for k, (idx, n) in enumerate(calls):
                if results is None:
                    for i in idx:
                        out[i] = _failed(requests[i], reason)
                    continue
                res = results[k]
                for j, i in enumerate(idx):
                    o = res.outputs[j if n > 1 else 0]
                    out[i] = Completion(
                        sample_id=requests[i].sample_id,
                        run_index=requests[i].run_index,
                        text=o.text,
                        output_tokens=len(o.token_ids),
                        latency_s=latency,
                        backend={
                            "engine": "vllm",
                            "finish_reason": o.finish_reason,
                            "prompt_tokens": len(res.prompt_token_ids or []),
                            "n": n,
                            "seed": params[k].seed,
                        },
                    )
        return [c for c in out if c is not None]

    def identity(self) -> dict[str, Any]:
        """Checkpoint plus the options that change outputs (not parallelism or memory)."""
        shaping = {k: self.options[k] for k in _SHAPING if self.options.get(k) is not None}
        return {**super().identity(), **({"options": shaping} if shaping else {})}

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text or "", add_special_tokens=False))

    def close(self) -> None:
        self.llm = None
        try:
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()
        except Exception:
            pass


class _TemplateRenderer:
    """A tokenizer with a chat template from a file (``chat_template`` option)."""

    def __init__(self, tokenizer: Any, template: str):
        self.tokenizer = tokenizer
        self.template = template

    def apply_chat_template(self, conv: list[dict[str, Any]], **kw: Any) -> str:
        return self.tokenizer.apply_chat_template(conv, chat_template=self.template, **kw)


def _load_renderer(path: str, options: dict[str, Any], tokenizer: Any) -> Any:
    """The checkpoint's processor (its chat template knows the audio placeholder); the
    tokenizer's template where the processor cannot load (e.g. without torchvision)."""
    if options.get("chat_template"):
        return _TemplateRenderer(tokenizer, Path(options["chat_template"]).read_text())
    from transformers import AutoProcessor

    try:
        proc = AutoProcessor.from_pretrained(
            path, trust_remote_code=bool(options.get("trust_remote_code"))
        )
        if getattr(proc, "chat_template", None):
            return proc
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return tokenizer


def _lora_dir(checkpoint: str, lora: str) -> str:
    """A LoRA folder: absolute as given, else inside the checkpoint (downloaded if a hub id)."""
    if Path(lora).is_absolute():
        return lora
    root = Path(checkpoint)
    if not root.is_dir():
        from huggingface_hub import snapshot_download

        root = Path(snapshot_download(checkpoint))
    return str((root / lora).resolve())


def _sampling_rate(renderer: Any) -> int:
    fe = getattr(renderer, "feature_extractor", None) or getattr(renderer, "audio_processor", None)
    return int(getattr(fe, "sampling_rate", 16_000))


def _failed(r: Request, message: str) -> Completion:
    return Completion(sample_id=r.sample_id, run_index=r.run_index, text=None, error=message)
