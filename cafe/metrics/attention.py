"""Audio attention ratio (SPEC §4, Figure 6): for each generated token, the share of its attention
mass on the input audio positions (averaged over layers and heads by the adapter's tracing hook),
averaged here over items per generated-token index.

The tracing itself lives with the transformers adapters
(``cafe.adapters.hf.attention.trace_audio_attention(adapter, request)``); this module only averages
and writes attention.json, so the averaging is testable on fixed arrays."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np


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


@click.command("attention")
@click.option("--model", required=True, help="Model card, adapter name or checkpoint folder.")
@click.option("--checkpoint", default=None, help="Checkpoint overriding the card's.")
@click.option("--bench", required=True, help="Benchmark name.")
@click.option("--data", default=None, help="Benchmark metadata file or folder.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Items to trace (one forward pass with attentions per generated token).",
)
@click.option("--prompt-style", default=None, help="Override the card's prompt style.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=128, show_default=True)
@click.option(
    "--min-items",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Drop token indices fewer items reached.",
)
@click.option(
    "--out",
    type=click.Path(),
    default="attention.json",
    show_default=True,
    help="Output JSON file, or a run folder (writes RUN/attention.json).",
)
def attention_command(
    model: str,
    checkpoint: str | None,
    bench: str,
    data: str | None,
    limit: int,
    prompt_style: str | None,
    max_new_tokens: int,
    min_items: int,
    out: str,
) -> None:
    """Audio attention share per generated token, averaged over the first LIMIT items of a
    benchmark (Figure 6). Needs a transformers adapter (eager attention is used for tracing)."""
    from cafe.adapters.resolve import ModelLoadError, ModelNotFound, load_adapter, resolve_model
    from cafe.benchmarks import BENCHMARKS
    from cafe.prompts import build_request

    try:
        from cafe.adapters.hf.attention import trace_audio_attention
    except ImportError as e:
        raise click.ClickException(f"attention tracing needs the [hf] extra: {e}") from None
    try:
        resolved = resolve_model(model, checkpoint)
        adapter = load_adapter(resolved)
    except (ModelNotFound, ModelLoadError) as e:
        raise click.ClickException(str(e)) from None
    card = resolved.card
    loaded = BENCHMARKS.get(bench)().load(data)
    samples = [s for s in loaded.samples if not s.error][:limit]
    if not samples:
        raise click.ClickException(f"{bench}: no usable samples to trace")
    generation = {**card.generation, "max_new_tokens": max_new_tokens, "temperature": 0.0}
    traces, problems = [], []
    from tqdm import tqdm

    for s in tqdm(samples, desc="attention", unit="item"):
        request = build_request(s, prompt_style or card.prompt_style, 0, 0, generation)
        try:
            trace = trace_audio_attention(adapter, request, max_new_tokens=max_new_tokens)
            traces.append(shares_of(trace))
        except Exception as e:  # one bad item is reported, the rest go on
            problems.append(f"{s.id}: {type(e).__name__}: {e}")
    from cafe.failures import most_failed, summary_lines

    failures = [(p, p.split(":", 1)[0]) for p in problems]
    for line in summary_lines("items", failures, len(samples)):
        click.echo(line, err=True)
    if most_failed(len(problems), len(samples)):  # nothing worth writing: keep any earlier file
        raise click.ClickException(
            f"{len(problems)} of {len(samples)} items could not be traced (reasons above); "
            "nothing written"
        )
    result = {"model": resolved.label, "bench": bench, **average_by_index(traces, min_items)}
    result["problems"] = problems
    path = Path(out)
    if path.is_dir():
        path = path / "attention.json"
    from cafe.redaction import scrub_text

    path.write_text(scrub_text(json.dumps(result, indent=2)) + "\n")
    click.echo(f"{len(traces)} items traced; mean audio share {result['overall_mean']}; -> {path}")
