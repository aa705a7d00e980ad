"""Run folders: manifest.json, append-only JSONL record files, metrics.json, report/.

A process can be SIGKILLed mid-write, so a JSONL file may end in a torn line. Readers skip a torn
final line and writers cut it off before appending, so nothing is lost (the torn record was never
acknowledged) and nothing is duplicated (callers dedupe by (sample_id, run_index)).

Every whole-file write is a transaction (``replace_file``): a uniquely named temporary file in
the same folder, fsynced, renamed over the target, then the folder fsynced; a reader sees the
old file or the new one, never half of one, and two writers never share a temporary name.
Read-modify-writes (metrics sections, the manifest's costs) run under the folder's writer lock
(cafe.locking), so concurrent sections all survive."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cafe.errors import ConfigError, RunFolderError
from cafe.jsontext import bad_text, bad_text_in_line, loads_line, strict_dumps
from cafe.locking import LOCK_NAME, folder_lock
from cafe.records import Judgement, Prediction, Record, Sample
from cafe.safe_files import open_no_follow, replace_file

if TYPE_CHECKING:
    from cafe.folder.sections import Section

R = TypeVar("R", bound=Record)
S = TypeVar("S", bound="Section")

MANIFEST = "manifest.json"
PREDICTIONS = "predictions.jsonl"
JUDGEMENTS = "judgements.jsonl"
METRICS = "metrics.json"
SAMPLES = "samples.jsonl"  # the items that ran, so judge and reports never need the originals
REPORT_DIR = "report"
RUN_LOG = "run.log"  # adapter tracebacks, each distinct one once (cafe.failures)
BATCH_DIR = "batches"  # batch-transport state of the judging commands (cafe.judge.batching)
CONTROL_CAPTIONS = "control_captions.json"  # a control run's, for its judge (written first)
#: each judge's own records: <prefix>.<judge slug>.jsonl, its spec beside it (cafe.judge.spec)
JUDGE_RECORDS = {"cafe": "judgements", "rubric": "rubric", "cues": "cues.judgements"}
MANIFEST_RECOVERY = (
    "restore it from a backup, or delete it and run the same `cafe run` command on {root} "
    "again (it writes a new manifest; predictions the call cache holds cost nothing)"
)
METRICS_RECOVERY = (
    "delete it: the same `cafe run` command writes accuracy again (no model call), "
    "`cafe judge` the CAFE sections"
)


#: input digests by the file's content hash: a section written right after another reuses them
_DIGESTS: dict[str, dict[str, Any]] = {}


#: prediction fields no section reads (timing; the run spec's fields, the same in one folder)
#: a record's share of the counters ("call") says how it was got (a call, a cache replay), not
#: what a metric reads of it: an interrupted run's replayed record stamps like the original
_NOT_DIGESTED = frozenset({"latency_s", "model", "prompt_style", "template_hash", "seed", "call"})


def judge_slug(identity: str) -> str:
    """File-name form of a judge identity: judgements.<slug>.jsonl; credentials a URL in it
    carries (``//user:password@``) never reach a name."""
    bare = re.sub(r"//[^/@\s]*@", "//", identity)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", bare).strip("-")


def judge_records_name(kind: str, identity: str) -> str:
    """The file name of a judge's own records (RunStore.judge_records)."""
    return f"{JUDGE_RECORDS[kind]}.{judge_slug(identity)}.jsonl"


#: the temporary files ``replace_file`` writes beside their target
TEMPORARY = re.compile(r"\..+\.tmp")


def remove_stale_temporaries(root: Path, folders: tuple[str, ...] = ("", "report")) -> int:
    """Remove the temporary files a killed writer left in run folder ``root`` (and its
    ``folders``) -> how many. Call it holding the folder's writer lock: no other writer can be
    filling one then. A link is removed as a link, never followed."""
    removed = 0
    for sub in folders:
        try:
            names = os.listdir(root / sub)
        except OSError:
            continue
        for name in names:
            if TEMPORARY.fullmatch(name):
                try:
                    os.unlink(root / sub / name)
                    removed += 1
                except (IsADirectoryError, PermissionError, FileNotFoundError):
                    continue
    return removed


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON as one transaction (``replace_file``); the text is scrubbed of secrets first."""
    from cafe.redaction import scrub_text

    text = strict_dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    replace_file(path, lambda f: f.write(scrub_text(text)))


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file at ``path`` (a link to one is followed); a FIFO, a device
    or a folder there is a ConfigError in one line naming it, not a read that waits forever for
    a writer. FileNotFoundError and IsADirectoryError as open raises them."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # as reading a folder fails anywhere else
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise ConfigError(
                f"{path} is not a regular file (a pipe, device or folder stands there); "
                "cafe reads its records only from a regular file: remove it, or restore the file"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def read_json_file(path: Path, recover: str) -> Any:
    """A whole JSON file; a damaged one is a RunFolderError in one line naming the file and
    ``recover`` (how to get it back), never a traceback."""
    try:
        value = loads_line(read_regular(path).decode("utf-8"))
    except ConfigError as e:
        raise RunFolderError(f"{e}; {recover}") from None
    except (ValueError, UnicodeDecodeError) as e:
        why = e.msg if isinstance(e, json.JSONDecodeError) else type(e).__name__
        why = str(e) if _too_deep(e) and not isinstance(e, UnicodeError) else why
        raise RunFolderError(f"{path} is damaged (not valid JSON: {why}); {recover}") from None
    found = bad_text(value)
    if found is not None:
        field = f"field {found[0]} " if found[0] else ""
        raise RunFolderError(f"{path} is damaged ({field}{found[1]}); {recover}")
    return value


def _repair_tail(path: Path) -> None:
    """Cut a torn (newline-less) last line so the next append starts on a fresh line."""
    if not os.path.lexists(path):
        return
    fd = open_no_follow(path, os.O_RDWR)
    with os.fdopen(fd, "rb+") as f:
        if os.fstat(fd).st_size == 0:
            return
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        cut = data.rfind(b"\n") + 1
        f.truncate(cut)


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield JSON objects; a torn or undecodable last line is skipped (crash residue)."""
    for _, d in numbered_jsonl(path):
        yield d


def numbered_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each line; a torn or undecodable last line is skipped
    (crash residue), one in the middle is a ConfigError naming the file and line."""
    if not path.exists():
        return
    try:
        lines = read_regular(path).split(b"\n")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror}); {_DAMAGED}") from None
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            value = loads_line(raw)
        except (ValueError, UnicodeDecodeError) as e:
            if i >= len(lines) - 2 and not _too_deep(e):  # the final line: crash residue
                return
            why = str(e) if _too_deep(e) else "not valid JSON"
            raise ConfigError(f"{path}: line {i + 1}: {why}; {_BAD_LINE}") from None
        found = bad_text_in_line(raw, value)
        if found is not None:
            field = f"field {found[0]}: " if found[0] else ""
            raise ConfigError(f"{path}: line {i + 1}: {field}{found[1]}; {_BAD_LINE}")
        yield i + 1, value


def _too_deep(e: Exception) -> bool:
    return not isinstance(e, (json.JSONDecodeError, UnicodeDecodeError))


#: what to do about a damaged file or line of a run folder (the one-line errors below)
_DAMAGED = "restore it from a copy, or run into a fresh --out folder"
_BAD_LINE = "fix or delete that line (`cafe run` redoes a deleted item)"


def read_records(path: Path, cls: type[R]) -> Iterator[R]:
    """Records of a JSONL file in file order; a line that is not a valid record (not an
    object, a field missing or of the wrong type) is a ConfigError naming file, line and field."""
    from cafe.records import RecordError

    for n, d in numbered_jsonl(path):
        try:
            yield cls.from_dict(d)
        except RecordError as e:
            sid = d.get("sample_id", d.get("id")) if isinstance(d, dict) else None
            item = f"sample {sid}: " if isinstance(sid, str) else ""
            raise ConfigError(f"{path}: line {n}: {item}{e}; {_BAD_LINE}") from None


def latest_records(path: Path, cls: type[R]) -> list[R]:
    """Records of a JSONL file of (sample_id, run_index) records, the last write winning: how
    every per-item file of a run folder is read (predictions, judgements.<judge>, rubric…)."""
    by_key: dict[tuple[str, int], R] = {}
    for rec in read_records(path, cls):
        by_key[(rec.sample_id, rec.run_index)] = rec  # type: ignore[attr-defined]
    return list(by_key.values())


def rewrite_jsonl(path: Path, records: Iterable[Record]) -> None:
    """Replace a JSONL file by ``records`` atomically (compaction: one line per item); lines
    are scrubbed of secrets like every other write."""
    from cafe.redaction import scrub_text, secret_values

    secrets = secret_values()

    def write(f: Any) -> None:
        for r in records:
            f.write(scrub_text(r.to_json(), secrets) + "\n")

    replace_file(path, write)


class JsonlWriter:
    """Append records and make them durable in batches (one write + fsync per write_many). The
    file is written through its descriptor, unbuffered: a write that fails part way (a full
    disk) is cut back off, and nothing of it is left in a buffer to land later."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair_tail(path)
        self._fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    @property
    def size(self) -> int:
        """The file's length: where the next write_many begins."""
        return os.fstat(self._fd).st_size

    def write_many(self, records: Iterable[Record | dict[str, Any]]) -> None:
        from cafe.redaction import scrub_text, secret_values

        secrets = secret_values()
        lines = []
        for r in records:
            d = r.to_dict() if isinstance(r, Record) else r
            lines.append(scrub_text(strict_dumps(d, ensure_ascii=False), secrets) + "\n")
        if not lines:
            return
        data = memoryview("".join(lines).encode("utf-8"))
        start = self.size
        try:
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
        except BaseException:
            self.truncate(start)
            raise

    def truncate(self, size: int) -> None:
        """Take back what was appended after ``size`` (a batch whose record could not be
        written); best effort: a failure here leaves the lines, which the next open counts."""
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError:
            pass

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: what a run folder may hold before its manifest is written (a run stopped at its start)
_OWN_NAMES = {MANIFEST, PREDICTIONS, METRICS, SAMPLES, REPORT_DIR, RUN_LOG, BATCH_DIR, LOCK_NAME,
              CONTROL_CAPTIONS}  # fmt: skip
_OWN_PATTERN = re.compile(
    r"(judgements|rubric|cues\.judgements)(\..+)?\.(jsonl|spec\.json)|\..+\.tmp"
)


def foreign_entries(root: Path) -> list[str]:
    """Names in ``root`` that no cafe command writes, sorted (none for a new or empty folder)."""
    try:
        names = os.listdir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if n not in _OWN_NAMES and not _OWN_PATTERN.fullmatch(n))


def records_after(path: Path, offset: int, cls: type[R]) -> tuple[list[R], int]:
    """The records on whole lines of ``path`` from byte ``offset`` on, and the offset just
    past the last whole line (a torn final line is crash residue; a line that is not a record,
    left by a hand edit, is skipped: the readers name it)."""
    from cafe.records import RecordError

    try:
        data = read_regular(path)[offset:]
    except (OSError, ConfigError):  # the readers name what stands there
        return [], offset
    whole = data[: data.rfind(b"\n") + 1]
    out = []
    for raw in whole.split(b"\n"):
        if not raw.strip():
            continue
        try:
            out.append(cls.from_dict(json.loads(raw)))
        except (ValueError, UnicodeDecodeError, RecordError):
            continue
    return out, offset + len(whole)


class RunStore:
    """One run folder. All paths hang off here so no other module spells a file name."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def create(self) -> RunStore:
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def report_dir(self) -> Path:
        return self.root / REPORT_DIR

    def path(self, name: str) -> Path:
        return self.root / name

    def judge_records(self, kind: str, identity: str) -> Path:
        """A judge's own records file: ``kind`` "cafe" (judgements.<slug>.jsonl), "rubric" or
        "cues" (JUDGE_RECORDS)."""
        return self.path(judge_records_name(kind, identity))

    # manifest / metrics -------------------------------------------------------------------
    def has_manifest(self) -> bool:
        return self.path(MANIFEST).exists()

    def read_manifest(self) -> dict[str, Any]:
        p = self.path(MANIFEST)
        if not p.exists():
            raise RunFolderError(f"{self.root}: not a run folder (no {MANIFEST})")
        data = read_json_file(p, MANIFEST_RECOVERY.format(root=self.root))
        if not isinstance(data, dict):
            raise RunFolderError(
                f"{p} is damaged (not a JSON object); {MANIFEST_RECOVERY.format(root=self.root)}"
            )
        return data

    def lock(self, command: str | None = None) -> Any:
        """The folder's writer lock (cafe.locking): hold it to plan from the folder and write."""
        return folder_lock(self.root, command)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        from cafe.redaction import scrub

        write_json_atomic(self.path(MANIFEST), scrub(manifest))

    def read_metrics(self) -> dict[str, Any]:
        """metrics.json as plain JSON (every section, typed or not)."""
        p = self.path(METRICS)
        if not p.exists():
            return {}
        data = read_json_file(p, METRICS_RECOVERY)
        if not isinstance(data, dict):
            raise RunFolderError(f"{p} is damaged (not a JSON object); {METRICS_RECOVERY}")
        return data

    def read_section(self, cls: type[S]) -> S | None:
        """One typed section (None when absent); a section from a newer cafe, or missing its
        fields, is a SectionError naming the folder."""
        data = self.read_metrics().get(cls.NAME)
        if not data:
            return None
        return cls.from_dict(data, where=str(self.path(METRICS)))

    def write_section(self, section: Section) -> dict[str, Any]:
        return self.update_metrics(section.NAME, section.to_dict())

    def update_metrics(self, section: str, value: Any) -> dict[str, Any]:
        """metrics.json maps sections (accuracy, cafe, decay…) to values; one stage owns each.
        A typed section (cafe.folder.sections) is checked against its type and stamped with
        its version."""
        from cafe.folder import sections as registry
        from cafe.folder.sections import SECTIONS

        if section in SECTIONS and isinstance(value, dict):
            cls = SECTIONS[section]
            cls.from_dict(value, where=str(self.path(METRICS)))  # raises if it is not one
            value["version"] = cls.VERSION  # stamped in place: the caller's copy says it too
        with self.lock():  # read-modify-write: another writer's section is never lost
            metrics = self.read_metrics()
            if isinstance(value, dict):  # what it was computed from (cafe.folder.sections)
                value[registry.STAMP] = registry.stamp(section, metrics, self.input_digest)
            metrics[section] = value
            write_json_atomic(self.path(METRICS), metrics)
        return metrics

    def input_digest(self, name: str) -> dict[str, Any]:
        """The stamp of a record input ("predictions", "judgements"): how many (item, run)
        records and a digest of what a metric reads of them (not a prediction's latency: a
        replay from the cache is the same prediction; nor the run's identity fields, which one
        folder never mixes)."""
        path = self.path({"predictions": PREDICTIONS, "judgements": JUDGEMENTS}[name])
        try:
            raw = read_regular(path)
        except FileNotFoundError:
            return {"records": 0, "digest": None}
        except (OSError, ConfigError):  # not a file of records: no stamp can match it
            return {"records": None, "digest": "unreadable"}
        key = hashlib.sha256(raw).hexdigest()  # the bytes' hash: parsing is the costly part
        if key not in _DIGESTS:
            from cafe.folder.sections import digest

            cls = Prediction if name == "predictions" else Judgement
            try:
                recs = sorted(latest_records(path, cls), key=lambda r: (r.sample_id, r.run_index))
            except ConfigError:
                return {"records": None, "digest": "unreadable"}
            rows = [{k: v for k, v in r.to_dict().items() if k not in _NOT_DIGESTED} for r in recs]
            if len(_DIGESTS) > 8:
                _DIGESTS.clear()
            _DIGESTS[key] = digest(rows)
        return _DIGESTS[key]

    def invalidate(self, changed: Iterable[str] = ()) -> dict[str, str]:
        """Remove every section that no longer describes the folder's records (its stamped
        inputs differ from the folder's now; an unstamped one derived from ``changed``) ->
        {section: why}. Called whenever predictions or judgements are written."""
        from cafe.folder.sections import stale

        with self.lock():
            metrics = self.read_metrics()
            gone = stale(metrics, self.input_digest, changed)
            if gone:
                write_json_atomic(
                    self.path(METRICS), {k: v for k, v in metrics.items() if k not in gone}
                )
        return gone

    def update_manifest(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read the manifest, apply ``change`` to it in place and write it back, under the lock
        (for a command that adds to a manifest another command may be writing)."""
        with self.lock():
            manifest = self.read_manifest()
            change(manifest)
            self.write_manifest(manifest)
        return manifest

    # records ------------------------------------------------------------------------------
    def read_records(self, name: str, cls: type[R]) -> list[R]:
        """Records of a JSONL file, last write wins per (sample_id, run_index)."""
        return latest_records(self.path(name), cls)

    def has_samples(self) -> bool:
        return self.path(SAMPLES).exists()

    def samples(self) -> list[Sample]:
        """The samples the run folder was run on (what judge, export and reports read)."""
        path = self.path(SAMPLES)
        if not path.exists():
            raise RunFolderError(
                f"{self.root}: no {SAMPLES} (the runner writes it; "
                "re-run `cafe run` on this folder)"
            )
        return list(read_records(path, Sample))

    def write_samples(self, samples: Iterable[Sample]) -> None:
        replace_file(
            self.path(SAMPLES), lambda f: f.writelines(s.to_json() + "\n" for s in samples)
        )

    def predictions(self) -> list[Prediction]:
        return self.read_records(PREDICTIONS, Prediction)

    def predictions_after(self, offset: int) -> tuple[list[Prediction], int]:
        """Prediction lines from byte ``offset`` of predictions.jsonl on (``records_after``)."""
        return records_after(self.path(PREDICTIONS), offset, Prediction)

    def predictions_size(self) -> int:
        p = self.path(PREDICTIONS)
        return p.stat().st_size if p.exists() else 0

    def judgements(self) -> list[Judgement]:
        return self.read_records(JUDGEMENTS, Judgement)

    def writer(self, name: str) -> JsonlWriter:
        return JsonlWriter(self.path(name))
