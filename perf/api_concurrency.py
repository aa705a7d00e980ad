"""CPU per item and items/s of API calls at concurrency 64 against a loopback server that answers
every call after 200 ms: the bound is 64 / 0.2 s = 320 items/s; targets (issue 21 item 8): at
least 90% of the bound, and no more CPU per item than lmms-eval spends on the same clips.

    PYTHONPATH=. python perf/api_concurrency.py [--items 1920]
    PYTHONPATH=. python perf/api_concurrency.py --cafe-run                 # also through the runner
    PYTHONPATH=. python perf/api_concurrency.py --lmms-eval /tmp/lmms/bin/python   # side by side

Every item sends one clip of the synth benchmark (16 kHz mono WAV, 1-4 s), as a run does. Rows:
- ``cafe adapter``: the openai-compatible adapter's generate() (request building, audio
  encoding, limiter, HTTP, reply parsing): CPU of the timed batch after a warm-up batch;
- ``cafe run`` (--cafe-run): the whole `cafe run` path (plan, audio checks, model calls, scoring,
  redaction, durable writes), marginal: (CPU of N items - CPU of N/3) / (2N/3), so start-up and
  benchmark loading do not count;
- ``lmms-eval`` (--lmms-eval PYTHON): lmms-eval's own OpenAICompatible.generate_until (its
  thread pool and the openai SDK), run by PYTHON, an interpreter with lmms-eval installed (see
  perf/lmms_eval_client.py), on the same clips and server, timed like the adapter row.
The loopback serves from its own process (a real server never shares the client's GIL)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

PERF = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--items", type=int, default=1920)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--http-transport", default="auto", choices=["auto", "aiohttp", "httpx"])
    ap.add_argument(
        "--sine",
        type=float,
        metavar="SECONDS",
        help="send 8 sine clips of this length instead of the synth clips (issue 21's "
        "workload: 1 s); the --cafe-run row always runs the synth benchmark",
    )
    ap.add_argument("--cafe-run", action="store_true", help="also time the whole `cafe run` path")
    ap.add_argument("--lmms-eval", metavar="PYTHON", help="an interpreter with lmms-eval installed")
    args = ap.parse_args()

    from cafe.benchmarks.synth import ensure_generated

    folder = ensure_generated(args.items, 0)  # generated once, outside the timings
    clips = [json.loads(line)["audio_path"] for line in (folder / "synth.jsonl").open()]
    clips = _sines(args.sine) if args.sine else [str(folder / c) for c in clips]
    bound = args.concurrency / args.latency
    rows: list[tuple[str, float, float, int, int]] = []  # name, items/s, ms CPU, ok, n
    with _server(args) as (url, server_cpu):
        rows.append(("cafe adapter", *_adapter(url, clips, args)))
        if args.cafe_run:
            rows.append(("cafe run (marginal)", *_cafe_run(url, args)))
        if args.lmms_eval:
            rows.append(("lmms-eval", *_lmms_eval(url, clips, args)))
    what = f"{args.sine:g} s sine clips" if args.sine else "synth clips"
    print(f"api_concurrency: {args.items} items ({what}), concurrency {args.concurrency}, "
          f"{args.latency * 1000:.0f} ms server, bound {bound:.0f} items/s; "
          f"http transport {args.http_transport}")  # fmt: skip
    for name, rate, cpu_ms, ok, n in rows:
        print(f"  {name:<20} {rate:6.1f} items/s ({100 * rate / bound:5.1f}% of bound, target "
              f">= 90%)  CPU {cpu_ms:.2f} ms/item  {ok}/{n} ok")  # fmt: skip
    ref = {name: cpu for name, _, cpu, _, _ in rows}
    if "lmms-eval" in ref:
        for name in ("cafe adapter", "cafe run (marginal)"):
            if name in ref:
                print(f"  CPU per item, {name} / lmms-eval: {ref[name] / ref['lmms-eval']:.2f}")


def _sines(seconds: float) -> list[str]:
    import numpy as np

    from cafe.audio import write_wav

    tmp = Path(tempfile.mkdtemp())
    t = np.arange(int(16000 * seconds)) / 16000
    for i in range(8):
        write_wav(
            tmp / f"c{i}.wav", (0.3 * np.sin(2 * np.pi * (200 + 50 * i) * t)).astype(np.float32)
        )
    return [str(tmp / f"c{i}.wav") for i in range(8)]


def _requests(clips: list[str], n: int, offset: int = 0) -> list:
    from cafe.records import Request

    return [
        Request(
            sample_id=f"s{offset + i}",
            run_index=0,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "audio", "path": clips[i % len(clips)]},
                        {"type": "text", "text": f"Question {i}? (A) dog (B) cat"},
                    ],
                }
            ],  # fmt: skip
            audio=[clips[i % len(clips)]],
            generation={"max_new_tokens": 256, "temperature": 0.0},
            seed=i,
            prompt_style="lalm",
            template_hash="perf",
        )
        for i in range(n)
    ]


def _adapter(url: str, clips: list[str], args: argparse.Namespace) -> tuple[float, float, int, int]:
    from cafe.adapters import ADAPTERS, ModelCard

    card = ModelCard(name="perf", adapter="openai-compatible", checkpoint="perf-model")
    adapter = ADAPTERS.get("openai-compatible")(
        card, endpoint=url, concurrency=args.concurrency, http_transport=args.http_transport
    )
    adapter.generate(_requests(clips, args.concurrency, offset=10**6))  # warm: connections
    requests = _requests(clips, args.items)
    t0, cpu0 = time.perf_counter(), time.process_time()
    done = adapter.generate(requests)
    dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    adapter.close()
    ok = sum(c.error is None for c in done)
    return len(done) / dt, 1000 * cpu / len(done), ok, len(done)


def _cafe_run(url: str, args: argparse.Namespace) -> tuple[float, float, int, int]:
    """`cafe run`'s path in this process, no call cache, a fresh folder each time; the runner's
    own default of generate() calls in flight (what `cafe run` does), the client's slots set to
    --concurrency."""
    from cafe.runner.main import run_with

    def one(limit: int) -> tuple[float, float, int]:
        out = tempfile.mkdtemp()
        t0, cpu0 = time.perf_counter(), time.process_time()
        options = {"model": "perf-model", "endpoints": [url], "concurrency": args.concurrency,
                   "http_transport": args.http_transport}  # fmt: skip
        res = run_with("openai-compatible", "synth", version=f"n{args.items}-seed0", out=out,
                  judge="none", progress=False, cache=False, limit=limit,
                  options=options)  # fmt: skip
        assert res.new_predictions == limit and not res.most_failed
        return time.perf_counter() - t0, time.process_time() - cpu0, res.new_predictions

    one(args.concurrency)  # warm: imports, connections
    w1, c1, n1 = one(args.items // 3)
    w2, c2, n2 = one(args.items)
    extra = n2 - n1
    return extra / (w2 - w1), 1000 * (c2 - c1) / extra, n2, n2


def _lmms_eval(
    url: str, clips: list[str], args: argparse.Namespace
) -> tuple[float, float, int, int]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(clips, f)
    cmd = [args.lmms_eval, str(PERF / "lmms_eval_client.py"), url, f.name, str(args.items),
           str(args.concurrency)]  # fmt: skip
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONPATH": ""}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    os.unlink(f.name)
    if out.returncode != 0:
        sys.exit(f"lmms-eval client failed:\n{out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["n"] / r["wall_s"], 1000 * r["cpu_s"] / r["n"], r["ok"], r["n"]


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], float]]]:
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
