"""Every bad byte is one clear line, in each of the six metadata loaders (MMAU, MMAR, SAKURA,
MMSU, AIR-Bench, MMAU-Pro): a lone surrogate (a JSON escape "\\ud800" no UTF-8 file can hold),
a NUL, nesting past the bound. The bad item is one Problem naming file, sample and field; the
other items load, and every loaded sample can be written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cafe.audio import write_wav
from cafe.benchmarks import BENCHMARKS

#: the deepest nesting a value read from a file may have (cafe.jsontext.MAX_DEPTH)
MAX_DEPTH = 64


def _tone(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_wav(path, (0.1 * np.sin(2 * np.pi * 300 * np.arange(1600) / 16000)).astype("float32"))


def _mcq(sid: str) -> dict:
    return {"id": sid, "question": f"Which is heard [{sid}]?", "choices": ["dog", "cat"],
            "answer": "dog", "category": "c", "sub-category": "s"}  # fmt: skip


def _mmar(root: Path, sids: list[str]) -> list[dict]:
    rows = []
    for sid in sids:
        _tone(root / "audio" / f"{sid}.wav")
        rows.append({**_mcq(sid), "audio_path": f"./audio/{sid}.wav", "modality": "sound",
                     "language": None, "source": "x", "url": "u", "timestamp": "0"})  # fmt: skip
    return rows


def _mmau(root: Path, sids: list[str]) -> list[dict]:
    rows = []
    for sid in sids:
        _tone(root / "test-mini-audios" / f"{sid}.wav")
        rows.append({**_mcq(sid), "audio_id": f"./test-mini-audios/{sid}.wav", "task": "sound",
                     "difficulty": "easy", "dataset": "d"})  # fmt: skip
    return rows


def _mmau_pro(root: Path, sids: list[str]) -> list[dict]:
    rows = []
    for sid in sids:
        _tone(root / "audio" / f"{sid}.wav")
        rows.append({**_mcq(sid), "audio_path": [f"audio/{sid}.wav"], "sub-cat": "x",
                     "length_type": "short", "task_identifier": None})  # fmt: skip
    return rows


def _letter(root: Path, sids: list[str], id_field: str, audio_field: str) -> list[dict]:
    rows = []
    for sid in sids:
        _tone(root / "audio" / f"{sid}.wav")
        rows.append({id_field: sid, audio_field: f"audio/{sid}.wav", "question": f"Q [{sid}]?",
                     "choice_a": "dog", "choice_b": "cat", "answer_gt": "dog",
                     "category": "c", "sub-category": "s", "task_name": "t",
                     "dataset_name": "d"})  # fmt: skip
    return rows


#: bench -> (file name, rows builder, the field holding the question)
LOADERS: dict[str, tuple[str, Callable[[Path, list[str]], list[dict]]]] = {
    "mmar": ("MMAR-meta.json", _mmar),
    "mmau": ("mmau-test-mini.json", _mmau),
    "mmau-pro": ("test.json", _mmau_pro),
    "mmsu": ("mmsu.json", lambda r, s: _letter(r, s, "id", "audio")),
    "airbench": ("Foundation_meta.json", lambda r, s: _letter(r, s, "uniq_id", "path")),
}

BAD = {
    "surrogate": ("\ud800", "lone surrogate (U+D800)"),
    "nul": ("a\x00b", "NUL character"),
}


def _load(bench: str, data: Path):
    b = BENCHMARKS.get(bench)()
    return b.load(str(data))


def _check(loaded, source: Path, sid: str, field: str, says: str, good: set[str]) -> None:
    lines = [str(p) for p in loaded.problems]
    hits = [x for x in lines if str(source) in x and f"sample {sid}" in x and says in x
            and f"field {field}" in x]  # fmt: skip
    assert len(hits) == 1, lines
    assert good <= {s.id for s in loaded.samples}, [s.id for s in loaded.samples]
    for s in loaded.samples:  # every loaded sample can be written as UTF-8 JSON
        json.dumps(s.to_dict(), ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("bench", sorted(LOADERS))
def test_a_bad_string_in_one_row_is_one_line_and_the_rest_load(bench, kind, tmp_path):
    name, build = LOADERS[bench]
    rows = build(tmp_path, ["g1", "b2", "g3"])
    value, says = BAD[kind]
    rows[1]["question"] = f"Which {value} is heard?"
    meta = tmp_path / name
    meta.write_text(json.dumps(rows))  # ascii escapes: "\ud800" and "\u0000" as JSON spells them
    loaded = _load(bench, meta)
    _check(loaded, meta, "b2", "question", says, {"g1", "g3"})


@pytest.mark.parametrize("bench", sorted(LOADERS))
def test_nesting_past_the_bound_is_one_line(bench, tmp_path):
    name, build = LOADERS[bench]
    rows = build(tmp_path, ["g1", "b2"])
    deep: list = []
    for _ in range(MAX_DEPTH + 5):  # deep enough to hurt later readers, not the parser
        deep = [deep]
    rows[1]["notes"] = deep
    meta = tmp_path / name
    meta.write_text(json.dumps(rows))
    loaded = _load(bench, meta)
    _check(loaded, meta, "b2", "notes", "nested more than", {"g1"})


@pytest.mark.parametrize("kind", sorted(BAD))
def test_sakura_a_bad_string_in_one_clip_is_one_line(kind, tmp_path):
    from sakura_helpers import write_folder

    root = write_folder(tmp_path / "sakura")
    meta = root / "data" / "Animal" / "metadata.json"
    rows = json.loads(meta.read_text())
    key = "data/Animal/audio/a2.wav"
    value, says = BAD[kind]
    rows[key]["single_instruction"] = f"Which {value}? (a) dog (b) cat"
    meta.write_text(json.dumps(rows))
    loaded = _load("sakura", root)
    _check(loaded, meta, key, "single_instruction", says, {"Animal-a1-single", "Gender-g1-multi"})


def test_sakura_a_row_that_is_no_object_is_one_line(tmp_path):
    from sakura_helpers import write_folder

    root = write_folder(tmp_path / "sakura")
    meta = root / "data" / "Animal" / "metadata.json"
    rows = json.loads(meta.read_text())
    rows["data/Animal/audio/a2.wav"] = 42
    meta.write_text(json.dumps(rows))
    loaded = _load("sakura", root)  # before: AttributeError from the version fingerprint
    lines = [str(p) for p in loaded.problems]
    assert [x for x in lines if "a2.wav" in x and "not a JSON object" in x], lines
    assert {"Animal-a1-single", "Gender-g1-single"} <= {s.id for s in loaded.samples}


def test_mmau_pro_audio_path_a_number_is_one_line(tmp_path):
    rows = _mmau_pro(tmp_path, ["g1", "b2", "g3"])
    rows[1]["audio_path"] = 42
    meta = tmp_path / "test.json"
    meta.write_text(json.dumps(rows))
    loaded = _load("mmau-pro", meta)  # before: TypeError ('int' object is not iterable)
    _check(loaded, meta, "b2", "audio_path", "not a path or a list of paths", {"g1", "g3"})


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """U+2028, U+2029 and U+0085 are valid inside a JSON string: the line stays whole (before,
    splitlines() cut it and warned about lines that do not exist)."""
    rows = _mmar(tmp_path, ["g1", "g2", "g3"])
    rows[0]["question"] = "Which\u2028is\u2029heard\u0085first?"
    meta = tmp_path / "MMAR-meta.jsonl"
    meta.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    loaded = _load("mmar", meta)
    assert not [p for p in loaded.problems if "not valid JSON" in str(p)]
    by_id = {s.id: s for s in loaded.samples}
    assert set(by_id) == {"g1", "g2", "g3"}
    assert by_id["g1"].question == "Which\u2028is\u2029heard\u0085first?"


def test_the_depth_bound_is_the_one_the_readers_use():
    from cafe.jsontext import MAX_DEPTH as bound

    assert bound == MAX_DEPTH
