"""Models shipped as remote code or as their authors' own package.

- ``hf-remote-code``: a checkpoint whose repo carries its own modelling code and a processor that
  follows the transformers convention (chat template + ``processor(text=…, audio=…)`` +
  ``generate``); loaded with ``trust_remote_code=True``.
- ``desta2.5``: DeSTA2.5-Audio through the authors' ``desta`` package (its own
  ``generate(messages=…)``; install it from the DeSTA2.5-Audio repository).
Kimi-Audio, MiMo-Audio, Step-Audio-R1/R1.1 and Step-Audio 2 run behind an OpenAI-compatible
server (vLLM, StepFun's vLLM fork, vLLM-Omni); their cards in cards/hf.yaml use the
``openai-compatible`` adapter and carry the launch command."""

from __future__ import annotations

import time
from typing import Any

from cafe.adapters.base import Adapter, ModelCard
from cafe.adapters.hf.base import TransformersAdapter
from cafe.records import Completion, Request


class RemoteCodeAdapter(TransformersAdapter):
    """A transformers checkpoint with remote code (``trust_remote_code`` is always on: name a
    revision in the card's options to pin the code you run)."""

    model_class = "AutoModelForCausalLM"

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **{**options, "trust_remote_code": True})


class DeSTA25Adapter(Adapter):
    """DeSTA2.5-Audio via ``from desta import DeSTA25AudioModel`` (the authors' package).

    The prompt's audio parts become the package's ``<|AUDIO|>`` markers with the clip paths in
    ``audios``; decoding settings pass through to its generate. One request at a time."""

    token_counter = "fallback-words"

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        try:
            from desta import DeSTA25AudioModel
        except ImportError:
            raise ImportError(
                "DeSTA2.5-Audio needs the authors' package: pip install "
                "git+https://github.com/kehanlu/DeSTA2.5-Audio.git"
            ) from None
        self.model = DeSTA25AudioModel.from_pretrained(self.checkpoint)
        device = self.options.get("device")
        if device:
            self.model.to(device)
        self.model.eval()

    @staticmethod
    def to_desta(request: Request) -> list[dict[str, Any]]:
        out = []
        for m in request.messages:
            content = m.get("content")
            if isinstance(content, str):
                out.append({"role": m["role"], "content": content})
                continue
            text, audios = [], []
            for part in content or []:
                if part.get("type") == "audio":
                    text.append("<|AUDIO|>")
                    audios.append({"audio": part["path"], "text": None})
                else:
                    text.append(part.get("text", ""))
            msg: dict[str, Any] = {"role": m["role"], "content": "\n".join(text)}
            if audios:
                msg["audios"] = audios
            out.append(msg)
        return out

    def generate(self, requests: list[Request]) -> list[Completion]:
        out = []
        for r in requests:
            g = r.generation
            sample = (g.get("temperature") or 0) > 0
            kw = {"max_new_tokens": g.get("max_new_tokens", 2048), "do_sample": sample}
            if sample:
                kw |= {"temperature": g["temperature"], "top_p": g.get("top_p", 1.0)}
            start = time.perf_counter()
            try:
                text = self.model.generate(messages=self.to_desta(r), **kw).text
                if isinstance(text, list):
                    text = text[0]
                out.append(
                    Completion(
                        r.sample_id,
                        r.run_index,
                        text,
                        latency_s=time.perf_counter() - start,
                        backend={"engine": "desta", "model": self.checkpoint},
                    )
                )
            except Exception as e:
                out.append(Completion(r.sample_id, r.run_index, None, error=f"{e}"[:300]))
        return out
