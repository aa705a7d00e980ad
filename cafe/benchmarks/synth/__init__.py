"""The synthetic benchmark: generated multiple-choice questions about synthetic clips whose
ground-truth events are known exactly (see vocabulary.py for the sources, generator.py for the
questions). ``cafe bench synth`` writes it; ``SynthBenchmark.load()`` generates it into a cache
folder when no folder is given."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from cafe.benchmarks.base import Benchmark, LoadedBenchmark, by_meta
from cafe.benchmarks.synth.generator import (
    GENERATOR_VERSION,
    INFO_NAME,
    JSONL_NAME,
    generate,
)
from cafe.cli_options import group, option
from cafe.errors import CafeUsageError
from cafe.records import Event, Problem, Sample

DEFAULT_N = 200
DEFAULT_SEED = 0
_REQUIRED = ("id", "audio_path", "question", "choices", "answer")
_VERSION_RE = re.compile(r"^n(\d+)-seed(\d+)$")


def cache_root() -> Path:
    """$CAFE_CACHE/synth, default ~/.cache/cafe/synth."""
    from cafe.cache import cache_file

    return cache_file("synth")


def ensure_generated(n: int = DEFAULT_N, seed: int = DEFAULT_SEED, progress: bool = False) -> Path:
    """The cached folder for (n, seed, generator version), generated on first use. Generation
    goes to a temporary sibling renamed into place, so a killed run never leaves half a set."""
    folder = cache_root() / f"n{n}-seed{seed}-v{GENERATOR_VERSION}"
    if (folder / INFO_NAME).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        generate(tmp, n=n, seed=seed, progress=progress)
        try:
            tmp.rename(folder)
        except OSError:  # another process finished first: theirs is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


class SynthBenchmark(Benchmark):
    """``data``: a folder holding synth.jsonl (or the file itself); None generates the default
    set (200 items, seed 0) into the cache. ``version``: "n{N}-seed{S}" picks another generated
    set when ``data`` is None."""

    name = "synth"
    breakdowns = by_meta("dimension", "difficulty")
    default_judge = "rule"  # items carry their ground-truth events

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            n, seed = DEFAULT_N, DEFAULT_SEED
            if version:
                m = _VERSION_RE.match(version)
                if not m:
                    raise CafeUsageError(
                        f"synth version {version!r}: use n<N>-seed<S>, e.g. n200-seed0"
                    )
                n, seed = int(m.group(1)), int(m.group(2))
            data = str(ensure_generated(n, seed, progress=True))
        return load_folder(data, audio_root=self.audio_root)


def load_folder(data: str | Path, audio_root: str | Path | None = None) -> LoadedBenchmark:
    """Read synth.jsonl; every bad line becomes a Problem (file, sample id, field), not a crash.
    Audio paths stay inside the folder (or ``audio_root``, which they are then relative to)."""
    path = Path(data)
    if path.is_dir():
        path = path / JSONL_NAME
    if not path.exists():
        raise CafeUsageError(f"{path}: not found (write one with `cafe bench synth --out DIR`)")
    body = path.read_bytes()
    info_path = path.parent / INFO_NAME
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    gen = info.get("generator_version", "unknown")
    version = f"synth-v{gen}-n{info.get('n', '?')}-seed{info.get('seed', '?')}"
    samples: list[Sample] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for lineno, line in enumerate(body.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        sample, problem = _parse_line(path, lineno, line, version, seen, audio_root)
        if problem is not None:
            problems.append(problem)
        if sample is not None:
            samples.append(sample)
    return LoadedBenchmark(
        samples=samples,
        version=version,
        source=str(path),
        sha256=hashlib.sha256(body).hexdigest(),
        problems=problems,
    )


def _parse_line(
    path: Path, lineno: int, line: str, version: str, seen: set[str], audio_root: Any = None
) -> tuple[Sample | None, Problem | None]:
    file = str(path)
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        return None, Problem(file, f"line {lineno}: not valid JSON ({e.msg})")
    if not isinstance(rec, dict):
        return None, Problem(file, f"line {lineno}: expected a JSON object")
    sid = str(rec["id"]) if rec.get("id") is not None else None
    for key in _REQUIRED:
        if rec.get(key) is None:
            return None, Problem(file, f"line {lineno}: missing", sid, key)
    if sid in seen:
        return None, Problem(file, f"line {lineno}: duplicate id, later copy ignored", sid, "id")
    seen.add(sid)
    choices = rec["choices"]
    if not isinstance(choices, list) or len(choices) < 2:
        return None, Problem(file, "needs a list of at least 2 choices", sid, "choices")
    events = None
    try:
        if rec.get("events") is not None:
            events = [Event.from_dict(e) for e in rec["events"]]
    except (TypeError, AttributeError) as e:
        return None, Problem(file, f"malformed event ({e})", sid, "events")
    error = None
    problem = None
    from cafe.audio import contained_audio

    root = Path(audio_root).expanduser() if audio_root is not None else path.parent
    audio, outside = contained_audio(
        str(rec["audio_path"]), [root], file=file, sample_id=sid, field="audio_path"
    )
    if outside is not None:  # recorded as a failed item; its file is never opened
        problem, error = outside, str(outside)
    elif not str(rec["answer"]).strip():  # an empty answer: every output would count
        problem = Problem(file, "is empty", sid, "answer")
        error = str(problem)
    elif rec["answer"] not in choices:
        problem = Problem(file, f"answer {rec['answer']!r} is not among the choices", sid, "answer")
        error = str(problem)
    meta = {
        "dimension": rec.get("dimension") or rec.get("category"),
        "difficulty": rec.get("difficulty"),
        "modality": rec.get("modality", "sound"),
        "category": rec.get("category"),
        "duration": rec.get("duration"),
        "snr_db": rec.get("snr_db"),
    }
    sample = Sample(
        id=sid,
        bench="synth",
        version=version,
        question=rec["question"],
        choices=[str(c) for c in choices],
        answer=rec["answer"],
        audio=[str(audio)] if audio else [],
        meta=meta,
        caption=rec.get("caption"),
        events=events,
        error=error,
    )
    return sample, problem


@group("bench")
def bench_command() -> None:
    """Generate benchmarks (the synthetic one: `cafe bench synth --out DIR`)."""


@bench_command.command("synth")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write synth.jsonl, synth-info.json and audio/*.wav into.",
)
@option("--limit", "n", default=DEFAULT_N, show_default=True, help="Number of items.", old=("--n",))
@click.option("--seed", default=DEFAULT_SEED, show_default=True, help="Generator seed.")
def synth_command(out: str, n: int, seed: int) -> None:
    """Write N synthetic multiple-choice audio questions (counting, pitch, rhythm, temporal
    order, timbre; easy/medium/hard) with 16 kHz WAVs, captions and ground-truth events. The
    same seed always gives byte-identical files."""
    if n < 1:
        raise CafeUsageError("--limit must be at least 1")
    path = generate(out, n=n, seed=seed, progress=True)
    click.echo(f"wrote {n} items to {path}")


__all__ = ["SynthBenchmark", "bench_command", "ensure_generated", "load_folder"]
