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
    n: int = 16,
    seed: int = 0,
    prompt_style: str | None = None,
    generation: dict[str, Any] | None = None,
) -> Answerer:
    """Answers through `cafe.runner.resolve_model` + the registered adapter; sampling
    (temperature 1.0 unless the recipe says otherwise) so the N answers can differ."""

    def answer(samples: list[Sample]) -> dict[str, list[bool]]:
        from tqdm import tqdm

        from cafe.adapters import ADAPTERS
        from cafe.benchmarks.scoring import answer_text_of, rule_for
        from cafe.prompts import build_request, load_template
        from cafe.runner import resolve_model

        resolved = resolve_model(model, checkpoint)
        card = resolved.card
        adapter = ADAPTERS.get(card.adapter)(card, resolved.checkpoint)
        style = prompt_style or card.prompt_style
        template = load_template(style)
        gen = {**card.generation, "temperature": 1.0, **(generation or {})}
        requests = [
            build_request(s, style, r, seed + r, gen, template) for s in samples for r in range(n)
        ]
        by_id = {s.id: s for s in samples}
        out: dict[str, list[bool]] = {s.id: [] for s in samples}
        size = max(1, adapter.default_batch_size)
        try:
            for i in tqdm(range(0, len(requests), size), desc="difficulty", leave=False):
                batch = requests[i : i + size]
                for req, comp in zip(batch, adapter.generate(batch), strict=True):
                    s = by_id[req.sample_id]
                    # the benchmark's one rule on the answer text, as the runner scores it
                    ok = comp.error is None and rule_for(s.bench)(answer_text_of(comp.text), s)
                    out[s.id].append(ok)
        finally:
            adapter.close()
        return out

    return answer
