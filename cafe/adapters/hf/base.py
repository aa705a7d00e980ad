"""Shared transformers adapter: load a checkpoint with its own processor and chat template, turn
cafe messages (content parts {"type": "audio", "path"} / {"type": "text", "text"}) into the
processor's inputs, and generate in left-padded batches. Families subclass it and set the model
class (and, where needed, how the processor is loaded); torch and transformers import lazily."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cafe.adapters.base import Adapter, ModelCard, is_greedy
from cafe.audio import load_audio
from cafe.records import Completion, InputError, Request

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
_DTYPES |= {"float16": "float16", "fp16": "float16", "half": "float16"}
# generation keys passed through to model.generate (others in Request.generation are ignored)
_GEN_KEYS = ("max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "min_p")


class TransformersAdapter(Adapter):
    """Options (card ``options`` or keyword arguments): ``dtype`` ("auto", "bfloat16",
    "float16", "float32"), ``device_map`` ("auto", "cpu", "cuda", "cuda:1", …),
    ``attn_implementation`` ("sdpa", "eager", "flash_attention_2"), ``batch_size``,
    ``trust_remote_code`` (False) and ``max_new_tokens`` (caps every request: the completion's
    backend records the value used)."""

    requires = ("transformers", "hf")
    weights_from_hub = True
    #: transformers class that loads this family's checkpoints
    model_class: str = "AutoModelForImageTextToText"
    #: the family's processor class, set where it bundles image/video processors (see
    #: audio_only_processor)
    processor_class: str | None = None
    default_batch_size = 8

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        if not self.checkpoint:
            raise ValueError(f"model {card.name!r}: no checkpoint (set the card's or --checkpoint)")
        self.batch_size = int(self.options.get("batch_size", self.default_batch_size))
        self.default_batch_size = self.batch_size
        self.processor = self.load_processor(self.checkpoint)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"  # decoder-only batches pad on the left
        self.model = self.load_model(self.checkpoint, **self._load_kwargs())
        self.model.eval()
        self.token_counter = str(getattr(self.tokenizer, "name_or_path", "") or self.checkpoint)

    # ---- loading (families override the parts that differ) -------------------------------
    def _load_kwargs(self) -> dict[str, Any]:
        import torch

        kw: dict[str, Any] = {}
        dtype = str(self.options.get("dtype", "auto"))
        kw["dtype"] = "auto" if dtype == "auto" else getattr(torch, _DTYPES.get(dtype, dtype))
        device_map = self.options.get("device_map")
        if device_map is None and torch.cuda.is_available():
            device_map = "auto"
        if device_map is not None:
            kw["device_map"] = device_map
        if self.options.get("attn_implementation"):
            kw["attn_implementation"] = self.options["attn_implementation"]
        if self.options.get("trust_remote_code"):
            kw["trust_remote_code"] = True
        return kw

    def load_model(self, path: str, **kwargs: Any) -> Any:
        import transformers

        return getattr(transformers, self.model_class).from_pretrained(path, **kwargs)

    def load_processor(self, path: str) -> Any:
        from transformers import AutoProcessor

        trust = bool(self.options.get("trust_remote_code"))
        try:
            return AutoProcessor.from_pretrained(path, trust_remote_code=trust)
        except (ImportError, OSError, ValueError, AttributeError) as e:
            # omni processors bundle image/video halves that need torchvision; audio never
            # does, so build the family's own processor class without them
            msg = str(e).lower()
            needs_vision = "torchvision" in msg or "video processor" in msg
            if self.processor_class is None or not needs_vision:
                raise
            return audio_only_processor(self.processor_class, path)

    # ---- inputs ---------------------------------------------------------------------------
    @property
    def sampling_rate(self) -> int:
        fe = getattr(self.processor, "feature_extractor", None) or getattr(
            self.processor, "audio_processor", None
        )
        return int(getattr(fe, "sampling_rate", 16_000))

    def convert_messages(self, request: Request) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
        return to_processor_chat(request, self.sampling_rate)

    def render(self, conv: list[dict[str, Any]]) -> str:
        return self.processor.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)

    def processor_inputs(self, texts: list[str], clips: list[np.ndarray]) -> Any:
        # pad the text only: each processor pads its audio features its own way (Whisper-style
        # extractors must keep their fixed 30 s window)
        kw: dict[str, Any] = {"text": texts, "return_tensors": "pt"}
        kw["text_kwargs"] = {"padding": True}
        if clips:
            kw["audio"] = clips
            kw["sampling_rate"] = self.sampling_rate
        return self.processor(**kw)

    def render_request(self, request: Request) -> tuple[str, list[np.ndarray]]:
        """Prompt text and decoded clips of one request (InputError on unreadable audio)."""
        conv, clips = self.convert_messages(request)
        return self.render(conv), clips

    def prepare(self, rendered: list[tuple[str, list[np.ndarray]]]) -> Any:
        """The model inputs of a batch (on the model's device, floats in its dtype)."""
        texts = [t for t, _ in rendered]
        clips = [c for _, cs in rendered for c in cs]
        return self._to_device(self.processor_inputs(texts, clips))

    def prepare_requests(self, requests: list[Request]) -> Any:
        return self.prepare([self.render_request(r) for r in requests])

    def _to_device(self, inputs: Any) -> Any:
        import torch

        dtype = self.model.dtype
        out = {}
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                v = v.to(self.model.device)
                if v.is_floating_point():
                    v = v.to(dtype)
            out[k] = v
        return out

    @property
    def audio_token_id(self) -> int | None:
        for obj in (self.model.config, getattr(self.model.config, "thinker_config", None)):
            for key in ("audio_token_id", "audio_token_index"):
                value = getattr(obj, key, None) if obj is not None else None
                if isinstance(value, int):
                    return value
        return getattr(self.processor, "audio_token_id", None)

    # ---- generation -----------------------------------------------------------------------
    def generation_kwargs(self, generation: dict[str, Any]) -> dict[str, Any]:
        kw = {k: generation[k] for k in _GEN_KEYS if generation.get(k) is not None}
        if self.options.get("max_new_tokens") is not None:  # an explicit option wins (-o)
            kw["max_new_tokens"] = int(self.options["max_new_tokens"])
        kw.setdefault("max_new_tokens", 2048)
        # an explicit temperature 0 means greedy, whatever the card's do_sample (-o temperature=0)
        sample = not is_greedy(generation)
        kw["do_sample"] = sample
        if not sample:  # greedy: drop sampling knobs so transformers does not warn about them
            for k in ("temperature", "top_p", "top_k", "min_p"):
                kw.pop(k, None)
        return kw

    def _groups(self, requests: list[Request]) -> Iterator[list[int]]:
        """Indices batched together: same decoding settings (and seed when sampling), at most
        batch_size each, in request order within a group."""
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            kw = self.generation_kwargs(r.generation)
            key = repr(sorted(kw.items())) + (f"|{r.seed}" if kw["do_sample"] else "")
            groups.setdefault(key, []).append(i)
        for idx in groups.values():
            for s in range(0, len(idx), self.batch_size):
                yield idx[s : s + self.batch_size]

    def generate(self, requests: list[Request]) -> list[Completion]:
        out: list[Completion | None] = [None] * len(requests)
        for idx in self._groups(requests):
            batch = [requests[i] for i in idx]
            for i, c in zip(idx, self._generate_batch(batch), strict=True):
                out[i] = c
        return [c for c in out if c is not None]

    def _generate_batch(self, requests: list[Request]) -> list[Completion]:
        # items whose audio cannot be read fail alone; the rest of the batch still runs
        good, rendered, failed = [], [], {}
        for r in requests:
            try:
                rendered.append(self.render_request(r))
                good.append(r)
            except InputError as e:
                failed[id(r)] = self._failure(r, str(e))
        results = {}
        if good:
            try:
                for r, c in zip(good, self._run(good, rendered), strict=True):
                    results[id(r)] = c
            except Exception as e:  # an engine error fails this batch's items, not the run
                msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                for r in good:
                    results[id(r)] = self._failure(r, msg)
        return [failed.get(id(r)) or results[id(r)] for r in requests]

    def _failure(self, r: Request, message: str) -> Completion:
        return Completion(r.sample_id, r.run_index, None, error=message, backend=self._backend())

    def _backend(self, **extra: Any) -> dict[str, Any]:
        return {"engine": "transformers", "model": self.checkpoint, **extra}

    def _run(self, requests: list[Request], rendered: list[Any]) -> list[Completion]:
        import torch

        gen = self.generation_kwargs(requests[0].generation)
        if gen["do_sample"]:
            torch.manual_seed(requests[0].seed)
        inputs = self.prepare(rendered)
        start = time.perf_counter()
        with torch.inference_mode():
            seqs = self.model.generate(**inputs, **gen, **self._special_ids())
        latency = (time.perf_counter() - start) / len(requests)
        new = seqs[:, inputs["input_ids"].shape[1] :]
        return [
            self._completion(r, row, gen["max_new_tokens"], latency)
            for r, row in zip(requests, new, strict=True)
        ]

    def _special_ids(self) -> dict[str, Any]:
        tok = self.tokenizer
        kw: dict[str, Any] = {}
        if tok.pad_token_id is not None:
            kw["pad_token_id"] = tok.pad_token_id
        return kw

    def _stop_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def _completion(self, r: Request, row: Any, max_new: int, latency: float) -> Completion:
        ids = row.tolist()
        stop = self._stop_ids()
        n = next((i for i, t in enumerate(ids) if t in stop), None)
        finish = "length" if n is None else "stop"
        ids = ids if n is None else ids[:n]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(
            r.sample_id,
            r.run_index,
            text,
            output_tokens=len(ids),
            latency_s=latency,
            backend=self._backend(finish_reason=finish, max_new_tokens=max_new),
        )

    # ---- checks used by `cafe doctor` and attention tracing --------------------------------
    def next_token_logits(self, requests: list[Request]) -> Any:
        """Logits of the first generated token for each request (float32, on CPU)."""
        import torch

        inputs = self.prepare_requests(requests)
        with torch.inference_mode():
            logits = self.model(**inputs).logits[:, -1, :]
        return logits.float().cpu()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text or "", add_special_tokens=False)["input_ids"])

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "engine": "transformers"}

    def close(self) -> None:
        self.model = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def to_processor_chat(
    request: Request, sampling_rate: int
) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """cafe messages -> the processor's chat format plus the decoded clips, in order (the
    transformers and vLLM adapters both render through this).

    Audio parts become ``{"type": "audio"}`` (the chat template renders the placeholder; the
    arrays go to the processor separately, so no template ever opens a file itself)."""
    audio_paths = iter(request.audio)
    clips: list[np.ndarray] = []
    conv: list[dict[str, Any]] = []
    for m in request.messages:
        content = m.get("content")
        if isinstance(content, str):
            conv.append({"role": m["role"], "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for part in content or []:
            if part.get("type") == "audio":
                path = part.get("path") or part.get("audio") or next(audio_paths, None)
                if path is None:
                    raise InputError_for(request, "an audio part has no path")
                clips.append(load_audio(path, sampling_rate, sample_id=request.sample_id))
                parts.append({"type": "audio"})
            elif part.get("type") == "text":
                parts.append({"type": "text", "text": part.get("text", "")})
        conv.append({"role": m["role"], "content": parts})
    return conv, clips


def InputError_for(request: Request, message: str) -> InputError:  # noqa: N802 (error factory)
    from cafe.records import Problem

    path = request.audio[0] if request.audio else "<request>"
    problem = Problem(file=path, sample_id=request.sample_id, field="audio", message=message)
    return InputError(problem)


_VISION_ATTRIBUTES = {"image_processor", "video_processor"}


def audio_only_processor(class_name: str, path: str) -> Any:
    """The checkpoint's own processor class, built from its tokenizer, audio feature extractor
    and chat template with the image/video processors left out (text + audio only)."""
    import transformers
    from transformers import AutoFeatureExtractor, AutoTokenizer

    base = getattr(transformers, class_name)

    class AudioOnly(base):  # type: ignore[misc, valid-type]
        def check_argument_for_proper_class(self, name: str, arg: Any) -> Any:
            return None if arg is None else super().check_argument_for_proper_class(name, arg)

    AudioOnly.__name__ = f"AudioOnly{class_name}"
    tok = AutoTokenizer.from_pretrained(path)
    template = tok.chat_template
    jinja = Path(path) / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text()
    pieces: dict[str, Any] = {}
    for attr in base.get_attributes():
        if attr in _VISION_ATTRIBUTES:
            pieces[attr] = None
        elif attr == "tokenizer":
            pieces[attr] = tok
        else:  # the audio feature extractor ("feature_extractor", "audio_processor")
            pieces[attr] = AutoFeatureExtractor.from_pretrained(path)
    return AudioOnly(**pieces, chat_template=template)
