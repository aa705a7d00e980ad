"""Loading official benchmark metadata (MMAU, MMAR): find the file, detect its version, validate
each item into a Sample and report every bad item as a Problem without raising.

What MMAU and MMAR have in common lives here; each benchmark module supplies a MetadataSpec and a
function that normalises its own quirks."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import LoadedBenchmark
from cafe.records import InputError, Problem, Sample

#: fields a loader moves onto the Sample itself; everything else stays in Sample.meta
CORE_FIELDS = ("id", "question", "choices", "answer")
#: meta keys the loaders add (not in the official files; export leaves them out)
ADDED_META = ("quirks", "isolation", "languages", "duplicate_choices", "category_original")
ADDED_META += ("data_warning",)
#: an answer that is not one of its choices (MMAR v1 has five, fixed in v2): the item still
#: runs and is scored, as the official scripts score it, by the official rule on the answer text
ANSWER_NOT_A_CHOICE = (
    "data warning: answer is not among the choices; the item runs and is scored with the "
    "official rule on the answer text"
)


@dataclass
class MetadataSpec:
    bench: str
    audio_field: str  # the field holding the clip path, relative to the metadata file
    required: tuple[str, ...]  # besides id/question/choices/answer
    known_sha256: dict[str, str]  # file sha256 -> version
    known_content: dict[str, str]  # content fingerprint -> version (reformatted / HF copies)
    file_names: dict[str, str]  # version -> official file name (folder lookup)
    answerless_version: str | None = None  # version name of a split shipped without answers
    default_audio: Callable[[str], str] | None = None  # id -> the usual relative audio path
    extra_names: tuple[str, ...] = field(default_factory=tuple)  # other file names to accept

    def __post_init__(self) -> None:
        SPECS[self.bench] = self


#: every official benchmark's spec, so a file given to the wrong one can be named
SPECS: dict[str, MetadataSpec] = {}


def check_shape(spec: MetadataSpec, rows: list[dict[str, Any]], source: str) -> None:
    """check_signature for an MMAU / MMAR file (their signature: the audio field and the
    required fields)."""
    check_signature(spec.bench, rows, source)


def _fits(signature: tuple[str, ...], shapes: Counter[frozenset[str]], half: bool = False) -> bool:
    """Whether most rows (``half``: at least half) hold every column of a signature; ``shapes``
    counts the rows of each set of columns (a file has few)."""
    want = set(signature)
    n = 2 * sum(c for cols, c in shapes.items() if want <= cols)
    total = sum(shapes.values())
    return n >= total if half else n > total


def check_signature(bench: str, rows: list[Any], source: str) -> None:
    """Refuse a file of another benchmark (``--bench mmau-pro`` on an MMAR file) with one line
    saying what it looks like, instead of an error per item or a silent run. Each benchmark
    declares its ``signature`` (the columns every row of its files has); the file is refused when
    most rows lack this benchmark's, or when most rows hold a larger signature of another
    benchmark (MMAR's rows also hold MMAU-Pro's few columns, and more)."""
    from cafe.benchmarks import BENCHMARKS

    rows = [r for r in rows if isinstance(r, dict)]
    sigs: dict[str, tuple[str, ...]] = {}
    for name in BENCHMARKS.names():
        try:
            sigs[name] = tuple(BENCHMARKS.get(name).signature)
        except Exception:  # a broken third-party benchmark must not hide this message
            continue
    mine = sigs.get(bench, ())
    if not rows or not mine:
        return
    shapes = Counter(frozenset(r) for r in rows)
    fits = _fits(mine, shapes, half=True)  # a file with many bad rows is still this one's
    others = [(len(sig), name) for name, sig in sigs.items()
              if name != bench and sig and _fits(sig, shapes)]  # fmt: skip
    best = max(others, default=None)
    if fits and (best is None or best[0] <= len(mine)):
        return
    if best is not None:
        other = best[1]
        msg = (
            f"this looks like {other.upper()} metadata (items have "
            f"{', '.join(sigs[other])}), not {bench.upper()} ({', '.join(mine)}); use --bench "
            f"{other}"
        )
    else:
        keys = sorted({k for r in rows[:50] for k in r})[:12]
        msg = (
            f"not {bench.upper()} metadata: most items lack {', '.join(mine)} (they have "
            f"{', '.join(keys)})"
        )
    raise InputError(Problem(source, msg))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def content_fingerprint(rows: list[dict[str, Any]]) -> str:
    """Hash of (id, question, choices, answer) per item, order-free: identifies a version when
    the bytes differ (re-serialised JSON, a Hugging Face copy)."""
    items = sorted(
        json.dumps([str(r.get(k)) for k in CORE_FIELDS], ensure_ascii=False) for r in rows
    )
    return hashlib.sha256("\n".join(items).encode()).hexdigest()


def fingerprint_version(rows: list[Any], skip: tuple[str, ...] = ()) -> str:
    """A version name for a file of no known release: ``content-`` and 12 hex digits of a hash
    of its rows (every field but ``skip``, the audio fields a local copy rewrites; order-free),
    so two different files never share a version (nor a default run folder), and the same rows
    as JSON, JSONL or a Hugging Face copy share one."""
    items = sorted(
        repr(sorted((k, v) for k, v in r.items() if k not in skip))  # keys unique: never ties
        for r in rows if isinstance(r, dict)
    )  # fmt: skip
    return "content-" + hashlib.sha256("\n".join(items).encode()).hexdigest()[:12]


def unknown_release(source: str, version: str) -> Problem:
    """The note that a file's version is its content fingerprint."""
    return Problem(source, f"no known release hash: version recorded as {version!r}, the "
                   "file's content fingerprint (pass --version to name it)")  # fmt: skip


def read_rows(path: Path) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """(position, object) pairs of a JSON list or JSONL file. A malformed JSONL line is a Problem
    (the other lines load); a JSON list that does not parse cannot be split into items and raises
    InputError."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(Problem(str(path), f"cannot read metadata ({e})")) from None
    if not text.strip():
        raise InputError(Problem(str(path), "metadata file is empty"))
    try:
        return parse_rows(text, path)
    except json.JSONDecodeError as e:
        msg = f"not valid JSON ({e.msg} at line {e.lineno})"
        raise InputError(Problem(str(path), msg)) from None
    except ValueError as e:  # nested too deep for the parser
        raise InputError(Problem(str(path), f"not valid JSON ({e})")) from None


def parse_rows(text: str, path: str | Path) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """(position, object) pairs of JSON list or JSONL ``text`` read from ``path``: item numbers
    for a list, line numbers for JSONL (lines end at "\\n" only, as JSON reads them: U+2028,
    U+2029 and U+0085 are valid inside a line). A malformed JSONL line, and an item holding what
    no file may (a lone surrogate, NUL, nesting too deep), is a Problem naming it (the other
    items load); a JSON list that does not parse raises ValueError (json.JSONDecodeError)."""
    from cafe.jsontext import loads_line

    if text.lstrip().startswith("["):
        numbered = list(enumerate(loads_line(text), 1))
        kind, problems = "item", []
    else:
        numbered, problems, kind = [], [], "line"
        for i, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                numbered.append((i, loads_line(line)))
            except ValueError as e:
                why = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
                problems.append(Problem(str(path), f"line {i}: not valid JSON ({why})"))
    rows = []
    for i, row in numbered:
        bad = _unwritable(row, f"{kind} {i}", str(path))
        if bad is None:
            rows.append((i, row))
        else:
            problems.append(bad)
    return rows, problems


#: what the loaders (and predictions files) call an item's id
ID_FIELDS = ("id", "sample_id", "uniq_id")


def _unwritable(row: Any, where: str, path: str) -> Problem | None:
    """A Problem naming the item and field when ``row`` holds what no file may (bad_text)."""
    from cafe.jsontext import bad_text

    found = bad_text(row)
    if found is None:
        return None
    field, why = found
    ids = [row.get(k) for k in ID_FIELDS] if isinstance(row, dict) else []
    sid = next((x for x in ids if x is not None), None)
    sid = sid if isinstance(sid, (str, int)) and not bad_text(sid) else None
    return Problem(path, f"{where}: {why}; item left out", str(sid) if sid is not None else None,
                   field or None)  # fmt: skip


def join_list_category(item: dict[str, Any], meta: dict[str, Any]) -> None:
    """Keep ``category`` a string when an item gives it as a list (joined with '|'), remember the
    original form and note the quirk (13 MMAU test-mini items; MMAR alike)."""
    cat = item.get("category")
    if isinstance(cat, list):
        meta["category"] = "|".join(str(c) for c in cat)
        meta["category_original"] = cat
        meta["quirks"].append("category given as a list")


def find_metadata(data: str | Path, spec: MetadataSpec, version: str | None) -> Path:
    """The metadata file for ``data``: the file itself, or the official file in a folder (a
    Hugging Face hub snapshot included). With several candidates ``version`` chooses."""
    p = Path(data).expanduser()
    if not p.exists():
        raise InputError(Problem(str(p), f"{spec.bench} data not found"))
    if p.is_file():
        return p
    names = list(dict.fromkeys([*spec.file_names.values(), *spec.extra_names]))
    roots = [p]
    snap = p / "snapshots"  # a hub cache folder datasets--owner--name
    if snap.is_dir():
        roots = sorted(snap.iterdir(), key=lambda d: d.stat().st_mtime, reverse=True) + roots
    found: list[Path] = []
    for root in roots:
        for depth in ("", "*/", "*/*/"):
            for name in names:
                found += sorted(root.glob(depth + name))
        if found:
            break
    if not found:  # a lone JSON / JSONL file under another name
        found = sorted([*p.glob("*.json"), *p.glob("*.jsonl")])
        found = found if len(found) == 1 else []
    if not found:
        raise InputError(
            Problem(str(p), f"no {spec.bench} metadata file ({', '.join(names)}) in this folder")
        )
    if version:
        want = spec.file_names.get(version)
        for f in found:
            if f.name == want:
                return f
        for f in found:
            if spec.known_sha256.get(sha256_file(f)) == version:
                return f
    return found[0]


def detect_version(
    spec: MetadataSpec, sha: str | None, rows: list[dict[str, Any]], source: str
) -> tuple[str, list[Problem]]:
    if sha and sha in spec.known_sha256:
        return spec.known_sha256[sha], []
    by_content = spec.known_content.get(content_fingerprint(rows))
    if by_content:
        return by_content, []
    if spec.answerless_version and rows and all("answer" not in r for r in rows):
        return spec.answerless_version, []
    msg = "unknown file hash: version recorded as 'unknown' (pass --version to name it)"
    return "unknown", [Problem(source, msg)]


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _check_mcq(
    item: dict[str, Any], answerless: bool, errors: list[tuple[str, str]]
) -> tuple[str, list[Any], Any, str | None]:
    """The item's question, choices and answer, each made usable (a wrong type noted in
    ``errors`` as (field, message)); the warning when the answer is not among the choices
    (a data fact, not a failure: the item runs and is scored on the answer text)."""
    question = item.get("question")
    if not _text(question):
        errors.append(("question", "missing field" if question is None else "not a string"))
        question = "" if question is None else str(question)
    choices = item.get("choices")
    if not isinstance(choices, list):
        errors.append(("choices", "missing field" if choices is None else "choices is not a list"))
        choices = []
    elif not all(_text(c) for c in choices):
        errors.append(("choices", "a choice is not a string"))
        choices = [str(c) for c in choices]
    answer = item.get("answer")
    if answer is None and not answerless:
        errors.append(("answer", "missing field"))
    elif answer is not None and not _text(answer):
        errors.append(("answer", "not a string"))
        answer = str(answer)
    elif answer is not None and not answer.strip():  # every output would count as right
        # (an empty choice beside a real answer is kept: 4 real MMAR items ship one)
        errors.append(("answer", "is empty"))
    warning = None
    if (
        answer is not None
        and _text(answer)
        and answer.strip()
        and choices
        and answer.strip() not in {c.strip() for c in choices}
    ):
        warning = ANSWER_NOT_A_CHOICE
    return question, choices, answer, warning


def _unique_id(
    sid: str, pos: int, seen: dict[str, int], taken: set[str], errors: list[tuple[str, str]]
) -> str:
    """``sid``, or for a repeat a new name no real id of the file has (x, x, x#dup2 ->
    x#dup3), with the error that says so."""
    if sid not in seen:
        seen[sid] = 1
        return sid
    seen[sid] += 1
    while f"{sid}#dup{seen[sid]}" in taken:
        seen[sid] += 1
    dup = f"{sid}#dup{seen[sid]}"
    taken.add(dup)
    errors.append(("id", f"duplicate id (item {pos}); the first is kept, this one is recorded as "
                         f"{dup}"))  # fmt: skip
    return dup


def _audio_of(
    item: dict[str, Any],
    spec: MetadataSpec,
    ids: tuple[str, str],
    src: str,
    roots: list[Path],
    errors: list[tuple[str, str]],
) -> list[str] | None:
    """The item's audio path resolved inside ``roots`` ([] when it leads outside them, with the
    error), or None when the item names no clip. ``ids``: (sample id, id as in the file)."""
    from cafe.audio import contained_audio

    audio_rel = item.get(spec.audio_field)
    if not (_text(audio_rel) and audio_rel):
        return None
    path, outside = contained_audio(
        audio_rel, roots, file=src, sample_id=ids[0], field=spec.audio_field
    )
    if outside is not None:
        errors.append((spec.audio_field, outside.message))
        return []
    return [str(path)]


def build_samples(
    rows: list[tuple[int, Any]],
    spec: MetadataSpec,
    source: Path,
    base_dir: Path,
    version: str,
    normalise: Callable[[dict[str, Any], dict[str, Any]], None],
    official_layout: bool = True,
    extra_roots: tuple[Path, ...] = (),
) -> tuple[list[Sample], list[Problem]]:
    """Validate and convert rows. ``normalise(item, meta)`` fills benchmark-specific meta and
    quirk notes. Bad items become Problems and, when their id is known, Samples with .error.
    Audio paths resolve against ``base_dir`` and must stay inside it (or ``extra_roots``)."""
    src = str(source)
    samples: list[Sample] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    # a duplicate's new name must not be any real id of the file: x, x, x#dup2 -> x#dup3
    taken = {str(it["id"]) for _, it in rows if isinstance(it, dict) and it.get("id") is not None}
    answerless = version == spec.answerless_version
    for pos, item in rows:
        if not isinstance(item, dict):
            problems.append(Problem(src, f"item {pos} is not a JSON object"))
            continue
        raw_id = item.get("id")
        if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
            problems.append(Problem(src, f"item {pos} has no id", field="id"))
            continue
        errors: list[tuple[str, str]] = []  # (field, message)
        sid = _unique_id(str(raw_id), pos, seen, taken, errors)

        question, choices, answer, warning = _check_mcq(item, answerless, errors)
        for name in (spec.audio_field, *spec.required):
            if name not in item or item[name] is None or item[name] == "":
                errors.append((name, "missing field"))
        if item.get(spec.audio_field) not in (None, "") and not _text(item[spec.audio_field]):
            # never run without its clip: a path that is no string names no file
            kind = type(item[spec.audio_field]).__name__
            errors.append((spec.audio_field, f"not a string (a {kind})"))

        meta = {k: v for k, v in item.items() if k not in CORE_FIELDS}
        quirks: list[str] = []
        meta["quirks"] = quirks
        if len(set(choices)) != len(choices):
            meta["duplicate_choices"] = True
            quirks.append("duplicate choice strings (kept as given)")
        audio = _audio_of(item, spec, (sid, str(raw_id)), src, [base_dir, *extra_roots], errors)
        if audio is not None and official_layout and spec.default_audio:
            if item.get(spec.audio_field) != spec.default_audio(str(raw_id)):
                quirks.append(f"irregular {spec.audio_field} (used as given)")
        normalise(item, meta)
        if not quirks:
            del meta["quirks"]
        if warning is not None:
            meta["data_warning"] = "answer is not among the choices"
            problems.append(Problem(src, warning, sid, "answer"))

        for f, m in errors:
            problems.append(Problem(src, m, sid, f))
        samples.append(
            Sample(
                id=sid,
                bench=spec.bench,
                version=version,
                question=question,
                choices=list(choices),
                answer=answer,
                audio=audio or [],
                meta=meta,
                error="; ".join(f"{f}: {m}" for f, m in errors) or None,
            )
        )
    return samples, problems


def load_official(
    spec: MetadataSpec,
    data: str | Path | None,
    version: str | None,
    normalise: Callable[[dict[str, Any], dict[str, Any]], None],
    audio_root: str | Path | None = None,
) -> LoadedBenchmark:
    """The whole load: locate (file, folder or HF copy), read, detect version, build samples.
    ``audio_root``: the folder audio paths are relative to and must stay inside (default: the
    metadata file's folder)."""
    from cafe.benchmarks import hf_copy

    if data is None:
        data = default_data(spec)
    problems: list[Problem] = []
    from_hf = hf_copy.is_hf_copy(data)
    extra_roots: tuple[Path, ...] = ()
    if from_hf:
        rows_list, base_dir, sha = hf_copy.load_rows(data, spec.audio_field)
        source = Path(data)
        rows = list(enumerate(rows_list, 1))
        extra_roots = (hf_copy.audio_dir(data),)  # clips cafe itself wrote out of the copy
    else:
        source = find_metadata(data, spec, version)
        rows, problems = read_rows(source)
        base_dir = source.parent
        sha = sha256_file(source)
    dict_rows = [r for _, r in rows if isinstance(r, dict)]
    check_shape(spec, dict_rows, str(source))
    detected, vprobs = detect_version(spec, sha, dict_rows, str(source))
    if version:
        if detected not in ("unknown", version):
            msg = f"content identifies version {detected!r}; recorded as {version!r} as asked"
            problems.append(Problem(str(source), msg))
    else:
        problems += vprobs
    ver = version or detected
    if audio_root is not None:
        base_dir = Path(audio_root).expanduser()
        if not base_dir.is_dir():
            raise InputError(Problem(str(base_dir), "--audio-root is not a folder"))
    samples, item_problems = build_samples(
        rows, spec, source, base_dir, ver, normalise, official_layout=not from_hf,
        extra_roots=extra_roots,
    )  # fmt: skip
    return LoadedBenchmark(
        samples=samples,
        version=ver,
        source=str(source),
        sha256=sha,
        problems=problems + item_problems,
    )


def default_data(spec: MetadataSpec | str) -> Path:
    """Where to look without --data: $CAFE_DATA_DIR/<bench> (``spec``: a spec or the name)."""
    bench = spec if isinstance(spec, str) else spec.bench
    root = os.environ.get("CAFE_DATA_DIR")
    if root and (Path(root) / bench).exists():
        return Path(root) / bench
    raise InputError(
        Problem(
            f"$CAFE_DATA_DIR/{bench}",
            f"no {bench} data: pass --data PATH (the official metadata file or its folder, "
            f"or a local Hugging Face copy) or set CAFE_DATA_DIR",
        )
    )
