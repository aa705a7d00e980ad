"""What the benchmarks cafe generates itself (synth, spoken) share: the folder they are written
into (<bench>.jsonl, <bench>-info.json, audio/<bench>-00000.wav ...) and the way a benchmark
class loads one, generating it into the cache when no folder is given."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from cafe.benchmarks.base import Benchmark, LoadedBenchmark
from cafe.errors import CafeError

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


_TMP_MARK = ".tmp-"
_TMP_RE = re.compile(r"^\..+\.tmp-(\d+)-[^/]+$")


def sweep_stale_temps(root: Path, prefix: str = "") -> list[Path]:
    """Remove the temporary folders (named ``prefix``...) of generations whose process is gone
    (killed: SIGKILL runs no cleanup); a live process's folder is left alone. Returns what was
    removed."""
    removed = []
    for p in root.iterdir() if root.is_dir() else []:
        m = _TMP_RE.match(p.name) if p.name.startswith(prefix) else None
        if not m or not p.is_dir() or p.is_symlink() or _alive(int(m.group(1))):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:  # no process has such a number
        return False
    return True


class SetFolderError(CafeError):
    """A folder a generator will not write a set into: a link, or someone else's files."""


def _written_here(out: Path, bench: str) -> set[str] | None:
    """The files of the set an earlier ``write_set`` wrote into ``out`` (relative paths), known
    by its <bench>-info.json: a regular file whose sha256 is <bench>.jsonl's and whose ``n``
    counts the clips; None where ``out`` holds no such set."""
    jsonl, info = out / jsonl_name(bench), out / info_name(bench)
    if any(p.is_symlink() or not p.is_file() for p in (jsonl, info)):
        return None
    try:
        meta = json.loads(info.read_text())
        body = jsonl.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != hashlib.sha256(body).hexdigest():
        return None
    n = meta.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return None
    return {jsonl.name, info.name, *(f"{AUDIO_DIR}/{bench}-{i:05d}.wav" for i in range(n))}


def _same_set(out: Path, bench: str, info: dict[str, Any]) -> bool:
    """Whether ``out`` holds, whole, the set whose <bench>-info.json is ``info``."""
    files = _written_here(out, bench)
    if files is None or not all((out / f).is_file() for f in files):
        return False
    try:
        return json.loads((out / info_name(bench)).read_text()) == info
    except (OSError, ValueError):
        return False


def _check_owned(out: Path, bench: str) -> None:
    """SetFolderError unless ``out`` is new, empty, or holds only a set written here: a
    generator replaces only its own set, never writes through a link, never deletes the user's
    own files (their ``<bench>-*.wav`` too)."""
    if out.is_symlink():
        raise SetFolderError(f"{out}: is a link; give --out a real folder (a set is never "
                             "written through a link)")  # fmt: skip
    if not out.exists():
        return
    if not out.is_dir():
        raise SetFolderError(f"{out}: is not a folder")
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    mine = _written_here(out, bench)
    if mine is None:
        raise SetFolderError(
            f"{out}: holds files cafe did not write ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}); give --out a new or empty folder (or one an "
            f"earlier `cafe bench {bench}` wrote)"
        )
    audio = out / AUDIO_DIR
    foreign = [n for n in names if n not in mine and n != AUDIO_DIR]
    if audio.is_symlink() or (audio.exists() and not audio.is_dir()):
        foreign.append(AUDIO_DIR)
    elif audio.is_dir():
        for p in sorted(audio.iterdir()):
            rel = f"{AUDIO_DIR}/{p.name}"
            if rel not in mine or p.is_symlink() or not p.is_file():
                foreign.append(rel)
    if foreign:
        raise SetFolderError(
            f"{out}: holds {', '.join(foreign[:3])}, which the set cafe wrote there does not "
            "list (a link or the user's own file): move it, or give --out another folder"
        )


def write_set(
    out: Path,
    bench: str,
    n: int,
    write_item: Callable[[int, Path], dict],
    info: dict[str, Any],
    progress: bool = False,
) -> Path:
    """Write items 0..n-1 into ``out`` as one transaction: ``write_item(i, wav)`` writes item
    i's clip to ``wav`` and returns its record (one <bench>.jsonl line); <bench>-info.json is
    ``info`` plus the jsonl's sha256 (and ``n``: what the set holds). The set is built in a
    temporary sibling folder and renamed into place, so a killed run leaves the old set whole;
    ``out`` must be new, empty, or a set written here before (SetFolderError otherwise)."""
    import os
    import shutil
    import tempfile

    out = Path(out)
    _check_owned(out, bench)  # refused before any clip is made
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(out.parent, f".{out.name}{_TMP_MARK}")  # a killed earlier write's
    # named so that sweep_stale_temps knows a killed process's folder
    prefix = f".{out.name}{_TMP_MARK}{os.getpid()}-"
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=out.parent))
    tmp.chmod(0o755)  # a folder as mkdir makes it, not mkdtemp's private one
    try:
        audio = tmp / AUDIO_DIR
        audio.mkdir()
        lines = []
        indices = range(n)
        if progress:
            from tqdm import tqdm

            indices = tqdm(indices, desc=bench, unit="item")
        for i in indices:
            record = write_item(i, audio / f"{bench}-{i:05d}.wav")
            lines.append(json.dumps(record, ensure_ascii=False))
        body = ("\n".join(lines) + "\n").encode()
        (tmp / jsonl_name(bench)).write_bytes(body)
        info = {**info, "n": n, "sha256": hashlib.sha256(body).hexdigest()}
        (tmp / info_name(bench)).write_text(json.dumps(info, indent=2) + "\n")
        if _same_set(out, bench, info):
            shutil.rmtree(tmp)  # the same set is there already (another process wrote it)
        elif out.exists():  # the earlier set (or an empty folder) steps aside, then goes
            trash = Path(tempfile.mkdtemp(prefix=prefix, suffix="-old", dir=out.parent))
            out.rename(trash / out.name)
            tmp.rename(out)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            try:
                tmp.rename(out)
            except OSError:  # another process renamed its set there first
                if not _same_set(out, bench, info):
                    raise
                shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
            data = str(self.ensure_generated(n, seed, progress=self.progress))
        return self.load_folder(data, audio_root=self.audio_root)
