"""Adapter "vllm": offline vLLM (``vllm.LLM``) for the audio architectures vLLM supports
(Qwen2.5-Omni thinker, Qwen2-Audio, Audio Flamingo 3, Phi-4-multimodal, Voxtral, Granite Speech,
Ultravox, Qwen3-Omni).

Prompts are written per family the way vLLM's own audio example writes them
(cafe/adapters/vllm_families.py: one placeholder per clip in the family's chat layout; the
card's ``family`` option or the checkpoint's model_type picks it, the checkpoint's own chat
template otherwise); clips go in as ``multi_modal_data={"audio": (array, sr)}`` and vLLM's
multimodal processor expands the placeholder. Modalities cafe never sends get a limit of 0.

Failure isolation: a prompt whose text alone is longer than ``max_model_len`` fails before
submission; when a batch call raises, its prompts are retried one by one, so a prompt that
fails fails alone. Data parallel: ``data_parallel_size: k`` starts k Ray actors, one engine
each on its own GPUs, on one node or several (vLLM's offline ``LLM`` has no single-process data
parallel; the ``ray`` extra).

Options: ``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``,
``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``, ``dtype``, ``load_format``,
``enforce_eager``, ``trust_remote_code``, ``family``, ``limit_audio`` (clips per prompt,
default 1), ``engine_args`` (any other ``LLM(...)`` keyword), ``chat_template`` (a Jinja file:
the checkpoint's template family with this template), ``runs_as`` ("seeds": one request per
run with seed+k, resumable run by run; "n": one request with ``SamplingParams.n`` per
contiguous block of runs, whose child j vLLM seeds parent+j), ``max_new_tokens`` (caps every
request), ``ignore_eos``/``min_tokens`` (fixed-length perf runs), ``lora_path`` (a LoRA every
request uses, e.g. Phi-4-multimodal's ``speech-lora`` or Granite Speech's built-in one as ".";
relative paths resolve inside the checkpoint). Greedy requests of the same prompt are generated
once and shared by their runs (marked ``greedy_shared`` in the backend record)."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard, is_greedy
from cafe.adapters.hf.base import to_processor_chat
from cafe.adapters.vllm_families import family_for
from cafe.records import Completion, InputError, Problem, Request

#: LLM(...) keywords the adapter forwards from options as they are
_ENGINE_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
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
    "max_new_tokens", "ignore_eos", "min_tokens", "runs_as", "family",
)  # fmt: skip


def _make_llm(**engine: Any) -> Any:
    from vllm import LLM

    return LLM(**engine)


def _make_sampling_params(**kw: Any) -> Any:
    from vllm import SamplingParams

    return SamplingParams(**kw)


@ADAPTERS.register("vllm")
class VLLMAdapter(Adapter):
    default_batch_size = 512  # vLLM schedules continuously; large batches keep it full
    default_concurrency = 1  # one engine per process
    requires = ("vllm", "vllm")
    weights_from_hub = True

    #: the engine and its request parameters (tests hand in a double of the engine)
    engine_factory = staticmethod(_make_llm)
    sampling_factory = staticmethod(_make_sampling_params)

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        if not self.checkpoint:
            raise ValueError(f"model card {card.name!r}: vllm needs a checkpoint (--checkpoint)")
        from cafe.adapters.hf.qwen2_5_omni import _model_type

        o = self.options
        family = family_for(o, _model_type(str(self.checkpoint)))
        if family.unsupported:
            raise ValueError(f"model card {card.name!r} on vLLM: {family.unsupported}")
        if o.get("chat_template") and not family.unsupported:
            family = family_for({"family": "chat-template"}, None)
        self.family = family
        self.default_batch_size = int(o.get("batch_size", self.default_batch_size))
        self.pool = None
        dp = int(o.get("data_parallel_size") or 1)
        if dp > 1:  # one engine per rank, each in its own process on its own GPUs
            from transformers import AutoTokenizer

            from cafe.adapters.vllm_dp import data_parallel_pool

            self.pool = data_parallel_pool(card, str(self.checkpoint), o, dp)
            self.tokenizer = AutoTokenizer.from_pretrained(
                str(self.checkpoint), trust_remote_code=bool(o.get("trust_remote_code"))
            )
            self.token_counter = str(self.checkpoint)
            return
        self.llm = self.engine_factory(model=str(self.checkpoint), **self.engine_kwargs())
        self.lora = None
        if o.get("lora_path"):
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, _lora_dir(str(self.checkpoint), o["lora_path"]))
        self.tokenizer = self.llm.get_tokenizer()
        self.renderer = self.tokenizer
        self.sampling_rate = int(o.get("sampling_rate", 16_000))
        if family.placeholder is None or family.layout is None:  # renders through a template
            self.renderer = _load_renderer(str(self.checkpoint), o, self.tokenizer)
            self.sampling_rate = _sampling_rate(self.renderer)
        self.token_counter = str(getattr(self.tokenizer, "name_or_path", "") or self.checkpoint)

    def engine_kwargs(self) -> dict[str, Any]:
        """LLM(...) keywords: the forwarded options, the family's modality limits (0 for what
        cafe never sends, so no vision tower or its KV-cache share), then ``engine_args``."""
        o = self.options
        engine = {k: o[k] for k in _ENGINE_KEYS if o.get(k) is not None}
        engine["limit_mm_per_prompt"] = self.family.limits(int(o.get("limit_audio", 1)))
        if o.get("lora_path"):
            engine.setdefault("enable_lora", True)
            engine.setdefault("max_lora_rank", int(o.get("max_lora_rank", 320)))
        engine.update(o.get("engine_args") or {})
        return engine

    # -- inputs ------------------------------------------------------------------------------
    def render(self, request: Request) -> dict[str, Any]:
        """One vLLM prompt dict: the family's prompt text plus the decoded clips. A prompt that
        cannot be written is an InputError naming the item (it fails alone)."""
        conv, clips = to_processor_chat(request, self.sampling_rate)
        try:
            text = self.family.render(conv, self.renderer)
        except Exception as e:  # a template error (Jinja TypeError…) is this item's failure
            first = (str(e).splitlines() or [""])[0]
            raise InputError(
                Problem(
                    file=request.audio[0] if request.audio else "<request>",
                    sample_id=request.sample_id,
                    field="prompt",
                    message=f"vLLM prompt ({self.family.name}): {type(e).__name__}: {first}",
                )
            ) from e
        prompt: dict[str, Any] = {"prompt": text}
        if clips:
            audio = [(c, self.sampling_rate) for c in clips]
            prompt["multi_modal_data"] = {"audio": audio[0] if len(audio) == 1 else audio}
        return prompt

    def sampling_params(self, generation: dict[str, Any], seed: int | None, n: int = 1) -> Any:
        return self.sampling_factory(**self.sampling_kwargs(generation, seed, n))

    def sampling_kwargs(self, generation: dict[str, Any], seed: int | None, n: int = 1):
        g = generation
        greedy = is_greedy(g)
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
        return kw

    # -- generation --------------------------------------------------------------------------
    def plan(self, requests: list[Request]) -> list[tuple[list[int], int | None, int]]:
        """Group requests into vLLM calls: (indices, seed, n). Greedy runs of one prompt share a
        call (identical outputs); sampled runs are one call each (seed+k), or under
        ``runs_as: n`` one call per block of consecutive seeds with ``n`` = its size: vLLM
        seeds child j with parent + j, so each run's output carries exactly its own seed even
        when a resumed run holds non-contiguous runs."""
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
            if is_greedy(requests[idx[0]].generation):
                plan.append((idx, requests[idx[0]].seed, 1))
            elif as_n:
                ordered = sorted(idx, key=lambda i: requests[i].seed)
                block = [ordered[0]]
                for i in ordered[1:]:
                    if requests[i].seed == requests[block[-1]].seed + 1:
                        block.append(i)
                    else:
                        plan.append((block, requests[block[0]].seed, len(block)))
                        block = [i]
                plan.append((block, requests[block[0]].seed, len(block)))
            else:
                plan.extend(([i], requests[i].seed, 1) for i in idx)
        return plan

    def generate(self, requests: list[Request]) -> list[Completion]:
        if self.pool is not None:
            return self.pool.generate(requests)
        out: list[Completion | None] = [None] * len(requests)
        limit = self._max_model_len()
        prompts, params, calls = [], [], []
        for idx, seed, n in self.plan(requests):
            r = requests[idx[0]]
            try:
                prompt = self.render(r)
            except InputError as e:
                for i in idx:
                    out[i] = _failed(requests[i], str(e))
                continue
            if limit is not None:  # the text alone (each placeholder one token) must fit
                length = self.count_tokens(prompt["prompt"])
                if length > limit:
                    msg = f"vllm: prompt text is {length} tokens, over max_model_len {limit}"
                    for i in idx:
                        out[i] = _failed(requests[i], msg)
                    continue
            prompts.append(prompt)
            params.append(self.sampling_params(r.generation, seed, n))
            calls.append((idx, seed, n))
        if prompts:
            t0 = time.perf_counter()
            results = self._run(prompts, params)
            latency = (time.perf_counter() - t0) / max(1, len(prompts))
            for (idx, seed, n), res in zip(calls, results, strict=True):
                done = self._completions(requests, idx, seed, n, res, latency)
                for i, c in zip(idx, done, strict=True):
                    out[i] = c
        return [c for c in out if c is not None]

    def _run(self, prompts: list[dict[str, Any]], params: list[Any]) -> list[Any]:
        """One engine call for the batch; if it raises (vLLM aborts the whole call for one bad
        prompt), each prompt again on its own: results, or the exception a prompt raised."""
        try:
            return list(self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora))
        except Exception as e:
            if len(prompts) == 1:
                return [e]
        results: list[Any] = []
        for p, sp in zip(prompts, params, strict=True):
            try:
                alone = self.llm.generate([p], [sp], use_tqdm=False, lora_request=self.lora)
                results.append(alone[0])
            except Exception as e:  # this prompt's own failure
                results.append(e)
        return results

    def _completions(
        self, requests: list[Request], idx: list[int], seed: int | None, n: int, res: Any, latency
    ) -> list[Completion]:
        if isinstance(res, Exception):
            first = (str(res).splitlines() or [""])[0]
            return [_failed(requests[i], f"vllm: {type(res).__name__}: {first}") for i in idx]
        greedy = is_greedy(requests[idx[0]].generation)
        by_index = {getattr(o, "index", j): o for j, o in enumerate(res.outputs)}
        out = []
        for j, i in enumerate(idx):
            o = by_index[j if n > 1 else 0]
            backend = {
                "engine": "vllm",
                "family": self.family.name,
                "finish_reason": o.finish_reason,
                "prompt_tokens": len(res.prompt_token_ids or []),
                "n": n,
                # the seed the engine used for this output (vLLM: child j of n gets seed + j)
                "seed": None if seed is None or greedy else seed + (j if n > 1 else 0),
            }
            if greedy and len(idx) > 1:  # one generation stands for all these runs
                backend["greedy_shared"] = sorted(requests[k].run_index for k in idx)
            out.append(
                Completion(
                    sample_id=requests[i].sample_id,
                    run_index=requests[i].run_index,
                    text=o.text,
                    output_tokens=len(o.token_ids),
                    latency_s=latency,
                    backend=backend,
                )
            )
        return out

    def _max_model_len(self) -> int | None:
        if self.options.get("max_model_len"):
            return int(self.options["max_model_len"])
        engine = getattr(self.llm, "llm_engine", None)
        value = getattr(getattr(engine, "model_config", None), "max_model_len", None)
        return int(value) if isinstance(value, int) else None

    def identity(self) -> dict[str, Any]:
        """Checkpoint plus the options that change outputs (not parallelism or memory)."""
        shaping = {k: self.options[k] for k in _SHAPING if self.options.get(k) is not None}
        return {**super().identity(), **({"options": shaping} if shaping else {})}

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text or "", add_special_tokens=False))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
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
