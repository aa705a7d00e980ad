"""Difficulty filter: the base model answers each question N times through the harness's own
adapter (model card, prompt style, request building and answer scoring as `cafe run` does it);
questions it always or never gets right are dropped (SPEC §7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cafe.records import Sample

Answerer = Callable[[list[Sample]], dict[str, list[bool]]]


def keep_by_difficulty(outcomes: list[bool]) -> bool:
    """Keep a question the model sometimes gets right and sometimes wrong."""
    return any(outcomes) and not all(outcomes)


def harness_answerer(
    model: str,
    checkpoint: str | None = None,
    *,
    cards: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    n: int = 16,
    seed: int = 0,
    prompt_style: str | None = None,
    generation: dict[str, Any] | None = None,
) -> Answerer:
    """Answers through the same model resolution, loading (card, adapter, ``options``) and execute
    stage as `cafe run`; sampling (temperature 1.0 unless the recipe says otherwise) so the N
    answers can differ."""

    def answer(samples: list[Sample]) -> dict[str, list[bool]]:
        from cafe.adapters import load_model
        from cafe.benchmarks.base import benchmark_class
        from cafe.benchmarks.string_match import answer_text_of
        from cafe.prompts import build_request, load_template
        from cafe.runner.execute import generate

        resolved, adapter = load_model(model, checkpoint, cards, options)
        card = resolved.card
        style = prompt_style or card.prompt_style
        template = load_template(style)
        gen = {**card.generation, "temperature": 1.0, **(generation or {})}
        requests = [
            build_request(s, style, r, seed + r, gen, template) for s in samples for r in range(n)
        ]
        by_id = {s.id: s for s in samples}
        rules = {b: benchmark_class(b)() for b in {s.bench for s in samples}}
        out: dict[str, list[bool]] = {s.id: [] for s in samples}
        try:
            completions = generate(adapter, requests, progress=True, desc="difficulty")
        finally:
            adapter.close()
        for req, comp in zip(requests, completions, strict=True):
            s = by_id[req.sample_id]
            # the benchmark's one rule on the answer text, as the runner scores it (no answer
            # section: wrong, never the whole output)
            given = answer_text_of(comp.text)
            ok = comp.error is None and rules[s.bench].is_correct(given, s.answer or "", s.choices)
            out[s.id].append(ok)
        return out

    return answer
