"""MMAU loader: the real test-mini files (facts from SPEC §9), version detection, the answerless
test split, local Hugging Face copies, and broken files made here."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.mmau import MMAU
from cafe.benchmarks.scoring import accuracy_section
from cafe.records import InputError, Prediction

V2_SHA = "9f18fda99f8dbc2bc5ecd6323fb5063309f54969810b5c6f1caeb3b8d904cf1c"
ORIG_SHA = "e8cc09223b497191781756212cb616315690aaa6ea7ac359db1b65d97d1e2433"


def _item(sid, **over):
    item = {
        "id": sid,
        "audio_id": f"./test-mini-audios/{sid}.wav",
        "question": "What is heard?",
        "choices": ["Dog", "Cat", "Bird", "Car"],
        "answer": "Dog",
        "dataset": "AudioSet",
        "task": "sound",
        "split": "test-mini",
        "category": "Reasoning",
        "sub-category": "Acoustic Source Inference",
        "difficulty": "easy",
    }
    item.update(over)
    return item


def test_registered_lazily():
    assert BENCHMARKS.get("mmau") is MMAU


def test_real_v05_15_25_facts(shared_data):
    path = os.path.join(shared_data, "mmau", "mmau-test-mini.json")
    lb = MMAU().load(path)
    assert lb.version == "v05.15.25" and lb.sha256 == V2_SHA
    assert lb.problems == []
    s = lb.samples
    assert len(s) == 1000 and len({x.id for x in s}) == 1000
    assert all(x.bench == "mmau" and x.version == "v05.15.25" and x.error is None for x in s)
    assert Counter(x.meta["task"] for x in s) == {"sound": 333, "music": 334, "speech": 333}
    assert Counter(x.meta["difficulty"] for x in s) == {"easy": 224, "medium": 540, "hard": 236}
    assert Counter(x.meta["category"] for x in s) == {
        "Reasoning": 677,
        "Information Extraction": 323,
    }
    assert sum("category_original" in x.meta for x in s) == 13  # one-element lists, normalised
    assert len({x.meta["sub-category"] for x in s}) == 27
    assert {len(x.choices) for x in s} <= set(range(2, 9))
    assert min(len(x.choices) for x in s) == 2 and max(len(x.choices) for x in s) == 8
    dup = [x for x in s if x.meta.get("duplicate_choices")]
    assert len(dup) == 27 and all(len(set(x.choices)) < len(x.choices) for x in dup)
    # audio resolved relative to the JSON file
    first = s[0]
    assert first.audio == [os.path.join(shared_data, "mmau", "test-mini-audios", f"{first.id}.wav")]
    # ids, questions and answers are untouched
    raw = json.load(open(path))
    assert [(r["id"], r["question"], r["answer"], r["choices"]) for r in raw] == [
        (x.id, x.question, x.answer, x.choices) for x in s
    ]


def test_real_original_version_and_folder_choice(shared_data):
    folder = os.path.join(shared_data, "mmau")
    lb = MMAU().load(folder, version="original")
    assert lb.version == "original" and lb.sha256 == ORIG_SHA
    assert lb.source.endswith("mmau-test-mini-original.json")
    assert sum(x.meta.get("duplicate_choices", False) for x in lb.samples) == 20
    # a folder with both files defaults to the current release
    assert MMAU().load(folder).version == "v05.15.25"
    new = {x.id for x in MMAU().load(folder).samples}
    assert len(new - {x.id for x in lb.samples}) == 106  # ids replaced in v05.15.25


def test_version_from_content_when_bytes_differ(shared_data, tmp_path):
    raw = json.load(open(os.path.join(shared_data, "mmau", "mmau-test-mini-original.json")))
    p = tmp_path / "reserialised.json"
    p.write_text(json.dumps(list(reversed(raw)), indent=1))
    lb = MMAU().load(str(p))
    assert lb.version == "original" and lb.sha256 != ORIG_SHA and lb.problems == []
    raw[0]["question"] += " (edited)"
    p.write_text(json.dumps(raw))
    lb = MMAU().load(str(p))
    assert lb.version == "unknown"
    assert len(lb.problems) == 1 and "unknown file hash" in lb.problems[0].message
    assert MMAU().load(str(p), version="my-edit").version == "my-edit"


def test_forced_version_that_disagrees_is_reported(shared_data):
    path = os.path.join(shared_data, "mmau", "mmau-test-mini.json")
    lb = MMAU().load(path, version="original")
    assert lb.version == "original" and all(s.version == "original" for s in lb.samples)
    assert any("identifies version 'v05.15.25'" in p.message for p in lb.problems)


def test_answerless_test_split(tmp_path):
    items = [_item(f"t{i}", split="test", audio_id=f"./test-audios/t{i}.wav") for i in range(3)]
    for it in items:
        del it["answer"]
    (tmp_path / "mmau-test.json").write_text(json.dumps(items))
    lb = MMAU().load(str(tmp_path))
    assert lb.version == "test" and lb.problems == []
    assert all(s.answer is None and s.error is None for s in lb.samples)
    assert lb.samples[2].audio == [str(tmp_path / "test-audios" / "t2.wav")]
    preds = [Prediction(s.id, 0, "m", "p", "h", "Dog", answer="Dog") for s in lb.samples]
    sec = accuracy_section(lb.samples, preds, MMAU.breakdowns)
    assert sec["unscorable"] == 3 and sec["total"]["total"] == 0


def test_broken_items_are_problems_not_exceptions(tmp_path):
    items = [
        _item("ok"),
        _item("noanswer"),
        _item("dup"),
        _item("dup", question="second copy"),
        _item("badchoices", choices="Dog, Cat"),
        _item("notamong", answer="Horse"),
        _item("nodiff"),
        {"question": "no id at all"},
        ["not", "an", "object"],
        _item("listcat", category=["Reasoning"]),
    ]
    del items[1]["answer"]
    del items[6]["difficulty"]
    p = tmp_path / "broken.json"
    p.write_text(json.dumps(items))
    lb = MMAU().load(str(p))
    by_id = {s.id: s for s in lb.samples}
    assert list(by_id) == [
        "ok",
        "noanswer",
        "dup",
        "dup#dup2",
        "badchoices",
        "notamong",
        "nodiff",
        "listcat",
    ]
    assert by_id["ok"].error is None and by_id["dup"].error is None
    assert by_id["dup"].question == "What is heard?"  # the first is kept
    assert by_id["dup#dup2"].error and "duplicate id" in by_id["dup#dup2"].error
    assert "answer: missing field" in by_id["noanswer"].error
    assert "choices is not a list" in by_id["badchoices"].error
    assert by_id["notamong"].error is None  # a data warning: the item runs and is scored
    assert by_id["notamong"].meta["data_warning"] == "answer is not among the choices"
    assert "difficulty: missing field" in by_id["nodiff"].error
    assert by_id["listcat"].error is None and by_id["listcat"].meta["category"] == "Reasoning"
    fields = {(pr.sample_id, pr.field) for pr in lb.problems}
    assert {
        ("noanswer", "answer"),
        ("dup#dup2", "id"),
        ("badchoices", "choices"),
        ("notamong", "answer"),
        ("nodiff", "difficulty"),
        (None, "id"),
    } <= fields
    assert all(pr.file == str(p) for pr in lb.problems)
    assert any("item 9 is not a JSON object" in str(pr) for pr in lb.problems)
    line = str(next(pr for pr in lb.problems if pr.sample_id == "notamong"))
    assert line == (
        f"{p}: sample notamong: field answer: data warning: answer is not among the choices; "
        "the item runs and is scored with the official rule on the answer text"
    )


def test_unreadable_file_raises_one_input_error(tmp_path):
    p = tmp_path / "mmau-test-mini.json"
    p.write_text('[{"id": "a", ')
    with pytest.raises(InputError, match="not valid JSON"):
        MMAU().load(str(p))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "my_copy.json").write_text(json.dumps([_item("x")]))
    assert [s.id for s in MMAU().load(str(tmp_path / "other")).samples] == ["x"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no mmau metadata file"):
        MMAU().load(str(tmp_path / "empty"))
    with pytest.raises(InputError, match="data not found"):
        MMAU().load(str(tmp_path / "nothing-here"))


def _write_wav(path: Path, seconds: float = 0.1) -> bytes:
    import numpy as np

    from cafe.audio import write_wav

    write_wav(path, np.zeros(int(16000 * seconds), dtype=np.float32))
    return path.read_bytes()


def test_hf_save_to_disk_copy(shared_data, tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    # 20 real items: enough for the path; version-by-content is covered by the parquet and
    # re-serialised tests, and importing datasets is the slow part
    raw = json.load(open(os.path.join(shared_data, "mmau", "mmau-test-mini-original.json")))[:20]
    wav = _write_wav(tmp_path / "clip.wav", 0.01)
    fields = ("id", "question", "choices", "answer", "task", "difficulty", "sub-category")
    rows = {k: [r[k] for r in raw] for k in fields}
    # an HF column has one type: list-valued categories become strings there
    rows["category"] = [c if isinstance(c, str) else c[0] for c in (r["category"] for r in raw)]
    rows["audio"] = [{"bytes": wav, "path": f"{r['id']}.wav"} for r in raw]
    ds = datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio(decode=False))
    datasets.DatasetDict({"test": ds}).save_to_disk(str(tmp_path / "hf"))
    lb = MMAU().load(str(tmp_path / "hf"), version="original")
    assert lb.version == "original" and lb.problems == []  # content agrees: no warning
    assert len(lb.samples) == 20 and all(s.error is None for s in lb.samples)
    s = lb.samples[5]
    assert (s.id, s.question, s.answer, s.choices) == (
        raw[5]["id"],
        raw[5]["question"],
        raw[5]["answer"],
        raw[5]["choices"],
    )
    assert Path(s.audio[0]).read_bytes() == wav
    assert str(tmp_path / "cache") in s.audio[0]
    assert MMAU().load(str(tmp_path / "hf")).version == "unknown"  # a subset is not a release
