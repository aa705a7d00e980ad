"""MMAR loader: the real v1 (JSON) and v2 (JSONL) files with the SPEC §9 facts, irregular audio
paths, the v1 answers that are not among their choices, JSONL line errors, parquet copies."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.mmar import MMAR
from cafe.records import InputError

V1_SHA = "7240ecca11b252c782ef44d4d19f711dd9b8424656a2bc3f92c548e318d25cee"
V2_SHA = "1c9a343e7bebf1037482b935c54eacd43cc63df7b2c668724b5560caf1f84fad"
MODALITIES = {
    "sound": 165,
    "music": 206,
    "speech": 294,
    "mix-sound-music": 11,
    "mix-sound-speech": 218,
    "mix-music-speech": 82,
    "mix-sound-music-speech": 24,
}
LAYERS = {"Signal Layer": 43, "Perception Layer": 404, "Semantic Layer": 412, "Cultural Layer": 141}


def _item(sid, **over):
    item = {
        "id": sid,
        "audio_path": f"./audio/{sid}.wav",
        "question": "Which instrument plays first?",
        "choices": ["Piano", "Violin"],
        "answer": "Piano",
        "modality": "music",
        "category": "Perception Layer",
        "sub-category": "Temporal Analysis",
        "language": None,
        "source": "youtube",
        "url": "https://example.invalid",
        "timestamp": "00:00:00,00:00:10",
    }
    item.update(over)
    return item


def test_registered_lazily():
    assert BENCHMARKS.get("mmar") is MMAR


@pytest.mark.parametrize(
    ("name", "version", "sha"),
    [("MMAR-meta.jsonl", "v2", V2_SHA), ("MMAR-meta-v1.json", "v1", V1_SHA)],
)
def test_real_facts(shared_data, name, version, sha):
    lb = MMAR().load(os.path.join(shared_data, "mmar", name))
    assert lb.version == version and lb.sha256 == sha
    s = lb.samples
    assert len(s) == 1000 and len({x.id for x in s}) == 1000
    assert Counter(x.meta["modality"] for x in s) == MODALITIES
    assert Counter(x.meta["category"] for x in s) == LAYERS
    assert len({x.meta["sub-category"] for x in s}) == 16
    assert Counter(x.meta["isolation"] for x in s) == {"isolated": 665, "mixed": 335}
    assert sum(x.meta["language"] is None for x in s) == 320
    assert sum(x.meta["languages"] == [] for x in s) == 320
    assert any(x.meta["languages"] == ["zh", "en"] for x in s)  # "zh|en" split
    assert {len(x.choices) for x in s} == {2, 3, 4, 5, 6}
    irregular = [x for x in s if x.meta["audio_path"] != f"./audio/{x.id}.wav"]
    assert len(irregular) == 46
    assert all("irregular audio_path (used as given)" in x.meta["quirks"] for x in irregular)
    for x in irregular:  # always the given audio_path, never one built from the id
        expected = os.path.normpath(os.path.join(shared_data, "mmar", x.meta["audio_path"]))
        assert x.audio == [expected]
    if version == "v2":
        assert lb.problems == [] and all(x.error is None for x in s)
        assert all("rubric" in x.meta and "cue" in x.meta for x in s)


def test_v1_answers_not_among_choices_are_reported(shared_data):
    """6 v1 answers are not verbatim among the choices; one differs only by a trailing space in
    the choice ("2040 "), the same answer, so 5 items carry a data warning. They are not failed:
    they run and are scored as the official script scores them, on the answer text."""
    v1 = MMAR().load(os.path.join(shared_data, "mmar", "MMAR-meta-v1.json"))
    v2 = {
        x.id: x for x in MMAR().load(os.path.join(shared_data, "mmar", "MMAR-meta.jsonl")).samples
    }
    assert not [x for x in v1.samples if x.error]
    bad = [x for x in v1.samples if x.meta.get("data_warning")]
    assert len(bad) == 5
    assert {p.sample_id for p in v1.problems} == {x.id for x in bad}
    assert all(p.field == "answer" for p in v1.problems)
    assert all(p.message.startswith("data warning: answer is not among") for p in v1.problems)
    assert all(v2[x.id].answer != x.answer and v2[x.id].answer in v2[x.id].choices for x in bad)
    spaced = next(x for x in v1.samples if x.id == "Txj3Qv1lJgs_00-00-00_00-00-16")
    assert spaced.error is None and spaced.choices[-1] == "2040 "  # kept as given


def test_folder_and_version_choice(shared_data):
    folder = os.path.join(shared_data, "mmar")
    assert MMAR().load(folder).version == "v2"
    lb = MMAR().load(folder, version="v1")
    assert lb.version == "v1" and lb.source.endswith("MMAR-meta-v1.json")


def test_jsonl_bad_lines_and_items(tmp_path):
    lines = [
        json.dumps(_item("a")),
        "{not json",
        json.dumps(_item("b", choices=["Piano", "Piano", "Violin"], language="zh|en")),
        "",
        json.dumps(_item("c", answer="Drums")),
        json.dumps(_item("d", audio_path="audio/odd name.wav")),
        json.dumps({k: v for k, v in _item("e").items() if k != "modality"}),
        json.dumps(_item("a", answer="Violin")),
    ]
    p = tmp_path / "MMAR-meta.jsonl"
    p.write_text("\n".join(lines) + "\n")
    lb = MMAR().load(str(tmp_path))
    assert lb.version == "unknown"
    by_id = {s.id: s for s in lb.samples}
    assert list(by_id) == ["a", "b", "c", "d", "e", "a#dup2"]
    assert by_id["a"].answer == "Piano" and by_id["a"].error is None
    assert by_id["b"].meta["duplicate_choices"] and by_id["b"].choices == [
        "Piano",
        "Piano",
        "Violin",
    ]
    assert by_id["b"].meta["languages"] == ["zh", "en"] and by_id["b"].error is None
    assert by_id["c"].error is None and by_id["c"].meta["data_warning"]  # runs, said
    assert by_id["d"].audio == [str(tmp_path / "audio" / "odd name.wav")]
    assert "modality: missing field" in by_id["e"].error
    assert "duplicate id" in by_id["a#dup2"].error
    msgs = [str(pr) for pr in lb.problems]
    assert (
        f"{p}: line 2: not valid JSON (Expecting property name enclosed in double quotes)" in msgs
    )
    assert any(m.startswith(f"{p}: sample c: field answer:") for m in msgs)


def test_parquet_copy_with_embedded_audio(shared_data, tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    raw = [json.loads(x) for x in open(os.path.join(shared_data, "mmar", "MMAR-meta.jsonl"))]
    keep = ("id", "question", "choices", "answer", "modality", "category", "sub-category")
    rows = [{k: r[k] for k in keep} for r in raw]
    for i, r in enumerate(rows):
        r["audio"] = {"bytes": f"RIFF{i}".encode(), "path": f"{r['id']}.wav"}
    (tmp_path / "hf" / "data").mkdir(parents=True)
    half = len(rows) // 2
    pq.write_table(pa.Table.from_pylist(rows[:half]), tmp_path / "hf/data/test-00000.parquet")
    pq.write_table(pa.Table.from_pylist(rows[half:]), tmp_path / "hf/data/test-00001.parquet")
    lb = MMAR().load(str(tmp_path / "hf"))
    assert lb.version == "v2" and len(lb.samples) == 1000 and lb.sha256 is None
    s = lb.samples[7]
    assert s.id == raw[7]["id"] and s.choices == raw[7]["choices"]
    assert Path(s.audio[0]).read_bytes() == b"RIFF7"
    # a copy's cache paths are not "irregular audio paths"
    assert not any("quirks" in x.meta for x in lb.samples)


def test_hub_snapshot_folder_and_default_data_dir(shared_data, tmp_path, monkeypatch):
    snap = tmp_path / "datasets--BoJack--MMAR" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    blob = tmp_path / "blob"
    blob.write_bytes(open(os.path.join(shared_data, "mmar", "MMAR-meta-v1.json"), "rb").read())
    (snap / "MMAR-meta.json").symlink_to(blob)  # the hub cache links snapshot files to blobs
    lb = MMAR().load(str(tmp_path / "datasets--BoJack--MMAR"))
    assert lb.version == "v1" and lb.sha256 == V1_SHA
    assert lb.samples[0].audio[0].startswith(str(snap))  # relative to the snapshot, not the blob
    monkeypatch.setenv("CAFE_DATA_DIR", shared_data)  # holds mmar/ and mmau/
    assert MMAR().load().version == "v2"
    monkeypatch.setenv("CAFE_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="pass --data PATH"):
        MMAR().load()


def test_a_duplicate_is_renamed_to_a_name_no_real_item_has(tmp_path):
    """ids x, x, x#dup2: the second x becomes x#dup3 (reported), the real x#dup2 still runs."""
    lines = [_item("x"), _item("x", answer="Violin"), _item("x#dup2"), _item("x")]
    p = tmp_path / "MMAR-meta.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    lb = MMAR().load(str(tmp_path))
    by_id = {s.id: s for s in lb.samples}
    assert list(by_id) == ["x", "x#dup3", "x#dup2", "x#dup4"]
    assert by_id["x#dup2"].error is None  # the real item, untouched
    assert "recorded as x#dup3" in by_id["x#dup3"].error
    said = [str(pr) for pr in lb.problems]
    assert any("duplicate id (item 2)" in m and "x#dup3" in m for m in said), said
