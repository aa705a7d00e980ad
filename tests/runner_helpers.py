"""A tiny benchmark and a listening adapter for runner tests, plus a temporary installed
distribution that registers them through entry points (so subprocesses find them the way they
would find any third-party adapter).

The "tone" benchmark: each clip is a sine tone, high (880 Hz) or low (220 Hz); the question asks
which. ToneAdapter really listens (zero crossings of the decoded waveform), so answers depend on
the audio, and writes MPAR²-format output."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard
from cafe.audio import load_audio, write_wav
from cafe.benchmarks.base import BENCHMARKS, Benchmark, LoadedBenchmark
from cafe.records import Completion, Problem, Request, Sample

HIGH, LOW = "high tone", "low tone"
CHOICES = [HIGH, LOW]


class ToneBench(Benchmark):
    """JSONL at --data: {"id", "question", "choices", "answer", "audio" (relative), "dimension"}."""

    name = "tone"
    breakdowns = {"dimension": lambda s: s.meta.get("dimension")}

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        path = Path(data or os.environ["TONE_DATA"])
        samples, problems = [], []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                problems.append(Problem(str(path), f"line {i}: not valid JSON"))
                continue
            sid = str(row.get("id", f"line{i}"))
            error = None
            meta = row.get("dimension")
            if not isinstance(meta, str):
                p = Problem(str(path), "must be a string", sid, "dimension")
                problems.append(p)
                error = str(p)
            samples.append(
                Sample(
                    id=sid,
                    bench="tone",
                    version=version or "v1",
                    question=row.get("question"),
                    choices=row.get("choices"),
                    answer=row.get("answer"),
                    audio=[str(path.parent / row["audio"])],
                    meta={"dimension": meta},
                    error=error,
                )
            )
        return LoadedBenchmark(samples, version or "v1", str(path), "sha-" + path.name, problems)


def tone_label(path: str) -> str:
    x = load_audio(path)
    crossings = np.count_nonzero(np.diff(np.signbit(x))) / (len(x) / 16000) / 2
    return HIGH if crossings > 500 else LOW


class ToneAdapter(Adapter):
    """Listens for the pitch of a tone. Options: delay (s per request), log (file that gets one
    line per generate() call), construct_log (one line per construction), bug_file (while it
    exists, a batch holding a sample id it lists raises, as an adapter bug would).
    ``$TONE_STALL_AFTER=N`` (not an option: options are the run's identity): after N requests
    the process stalls, so a test that kills it mid-run never finds it already finished."""

    default_batch_size = 2
    prompt_style = "mpar2"
    answered = 0  # requests this process answered (for $TONE_STALL_AFTER)

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        if self.options.get("construct_log"):
            with open(self.options["construct_log"], "a") as f:
                f.write("constructed\n")

    def generate(self, requests: list[Request]) -> list[Completion]:
        if self.options.get("log"):
            with open(self.options["log"], "a") as f:
                f.write(f"{len(requests)}\n")
        out = []
        for r in requests:
            bug = Path(self.options.get("bug_file") or "/nonexistent")
            if bug.exists() and r.sample_id in bug.read_text().split():  # an adapter bug
                raise KeyError(f"adapter bug on {r.sample_id}")
            time.sleep(float(self.options.get("delay", 0)))
            ToneAdapter.answered += 1
            if ToneAdapter.answered > int(os.environ.get("TONE_STALL_AFTER") or 1 << 62):
                time.sleep(300)  # stalled: the test kills it long before
            if "fail" in r.sample_id:
                out.append(Completion(r.sample_id, r.run_index, None, error="backend exploded"))
                continue
            label = tone_label(r.audio[0])
            text = (
                "<thinking><perception>1. [0.00, 0.50]: a steady "
                f"{label}</perception><reasoning>1. Sub-question: is the pitch high? Answer: "
                f"{'yes' if label == HIGH else 'no'}</reasoning><review>1. Evidence check: the "
                "tone is steady. 2. Logic check: consistent.</review></thinking>"
                f"<answer>{label}</answer>"
            )
            out.append(Completion(r.sample_id, r.run_index, text, latency_s=0.001))
        return out


def register() -> None:
    if "tone" not in ADAPTERS.names():
        ADAPTERS.add("tone", ToneAdapter)
    if "tone" not in BENCHMARKS.names():
        BENCHMARKS.add("tone", ToneBench)


def write_tone_bench(root: Path, labels: list[str], dims: list[str] | None = None) -> Path:
    """Clips and a metadata file; labels[i] is item i's true answer."""
    root.mkdir(parents=True, exist_ok=True)
    t = np.arange(8000) / 16000
    rows = []
    for i, label in enumerate(labels):
        f = 880 if label == HIGH else 220
        write_wav(root / f"t{i}.wav", 0.5 * np.sin(2 * np.pi * f * t))
        dim = (dims or ["pitch"] * len(labels))[i]
        rows.append(
            {
                "id": f"t{i}",
                "question": "Is the tone high or low?",
                "choices": CHOICES,
                "answer": label,
                "audio": f"t{i}.wav",
                "dimension": dim,
            }
        )
    meta = root / "meta.jsonl"
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return meta


def write_dist(site: Path, name: str = "cafe_tone_plugin", with_helpers: bool = True) -> Path:
    """An installed distribution in ``site`` (put it on sys.path / PYTHONPATH): a package with a
    short Adapter subclass and a .dist-info whose entry_points.txt declares it under
    ``cafe.adapters`` (and, for runner tests, the tone benchmark under ``cafe.benchmarks``)."""
    pkg = site / name
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            from cafe.adapters.base import Adapter
            from cafe.records import Completion


            class EchoFirst(Adapter):
                \"\"\"Always answers the first choice.\"\"\"

                def generate(self, requests):
                    return [
                        Completion(r.sample_id, r.run_index, "<answer>high tone</answer>")
                        for r in requests
                    ]
            """
        )
    )
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    eps = f"[cafe.adapters]\necho-first = {name}:EchoFirst\n"
    if with_helpers:
        eps += "tone = runner_helpers:ToneAdapter\n"
        eps += "[cafe.benchmarks]\ntone = runner_helpers:ToneBench\n"
    (info / "entry_points.txt").write_text(eps)
    return site


def subprocess_env(site: Path, cache_dir: Path) -> dict[str, str]:
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo), str(Path(__file__).parent), str(site)])
    env["CAFE_CACHE"] = str(cache_dir)
    return env


CLI = [sys.executable, "-m", "cafe.cli"]


# a module-level declaration, the way transformers adapter modules declare theirs
MODEL_TYPES = {"tone_model": "tone-card", "tone_bare": "tone"}


def stop_a_notebook_cell(cell: Any, ready: Any, inherited: Any) -> None:
    """Run coroutine ``cell`` on a plain event loop, as a notebook does (no asyncio SIGINT
    handler), in a process whose SIGINT disposition is ``inherited`` (SIG_IGN: a background
    job's); press the stop button (SIGINT to the main thread) once ``ready`` is set, and
    expect the KeyboardInterrupt in the cell's thread."""
    import asyncio
    import signal
    import threading

    import pytest

    def stop_button() -> None:
        assert ready.wait(120)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    old = signal.signal(signal.SIGINT, inherited)
    threading.Thread(target=stop_button, daemon=True).start()
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell)
    finally:
        loop.close()
        signal.signal(signal.SIGINT, old)
