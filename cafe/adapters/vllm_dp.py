"""Data parallel for the offline vLLM adapter: one engine per rank, each a Ray actor.

vLLM's ``LLM(data_parallel_size=k)`` raises in current releases (offline data parallel needs one
process per rank; vLLM's examples/offline_inference/data_parallel.py launches them) and hung in
older ones. Here rank r is a Ray actor that Ray gives its own GPUs (tensor x pipeline parallel
devices each) running an ordinary single-engine VLLMAdapter, on one node or several; each
generate() call is split across the ranks with every run of a sample on one rank (so greedy
sharing and ``runs_as: n`` still see all of them), and the completions come back in request
order (cafe.cluster.pool)."""

from __future__ import annotations

from typing import Any

from cafe.adapters.base import ModelCard


def device_slices(ranks: int, per_rank: int, visible: list[str]) -> list[list[str]]:
    """The GPUs of each rank: consecutive blocks of ``per_rank`` visible devices."""
    if len(visible) < ranks * per_rank:
        raise ValueError(
            f"data_parallel_size {ranks} x {per_rank} GPU(s) per engine needs "
            f"{ranks * per_rank} GPUs; {len(visible)} visible"
        )
    return [visible[r * per_rank : (r + 1) * per_rank] for r in range(ranks)]


def data_parallel_pool(card: ModelCard, checkpoint: str, options: dict[str, Any], ranks: int):
    """``ranks`` single-engine VLLMAdapters, each a Ray actor holding tensor x pipeline
    parallel GPUs (cafe.cluster.pool.ActorPool; ``ray: {address: ...}`` names the cluster, else
    a local one). A lost rank's items are transient failures a re-run retries."""
    from cafe.cluster.pool import ActorPool

    per_rank = int(options.get("tensor_parallel_size") or 1) * int(
        options.get("pipeline_parallel_size") or 1
    )
    placement = options.get("ray") or {}
    single = {k: v for k, v in options.items() if k != "ray"} | {"data_parallel_size": 1}
    return ActorPool(
        "vllm", card, checkpoint, single, actors=ranks, gpus=per_rank,
        address=placement.get("address"),
    )  # fmt: skip
