"""Data parallel for the offline vLLM adapter: one engine per rank, each in its own process.

vLLM's ``LLM(data_parallel_size=k)`` raises in current releases (offline data parallel needs one
process per rank; vLLM's examples/offline_inference/data_parallel.py launches them) and hung in
older ones. Here rank r is a spawned process that sees only its own GPUs
(``CUDA_VISIBLE_DEVICES``: tensor x pipeline parallel devices each) and runs an ordinary
single-engine VLLMAdapter; each generate() call is split across the ranks with every run of a
sample on one rank (so greedy sharing and ``runs_as: n`` still see all of them), and the
completions come back in request order."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from cafe.adapters.base import ModelCard
from cafe.records import Completion, Request


def shard(requests: list[Request], ranks: int) -> list[list[int]]:
    """Request indices per rank: samples dealt round-robin in order of first appearance, all
    runs of a sample on the same rank."""
    by_sample: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        by_sample[r.sample_id].append(i)
    out: list[list[int]] = [[] for _ in range(ranks)]
    for k, idx in enumerate(by_sample.values()):
        out[k % ranks].extend(idx)
    return out


def device_slices(ranks: int, per_rank: int, visible: list[str]) -> list[list[str]]:
    """The GPUs of each rank: consecutive blocks of ``per_rank`` visible devices."""
    if len(visible) < ranks * per_rank:
        raise ValueError(
            f"data_parallel_size {ranks} x {per_rank} GPU(s) per engine needs "
            f"{ranks * per_rank} GPUs; {len(visible)} visible"
        )
    return [visible[r * per_rank : (r + 1) * per_rank] for r in range(ranks)]


def _visible_devices() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env:
        return [d.strip() for d in env.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def _worker(conn: Any, card: ModelCard, checkpoint: str, options: dict, devices: list[str]):
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)  # before vLLM/torch touch CUDA
    from cafe.adapters import ADAPTERS

    try:
        adapter = ADAPTERS.get("vllm")(card, checkpoint=checkpoint, **options)
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    while True:
        requests = conn.recv()
        if requests is None:
            adapter.close()
            return
        try:
            conn.send(("ok", adapter.generate(requests)))
        except Exception as e:  # the adapter fails items itself; this is a crash
            conn.send(("error", f"{type(e).__name__}: {e}"))


class DataParallelEngines:
    def __init__(self, card: ModelCard, checkpoint: str, options: dict[str, Any], ranks: int):
        import multiprocessing

        per_rank = int(options.get("tensor_parallel_size") or 1) * int(
            options.get("pipeline_parallel_size") or 1
        )
        slices = device_slices(ranks, per_rank, _visible_devices())
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        single = {**options, "data_parallel_size": 1}
        self.conns, self.procs = [], []
        for devices in slices:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, card, checkpoint, single, devices))
            p.daemon = True
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        for r, conn in enumerate(self.conns):
            status, message = conn.recv()
            if status != "ready":
                self.close()
                raise ValueError(f"vLLM data-parallel rank {r}: {message}")

    def generate(self, requests: list[Request]) -> list[Completion]:
        parts = shard(requests, len(self.conns))
        for conn, idx in zip(self.conns, parts, strict=True):
            conn.send([requests[i] for i in idx])
        out: list[Completion | None] = [None] * len(requests)
        for conn, idx in zip(self.conns, parts, strict=True):
            status, result = conn.recv()
            for j, i in enumerate(idx):
                r = requests[i]
                out[i] = (
                    result[j]
                    if status == "ok"
                    else Completion(r.sample_id, r.run_index, None, error=f"vllm: {result}")
                )
        return [c for c in out if c is not None]

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
        self.conns, self.procs = [], []
