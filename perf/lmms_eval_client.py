"""lmms-eval's own OpenAI-compatible client on given clips, for perf/api_concurrency.py's side by
side figure: run by an interpreter that has lmms-eval (it needs none of cafe), e.g.

    python -m venv /tmp/lmms && /tmp/lmms/bin/pip install torch==2.13.0 lmms-eval
    /tmp/lmms/bin/python perf/lmms_eval_client.py URL CLIPS.json N CONCURRENCY

(``pip install --no-deps lmms-eval`` plus what its openai module imports is enough: openai,
accelerate, python-dotenv, loguru, pillow, tqdm, pytz, transformers, evaluate.)
Prints one JSON line: wall and CPU seconds of N calls after a warm-up batch, and how many
answered. Each item is what lmms-eval builds from a task's doc: the question and the clip's path
(which it reads and base64-encodes as is)."""

from __future__ import annotations

import json
import sys
import time


class _Request:
    def __init__(self, args: tuple) -> None:
        self.args = args


def main() -> None:
    url, clips_file, n, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    from lmms_eval.models.simple.openai import OpenAICompatible

    clips = json.load(open(clips_file))
    model = OpenAICompatible(
        model="perf-model", base_url=url, api_key="none", num_concurrent=concurrency
    )
    docs = [{"audio": clips[i % len(clips)]} for i in range(n)]
    model.task_dict = {"perf": {"test": docs}}
    gen = {"max_new_tokens": 256, "temperature": 0}

    def batch(ids: range) -> list:
        return [
            _Request(
                (f"Question {i}? (A) dog (B) cat", gen, lambda d: [d["audio"]], i, "perf", "test")
            )  # fmt: skip
            for i in ids
        ]

    model.generate_until(batch(range(min(concurrency, n))))  # warm: connections, imports
    t0, cpu0 = time.perf_counter(), time.process_time()
    out = model.generate_until(batch(range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ok = sum(not r.text.startswith("[LMMS_EVAL_REQUEST_FAILED") for r in out)
    print(json.dumps({"n": n, "ok": ok, "wall_s": wall, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
