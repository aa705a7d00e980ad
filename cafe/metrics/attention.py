"""Audio attention ratio (SPEC §4, Figure 6): for each generated token, the share of its attention
mass on the input audio positions (averaged over layers and heads by the adapter's tracing hook),
averaged here over items per generated-token index.

The tracing itself lives with the transformers adapters
(``cafe.adapters.hf.attention.trace_audio_attention(adapter, request)``); this module only averages
and writes attention.json, so the averaging is testable on fixed arrays."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cafe.errors import CafeError
from cafe.jsontext import strict_dumps


def shares_of(trace: Any) -> list[float]:
    """The per-generated-token audio shares of one trace: an AudioAttentionTrace (its
    layer-averaged ``per_token()``), a dict with "per_token", or a plain sequence."""
    if hasattr(trace, "per_token"):
        trace = trace.per_token()
    elif isinstance(trace, dict):
        trace = trace["per_token"]
    return [float(v) for v in np.asarray(trace, dtype=float).ravel()]


def average_by_index(traces: Sequence[Sequence[float]], min_items: int = 1) -> dict[str, Any]:
    """Mean, std and item count of the audio share at each generated-token index over items of
    different lengths (an index is averaged over the items that reached it). Indices reached by
    fewer than ``min_items`` items are cut off, so the tail of one long answer does not pass for a
    trend."""
    longest = max((len(t) for t in traces), default=0)
    mat = np.full((len(traces), longest), np.nan)
    for i, t in enumerate(traces):
        mat[i, : len(t)] = t
    counts = np.sum(~np.isnan(mat), axis=0)
    keep = int(np.sum(counts >= max(1, min_items))) if longest else 0
    # counts are non-increasing in the index, so the kept indices are a prefix
    mat, counts = mat[:, :keep], counts[:keep]
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(mat, axis=0) if keep else np.array([])
        std = np.nanstd(mat, axis=0) if keep else np.array([])
    return {
        "index": list(range(keep)),
        "mean": [float(v) for v in mean],
        "std": [float(v) for v in std],
        "count": [int(c) for c in counts],
        "items": len(traces),
        "min_items": min_items,
        "overall_mean": float(np.nanmean(mat)) if keep else None,
    }


def attention(
    model: str,
    bench: str,
    *,
    checkpoint: str | None = None,
    data: str | None = None,
    limit: int = 20,
    prompt_style: str | None = None,
    max_new_tokens: int = 128,
    min_items: int = 1,
    out: str | Path | None = "attention.json",
    cards: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Audio attention share per generated token over the first ``limit`` items of ``bench``
    (Figure 6) -> the attention.json dict (also written to ``out``: a file, or a run folder's
    attention.json; None writes nothing). Needs a transformers adapter; an item that fails is
    listed under "problems" and the rest go on."""
    from cafe.adapters import load_model
    from cafe.benchmarks import BENCHMARKS
    from cafe.prompts import build_request

    try:
        from cafe.adapters.hf.attention import trace_audio_attention
    except ImportError as e:
        raise CafeError(f"attention tracing needs the [hf] extra: {e}") from None
    resolved, adapter = load_model(model, checkpoint, cards, options)
    try:
        card = resolved.card
        if not callable(getattr(adapter, "prepare_requests", None)):
            raise CafeError(
                f"model {card.name!r}: attention tracing needs a transformers adapter "
                f"(adapter {card.adapter} has no model weights to trace)"
            )
        bench_obj = BENCHMARKS.get(bench)()
        loaded = bench_obj.load(data)
        # the same default as `cafe run`: the benchmark's own prompt, else the card's
        style = prompt_style or bench_obj.default_prompt_style or card.prompt_style
        samples = [s for s in loaded.samples if not s.error][:limit]
        if not samples:
            raise CafeError(f"{bench}: no usable samples to trace")
        generation = {**card.generation, "max_new_tokens": max_new_tokens, "temperature": 0.0}
        traces, problems = [], []
        from tqdm import tqdm

        for s in tqdm(samples, desc="attention", unit="item", disable=not progress):
            request = build_request(s, style, 0, 0, generation)
            try:
                trace = trace_audio_attention(adapter, request, max_new_tokens=max_new_tokens)
                traces.append(shares_of(trace))
            except Exception as e:  # one bad item is reported, the rest go on
                problems.append(f"{s.id}: {type(e).__name__}: {e}")
    finally:
        adapter.close()
    from cafe.failures import most_failed, summary_lines

    reasons = summary_lines("items", [(p, p.split(":", 1)[0]) for p in problems], len(samples))
    if most_failed(len(problems), len(samples)):  # nothing worth writing: keep any earlier file
        raise CafeError(
            "\n".join([*reasons, f"{len(problems)} of {len(samples)} items could not be traced; "
                        "nothing written"])
        )  # fmt: skip
    for line in reasons:
        print(line, file=sys.stderr)
    result = {"model": resolved.label, "bench": bench, **average_by_index(traces, min_items)}
    result["problems"] = problems
    if out is not None:
        path = Path(out)
        if path.is_dir():
            path = path / "attention.json"
        from cafe.redaction import scrub_text

        path.write_text(scrub_text(strict_dumps(result, indent=2)) + "\n")
        result["path"] = str(path)
    return result
