"""Odd, busy and dead model servers: what each costs a run (issue 30 item 3). Run it with
PYTHONPATH pointing at the code to measure (this tree, or an older one for a before figure).

    PYTHONPATH=. python perf/server_faults.py [--cases errors,backlog,refused,stall,gzip]

- ``errors``: N calls at concurrency 64 against a loopback answering after 200 ms, fault-free
  and with 10% of calls answered 500 (seeded): the seconds the 500s add, with the client's
  default backoff and with the former one (base_delay 1 s). Issue 30 measured lmms-eval and
  inspect-ai on the same load: +3.2 to +3.7 s (their own harnesses are not wired here).
- ``backlog``: 1000 calls at concurrency 64 against Python's http.server (listen backlog 5,
  one connection per request): how many finish, and whether the breaker stopped them.
- ``refused``: ``cafe run`` (20 items) against a port nothing listens on: seconds to stop.
- ``stall``: ``cafe run`` (20 items) against a gateway answering every path (its /tokenize too)
  with a chat completion: seconds to finish (stopped at 150 s).
- ``gzip``: one call whose reply is 1 MB of gzip inflating to 1 GB: seconds and peak memory
  (ru_maxrss) of the calling process.

Measured on 2 shared cores (before: the tree before issue 30's round three; after: this one):
errors +16.5 s (5.0x) -> +0.9 to +1.6 s (1.2-1.4x), beside lmms-eval / inspect-ai's +3.2 to
+3.7 s in the issue; backlog 1000 of 1000 in 8.1 s -> 2.6 s; refused 40.1 s -> 2.5-3.3 s;
stall past 150 s with 0 predictions -> 1.6-2.0 s with 20 (peak memory 74 MB either way);
gzip 19.5 s and 2,106 MB -> 0.5-1.6 s and 109 MB."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cafe.clients import make_client
from cafe.testing.loopback import OpenAILoopback

CHAT = {"choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip
MSGS = [{"role": "user", "content": "Which is first?"}]


async def _calls(url: str, n: int, **opts) -> tuple[float, int, str]:
    """Wall seconds, answered calls and the first error of n calls at concurrency 64."""
    c = make_client("openai-compatible", "m", [url], concurrency=64, **opts)
    t0 = time.perf_counter()
    out = await asyncio.gather(*(c.achat(MSGS) for _ in range(n)), return_exceptions=True)
    wall = time.perf_counter() - t0
    await c.aclose()
    ok = sum(1 for o in out if not isinstance(o, BaseException) and o.text is not None)
    errs = [str(o) if isinstance(o, BaseException) else o.error for o in out]
    return wall, ok, next((e for e in errs if e), "")[:160]


def errors(n: int) -> None:
    rng = random.Random(0)
    plan = [rng.random() < 0.1 for _ in range(20 * n)]
    backoffs = (("default backoff", {}), ("former backoff (base 1 s)", {"base_delay": 1.0}))
    for label, opts in backoffs:
        walls = []
        for faulty in (False, True):
            faults = (lambda i, b: "500" if plan[i] else None) if faulty else ()
            with OpenAILoopback(reply=lambda b: "A", latency_s=0.2, faults=faults) as srv:
                wall, ok, _ = asyncio.run(_calls(srv.url, n, **opts))
            walls.append(wall)
        added, ratio = walls[1] - walls[0], walls[1] / walls[0]
        print(f"errors  {label:27s}: {n} calls, fault-free {walls[0]:.1f} s, 10% 500s "
              f"{walls[1]:.1f} s: +{added:.1f} s ({ratio:.1f}x)")  # fmt: skip


class _Small(ThreadingHTTPServer):
    request_queue_size = 5  # http.server's own default listen backlog
    daemon_threads = True


class _Chat(BaseHTTPRequestHandler):
    def log_message(self, *a) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(CHAT).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def backlog(n: int) -> None:
    srv = _Small(("127.0.0.1", 0), _Chat)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    try:
        wall, ok, err = asyncio.run(_calls(url, n))
    finally:
        srv.shutdown()
    print(f"backlog http.server (backlog 5), {n} calls at 64: {ok} answered in {wall:.1f} s"
          + (f"; first error: {err}" if err else ""))  # fmt: skip


def _cafe_run(url: str, tmp: str, limit_s: float) -> tuple[float, int, int, str]:
    out = os.path.join(tmp, f"run{time.monotonic_ns()}")
    args = [sys.executable, "-c", "from cafe.cli import main; main()", "run", "--model",
            "openai-compatible", "-o", "model=m", "--endpoint", url, "--bench", "synth",
            "--version", "n20-seed0", "--out", out, "--judge", "none", "--no-progress"]  # fmt: skip
    env = {**os.environ, "CAFE_CACHE": os.path.join(tmp, "cache")}
    t0 = time.perf_counter()
    try:
        # cwd: elsewhere, so that PYTHONPATH (not this tree) decides which cafe runs
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=limit_s,
                           cwd=tmp)  # fmt: skip
        code, text = r.returncode, r.stderr
    except subprocess.TimeoutExpired as e:
        code, text = -1, (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else ""
    wall = time.perf_counter() - t0
    preds = os.path.join(out, "predictions.jsonl")
    done = sum(1 for _ in open(preds)) if os.path.exists(preds) else 0
    last = [x for x in text.splitlines() if x.startswith(("Error", "warning: model"))]
    return wall, code, done, (last[-1] if last else "")[:160]


def refused(tmp: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    wall, code, done, said = _cafe_run(url, tmp, 150)
    print(f"refused cafe run, 20 items, nothing listens: exit {code} after {wall:.1f} s: {said}")


class _Gateway(OpenAILoopback):
    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        if path.split("?")[0] == "/tokenize":
            path, raw = "/v1/chat/completions", json.dumps({"messages": MSGS}).encode()
        return super().route(method, path, headers, raw)


def stall(tmp: str) -> None:
    with _Gateway(reply=lambda b: "<answer>A</answer>") as srv:
        wall, code, done, said = _cafe_run(srv.url, tmp, 150)
    print(f"stall   cafe run, 20 items, catch-all gateway: exit {code} after {wall:.1f} s, "
          f"{done} predictions{'; ' + said if said else ''}")  # fmt: skip


def _bomb() -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    zeros = b"\0" * (1 << 20)
    return b"".join(z.compress(zeros) for _ in range(1024)) + z.flush()  # 1 GB inflated


class _Bomb(OpenAILoopback):
    body = b""

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        if path.split("?")[0] != "/v1/chat/completions":
            return super().route(method, path, headers, raw)
        return 200, {"Content-Encoding": "gzip"}, self.body


def gzip_bomb() -> None:
    _Bomb.body = _bomb()
    with _Bomb() as srv:
        code = (
            "import asyncio, resource, sys, time\n"
            f"sys.path.append({os.path.dirname(os.path.abspath(__file__))!r})\n"
            "from server_faults import _calls\n"
            f"wall, ok, err = asyncio.run(_calls({srv.url!r}, 1, max_attempts=1))\n"
            "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(f'{wall:.1f} s, peak {rss:.0f} MB; {err[:120]}')\n"
        )
        with tempfile.TemporaryDirectory() as elsewhere:  # PYTHONPATH decides which cafe runs
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               cwd=elsewhere)  # fmt: skip
    size = len(_Bomb.body) / 1e6
    print(f"gzip    one reply of {size:.1f} MB gzip -> 1 GB: "
          f"{(r.stdout.strip() or r.stderr.strip()[-200:])}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--cases", default="errors,backlog,refused,stall,gzip")
    ap.add_argument("--items", type=int, default=1000)
    args = ap.parse_args()
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "errors" in cases:
            errors(args.items)
        if "backlog" in cases:
            backlog(args.items)
        if "refused" in cases:
            refused(tmp)
        if "stall" in cases:
            stall(tmp)
        if "gzip" in cases:
            gzip_bomb()


if __name__ == "__main__":
    main()
