"""What the benchmarks cafe generates itself (synth, spoken) share: the folder they are written
into (<bench>.jsonl, <bench>-info.json, audio/<bench>-00000.wav ...) and the way a benchmark
class loads one, generating it into the cache when no folder is given."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from cafe.benchmarks.base import Benchmark, LoadedBenchmark

AUDIO_DIR = "audio"


def jsonl_name(bench: str) -> str:
    return f"{bench}.jsonl"


def info_name(bench: str) -> str:
    return f"{bench}-info.json"


def record_head(item: Any, modality: str, difficulty: str) -> dict[str, Any]:
    """The MMAR-like keys that open every generated item's jsonl line, in their order, from an
    item with id, question, choices, answer, dimension and duration."""
    return {
        "id": item.id,
        "audio_path": f"{AUDIO_DIR}/{item.id}.wav",
        "question": item.question,
        "choices": item.choices,
        "answer": item.answer,
        "modality": modality,
        "category": item.dimension,
        "dimension": item.dimension,
        "difficulty": difficulty,
        "duration": item.duration,
    }


def write_set(
    out: Path,
    bench: str,
    n: int,
    write_item: Callable[[int, Path], dict],
    info: dict[str, Any],
    progress: bool = False,
) -> Path:
    """Write items 0..n-1 into ``out``: ``write_item(i, wav)`` writes item i's clip to ``wav``
    and returns its record (one <bench>.jsonl line); <bench>-info.json is ``info`` plus the
    jsonl's sha256. Clips of an earlier, larger set in the folder are removed."""
    audio = out / AUDIO_DIR
    audio.mkdir(parents=True, exist_ok=True)
    lines = []
    indices = range(n)
    if progress:
        from tqdm import tqdm

        indices = tqdm(indices, desc=bench, unit="item")
    for i in indices:
        record = write_item(i, audio / f"{bench}-{i:05d}.wav")
        lines.append(json.dumps(record, ensure_ascii=False))
    keep = {f"{bench}-{i:05d}.wav" for i in range(n)}
    for stale in audio.glob(f"{bench}-*.wav"):  # from an earlier, larger set
        if stale.name not in keep:
            stale.unlink()
    body = ("\n".join(lines) + "\n").encode()
    (out / jsonl_name(bench)).write_bytes(body)
    info = {**info, "sha256": hashlib.sha256(body).hexdigest()}
    (out / info_name(bench)).write_text(json.dumps(info, indent=2) + "\n")
    return out / jsonl_name(bench)


class GeneratedBenchmark(Benchmark):
    """A benchmark cafe writes itself. ``data``: a folder holding <name>.jsonl (or the file
    itself); None generates the set that ``version`` "n<N>-seed<S>" names (default_n items,
    default_seed when None) into the cache, through the subclass's ``ensure_generated`` and
    reads it with its ``load_folder``."""

    version_items = {"n<N>-seed<S>": None}  # any N and seed, generated on first use
    official_rule = "the MMAU / MMAR string match (cafe's own benchmark: no official script)"
    default_n: ClassVar[int]
    default_seed: ClassVar[int] = 0
    #: (n, seed, progress) -> the cached folder
    ensure_generated: ClassVar[Callable[..., Path]]
    #: (data, audio_root) -> the loaded folder
    load_folder: ClassVar[Callable[..., LoadedBenchmark]]

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            from cafe.benchmarks.set_version import parse_version

            n, seed = parse_version(self.name, version, self.default_n, self.default_seed)
            data = str(self.ensure_generated(n, seed, progress=True))
        return self.load_folder(data, audio_root=self.audio_root)
