"""Items/s of the openai-compatible adapter at concurrency 64 against a loopback server that
answers every call after 200 ms: the bound is 64 / 0.2 s = 320 items/s; target at least 80%.

    PYTHONPATH=. python perf/api_concurrency.py [--items 960] [--clip-seconds 1]

Every item carries a real audio clip (decoded, re-encoded to WAV, base64'd), as in a run. The
loopback serves from its own process (a real server never shares the client's GIL);
--in-process measures the pessimistic single-interpreter case."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=960)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--clip-seconds", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=None, help="default: all items at once")
    ap.add_argument("--http-transport", default="auto", choices=["auto", "aiohttp", "httpx"])
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="serve the loopback in this process (shares the GIL with the client: pessimistic)",
    )
    args = ap.parse_args()

    from cafe.adapters import ADAPTERS, ModelCard
    from cafe.audio import write_wav
    from cafe.records import Request

    tmp = Path(tempfile.mkdtemp())
    clips = []
    for i in range(8):
        n = int(16000 * args.clip_seconds)
        x = 0.3 * np.sin(2 * np.pi * (200 + 50 * i) * np.arange(n) / 16000)
        write_wav(tmp / f"c{i}.wav", x.astype(np.float32))
        clips.append(str(tmp / f"c{i}.wav"))
    requests = [
        Request(
            sample_id=f"s{i}",
            run_index=0,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "audio", "path": clips[i % len(clips)]},
                        {"type": "text", "text": f"Question {i}? (A) dog (B) cat"},
                    ],
                }
            ],
            audio=[clips[i % len(clips)]],
            generation={"max_new_tokens": 256, "temperature": 0.0},
            seed=i,
            prompt_style="lalm",
            template_hash="perf",
        )
        for i in range(args.items)
    ]
    card = ModelCard(name="perf", adapter="openai-compatible", checkpoint="perf-model")
    bound = args.concurrency / args.latency
    with _server(args) as (url, server_cpu):
        cls = ADAPTERS.get("openai-compatible")
        adapter = cls(
            card, endpoint=url, concurrency=args.concurrency, http_transport=args.http_transport
        )
        adapter.generate(requests[: args.concurrency])  # warm: connections, imports
        bs = args.batch_size or len(requests)
        t0, cpu0, scpu0 = time.perf_counter(), time.process_time(), server_cpu()
        done = []
        for i in range(0, len(requests), bs):
            done += adapter.generate(requests[i : i + bs])
        dt = time.perf_counter() - t0
        cpu_ms = 1000 * (time.process_time() - cpu0) / len(requests)
        server_ms = 1000 * (server_cpu() - scpu0) / len(requests)
        adapter.close()
    ok = sum(c.error is None for c in done)
    rate = len(done) / dt
    print(
        f"api_concurrency: {rate:.1f} items/s at concurrency {args.concurrency}, "
        f"{args.latency * 1000:.0f} ms latency ({ok}/{len(done)} ok, {dt:.2f} s); "
        f"bound {bound:.0f}/s; share {100 * rate / bound:.1f}% (target >= 80%); "
        f"CPU per item: client {cpu_ms:.2f} ms, loopback {server_ms:.2f} ms; "
        f"http transport {args.http_transport}"
    )


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], float]]]:
    from cafe.testing.loopback import OpenAILoopback

    if args.in_process:
        with OpenAILoopback(reply=lambda body: "(A) dog", latency_s=args.latency) as srv:
            yield srv.url, lambda: 0.0  # shares this process's CPU figure
        return
    cmd = [sys.executable, "-m", "cafe.testing.loopback", "openai", "--latency",
           str(args.latency), "--reply", "(A) dog"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cpu() -> float:  # user + system seconds of the server process (Linux /proc)
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    try:
        yield proc.stdout.readline().strip(), cpu  # type: ignore[union-attr]
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
