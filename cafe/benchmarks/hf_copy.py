"""Benchmarks from a local Hugging Face datasets copy: parquet files (a hub snapshot's
``data/*.parquet``) or a ``save_to_disk`` folder. Read offline; audio stored inside the rows is
written once to a cache folder so samples carry file paths like the official layout.

Rows use the official field names (id, question, choices, answer, …); the audio column may be an
``Audio`` feature ({bytes, path}), a path string, or missing (then the official audio field is
used as given, relative to the copy)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

AUDIO_COLUMNS = ("audio", "audio_file", "wav")


def _parquet_files(p: Path) -> list[Path]:
    if p.is_file():
        return [p] if p.suffix == ".parquet" else []
    return sorted(
        f for pattern in ("*.parquet", "*/*.parquet", "*/*/*.parquet") for f in p.glob(pattern)
    )


def _is_saved(p: Path) -> bool:
    return p.is_dir() and ((p / "dataset_dict.json").exists() or (p / "state.json").exists())


def is_hf_copy(data: str | Path) -> bool:
    """A parquet file, a save_to_disk folder, or a folder of parquet files without an official
    JSON/JSONL metadata file at its top level."""
    p = Path(data).expanduser()
    if not p.exists():
        return False
    if p.is_file():
        return p.suffix == ".parquet"
    if _is_saved(p):
        return True
    if any(p.glob("*.json")) or any(p.glob("*.jsonl")):
        return False
    return bool(_parquet_files(p))


def cache_root() -> Path:
    from cafe.cache import cache_file

    return cache_file("hf_audio")


def audio_dir(data: str | Path) -> Path:
    """Where the clips embedded in this copy are written (trusted: cafe wrote them)."""
    return cache_root() / _fingerprint(Path(data).expanduser())


def _rows_from_saved(p: Path) -> list[dict[str, Any]]:
    import datasets  # heavy: only for save_to_disk copies

    ds = datasets.load_from_disk(str(p))
    if isinstance(ds, datasets.DatasetDict):
        split = next((s for s in ("test", "test_mini", "train") if s in ds), next(iter(ds)))
        ds = ds[split]
    for name, feature in ds.features.items():
        if isinstance(feature, datasets.Audio):
            ds = ds.cast_column(name, datasets.Audio(decode=False))
    return list(ds)


def _rows_from_parquet(files: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # ships with datasets; reads without decoding audio

    rows: list[dict[str, Any]] = []
    for f in files:
        rows += pq.read_table(f).to_pylist()
    return rows


def _fingerprint(p: Path) -> str:
    files = _parquet_files(p) if not _is_saved(p) else sorted(p.rglob("*.arrow"))
    h = hashlib.sha256(str(p.resolve()).encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _safe(name: str) -> str:
    """A readable file name for an id, plus a hash of the exact id: ids that differ only in
    characters a file name cannot hold ("a/b", "a:b", "a b") never share a clip."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    readable = re.sub(r"[^\w.-]", "_", name)[:120] or "clip"
    return f"{readable}-{digest}"


def load_rows(data: str | Path, audio_field: str) -> tuple[list[Any], Path, str | None]:
    """(rows, folder audio paths are relative to, sha256 or None). Embedded audio is written to
    the cache and the row's ``audio_field`` set to that absolute path."""
    p = Path(data).expanduser()
    rows = _rows_from_saved(p) if _is_saved(p) else _rows_from_parquet(_parquet_files(p))
    base = p if p.is_dir() else p.parent
    out_dir = audio_dir(p)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            continue
        if isinstance(row.get("choices"), str) and row["choices"].lstrip().startswith("["):
            try:  # some copies store the list as a JSON string
                row["choices"] = json.loads(row["choices"])
            except json.JSONDecodeError:
                pass
        col = next((c for c in AUDIO_COLUMNS if c in row), None)
        if col is None:
            continue
        value = row.pop(col)
        if isinstance(value, dict) and value.get("bytes"):
            ext = Path(value.get("path") or "").suffix or ".wav"
            target = out_dir / f"{_safe(str(row.get('id', i)))}{ext}"
            if not target.exists():
                out_dir.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(target.suffix + ".tmp")
                tmp.write_bytes(value["bytes"])
                os.replace(tmp, target)
            row[audio_field] = str(target)
        elif isinstance(value, dict) and value.get("path"):
            row.setdefault(audio_field, value["path"])
        elif isinstance(value, str):
            row.setdefault(audio_field, value)
    return rows, base, None
