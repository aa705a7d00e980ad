"""Adapter "cascade": a front turns each clip into text (a speech recognizer's transcript or a
captioner's caption: cafe.adapters.fronts), a back (any registered text-capable model: a served
model, an API model, a GGUF in-process) answers from that text.

Card options:
- ``front``: ``{kind: faster-whisper | captioner, ...}`` (the front's own options);
- ``back``: a model card name, or an inline card (``{adapter: llama-cpp, checkpoint: ...}``);
- ``answer_by``: ``generate`` (the back writes its answer to the prompt, the audio replaced by
  the front's text) or ``loglik`` (each option scored by the back's log-likelihood of it as the
  reply, the best one answered: for small back models, which write a letter badly);
- ``normalise`` (loglik): ``chars`` (default: the summed log-likelihood divided by the option's
  length in characters, lm-evaluation-harness's acc_norm), ``bytes`` (by UTF-8 bytes) or
  ``none`` (the sum, lm-evaluation-harness's acc).

Every completion carries the front's output (text, front, latency, whether cached) and, under
loglik, every option's log-likelihood and score; the runner copies both into the prediction.
The run spec holds these options whole, so its identity covers both halves; the front's output
is cached by clip content and front identity (``fronts.sqlite``) so other backs reuse it.
A clip-less request (the text-only control) asks the back the question alone."""

from __future__ import annotations

import threading
import time
from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard
from cafe.adapters.fronts import FRONTS, CachedFront, FrontOutput
from cafe.records import Completion, Request

#: normalisation name -> (what a report says, the length an option's log-likelihood is divided by)
NORMALISATIONS = {
    "chars": ("log-likelihood / characters (lm-evaluation-harness acc_norm)", len),
    "bytes": ("log-likelihood / UTF-8 bytes (lm-evaluation-harness acc_bytes)",
              lambda s: len(s.encode())),
    "none": ("summed log-likelihood (lm-evaluation-harness acc)", lambda s: 1),
}  # fmt: skip
ANSWER_BY = ("generate", "loglik")


def _back_card(owner: str, back: Any) -> tuple[ModelCard, str | None]:
    """The back's card: a card name, or an inline card (a mapping with at least ``adapter``)."""
    from cafe.adapters.resolve import resolve_model

    if isinstance(back, str):
        resolved = resolve_model(back)
        return resolved.card, resolved.checkpoint
    if isinstance(back, dict) and "adapter" in back:
        card = ModelCard.from_dict(f"{owner}/back", dict(back))
        return card, card.checkpoint
    raise ValueError("option back: a model card name or an inline card with an adapter")


def with_text(messages: list[dict[str, Any]], label: str, text: str) -> list[dict[str, Any]]:
    """The messages with each audio part replaced by the front's text, quoted and labelled."""

    def part(p: dict[str, Any]) -> dict[str, Any]:
        if p.get("type") != "audio":
            return p
        return {"type": "text", "text": f'{label} of the audio clip: "{text}"'}

    return [
        {**m, "content": [part(p) for p in m["content"]]}
        if isinstance(m.get("content"), list) else m
        for m in messages
    ]  # fmt: skip


@ADAPTERS.register("cascade")
class CascadeAdapter(Adapter):
    """A speech recognizer or captioner, then a text model (see the module's docstring)."""

    #: generation "reasoning_budget" (cafe.robustness.budgets): passed to the back, which
    #: forces it (answer_by generate); answer_by loglik writes no reasoning, and says so
    budget_method = "budget forcing by the back (answer_by generate)"

    default_batch_size = 8
    engine = "cascade"
    group = "Cascade"
    execution_options = Adapter.execution_options | {"front_cache"}

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        from cafe.adapters.resolve import ResolvedModel, load_adapter
        from cafe.cache import Cache, cache_file

        self.answer_by = str(self.options.get("answer_by", "generate"))
        if self.answer_by not in ANSWER_BY:
            raise ValueError(f"option answer_by: {self.answer_by!r} is not one of {ANSWER_BY}")
        self.normalise = str(self.options.get("normalise", "chars"))
        if self.normalise not in NORMALISATIONS:
            raise ValueError(f"option normalise: {self.normalise!r}: one of {list(NORMALISATIONS)}")
        front = dict(self.options.get("front") or {})
        kind = front.pop("kind", None)
        if kind not in FRONTS:
            raise ValueError(f"option front.kind: {kind!r} is not one of {sorted(FRONTS)}")
        back_card, back_ckpt = _back_card(card.name, self.options.get("back"))
        self.back = load_adapter(ResolvedModel(back_card, back_card.name, back_ckpt))
        if self.answer_by == "loglik" and not hasattr(self.back, "option_logprobs"):
            self.back.close()
            raise ValueError(
                f"answer_by loglik: back {back_card.name!r} (adapter {back_card.adapter}) cannot "
                "score options; use answer_by generate or a llama-cpp back"
            )
        self.front = FRONTS[kind](front)
        use_cache = self.options.get("front_cache", True)
        self.fronts = CachedFront(
            self.front, Cache(cache_file("fronts.sqlite") if use_cache else None)
        )
        self.default_concurrency = getattr(self.back, "default_concurrency", 1)
        self.token_counter = getattr(self.back, "token_counter", self.token_counter)
        self.back_calls = 0
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return {
            **super().identity(),
            "front": self.front.identity(),
            "back": self.back.identity(),
            "answer_by": self.answer_by,
            **({"normalise": self.normalise} if self.answer_by == "loglik" else {}),
        }

    def served_identity(self) -> dict[str, Any] | None:
        """The back's served identity (what its server reports): the call cache key holds it,
        so a back server restarted with other weights never reuses this cascade's answers."""
        back = self.back.served_identity()
        return None if back is None else {"back": back}

    @property
    def usage(self) -> dict[str, Any]:
        """Front calls and front cache hits, back calls, and the back's own usage (tokens, cost)."""
        back = getattr(self.back, "usage", None)
        return {
            **(back if isinstance(back, dict) else {}),
            "front_calls": self.fronts.calls,
            "front_cache_hits": self.fronts.hits,
            "back_calls": self.back_calls,
        }

    def count_tokens(self, text: str) -> int:
        return self.back.count_tokens(text)

    def generate(self, requests: list[Request]) -> list[Completion]:
        fronts: list[FrontOutput | str] = []
        for r in requests:
            try:
                fronts.append(self.fronts.describe(r.audio))
            except Exception as e:  # one clip the front cannot read fails its item only
                fronts.append(f"front error: {type(e).__name__}: {str(e).splitlines()[0]}")
        answer = self._loglik if self.answer_by == "loglik" else self._generate
        ready = [
            (r, f) for r, f in zip(requests, fronts, strict=True) if isinstance(f, FrontOutput)
        ]
        done = dict(zip((id(r) for r, _ in ready), answer(ready), strict=True)) if ready else {}
        return [
            done[id(r)] if isinstance(f, FrontOutput)
            else Completion(r.sample_id, r.run_index, None, error=f)
            for r, f in zip(requests, fronts, strict=True)
        ]  # fmt: skip

    def _generate(self, items: list[tuple[Request, FrontOutput]]) -> list[Completion]:
        from dataclasses import replace

        if any(r.generation.get("reasoning_budget") is not None for r, _ in items) and not (
            getattr(self.back, "budget_method", None)
        ):
            why = f"back {type(self.back).__name__} cannot take a reasoning budget"
            return [Completion(r.sample_id, r.run_index, None, error=why) for r, _ in items]

        from cafe.adapters.base import call_adapter

        label = self.front.label
        # the back hears nothing: its request names no clip
        asked = [
            replace(r, messages=with_text(r.messages, label, f.text), audio=[]) for r, f in items
        ]
        with self._lock:
            self.back_calls += len(asked)
        out = call_adapter(self.back, asked)
        for c, (_, f) in zip(out, items, strict=True):
            c.backend = {"engine": "cascade", "front": f.to_dict(), "back": c.backend}
            c.latency_s = round(c.latency_s + (0.0 if f.cached else f.latency_s), 4)
        return out

    def _loglik(self, items: list[tuple[Request, FrontOutput]]) -> list[Completion]:
        return [self._loglik_one(r, f) for r, f in items]

    def _loglik_one(self, r: Request, f: FrontOutput) -> Completion:
        """The option the back finds most likely as its reply, by the named normalisation."""
        from cafe.adapters.reference import request_choices

        question, choices = request_choices(r)
        if r.generation.get("reasoning_budget") is not None:
            return Completion(r.sample_id, r.run_index, None, error="answer_by loglik writes no "
                              "reasoning, so a reasoning budget means nothing: pass "
                              "-o answer_by=generate")  # fmt: skip
        if not choices:
            return Completion(r.sample_id, r.run_index, None, error="prompt has no choices")
        # the front's text, then the question; without a clip (text-only) the question alone
        lines = [f'{self.front.label} of the audio clip: "{f.text}"'] if r.audio else []
        prompt = [{"role": "user", "content": "\n\n".join([*lines, question])}]
        start = time.perf_counter()
        logprobs = self.back.option_logprobs(prompt, choices)
        with self._lock:
            self.back_calls += 1
        how, length = NORMALISATIONS[self.normalise]
        scores = [lp / max(1, length(c)) for lp, c in zip(logprobs, choices, strict=True)]
        best = choices[max(range(len(choices)), key=scores.__getitem__)]  # first of equals
        latency = time.perf_counter() - start + (0.0 if f.cached else f.latency_s)
        option_scores = {
            "normalise": self.normalise, "how": how, "choices": choices,
            "logprobs": logprobs, "scores": scores,
        }  # fmt: skip
        return Completion(
            r.sample_id, r.run_index, f"<answer>{best}</answer>", output_tokens=0,
            latency_s=round(latency, 4),
            backend={"engine": "cascade", "front": f.to_dict(), "option_scores": option_scores},
        )  # fmt: skip

    def close(self) -> None:
        for part in (getattr(self, "back", None), getattr(self, "front", None)):
            if part is not None:
                part.close()
        fronts = getattr(self, "fronts", None)
        if fronts is not None:
            fronts.cache.close()
