"""Audio paths from metadata stay inside the data folder: an absolute path, a ../ path or a
symlink leading out fails its item with one line (file, sample id, field), and no model, API or
captioner ever receives that file; --audio-root names another folder on purpose. Clips written
out of a Hugging Face copy never collide, whatever their ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cafe.audio import write_wav
from cafe.benchmarks import hf_copy
from cafe.benchmarks.mmar import MMAR
from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback


def _item(sid: str, audio: str) -> dict:
    return {
        "id": sid, "audio_path": audio, "question": "Which is first?", "choices": ["A", "B"],
        "answer": "A", "modality": "music", "category": "Perception Layer",
        "sub-category": "Temporal Analysis", "language": None, "source": "x", "url": "u",
        "timestamp": "0",
    }  # fmt: skip


def _tone(path: Path, hz: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(8000) / 16000
    write_wav(path, (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32))


@pytest.fixture
def data(tmp_path):
    """data/meta.jsonl with one good item and three that lead outside data/ to private/."""
    root, private = tmp_path / "data", tmp_path / "private"
    _tone(root / "audio" / "good.wav", 440)
    _tone(private / "secret.wav", 1234)
    (root / "audio" / "link.wav").symlink_to(private / "secret.wav")
    items = [
        _item("good", "./audio/good.wav"),
        _item("absolute", str(private / "secret.wav")),
        _item("dotdot", "../private/secret.wav"),
        _item("symlink", "./audio/link.wav"),
    ]
    meta = root / "meta.jsonl"
    meta.write_text("".join(json.dumps(i) + "\n" for i in items))
    return meta, private


def test_loader_fails_each_outside_path_with_one_line(data):
    meta, private = data
    lb = MMAR().load(str(meta))
    by_id = {s.id: s for s in lb.samples}
    assert by_id["good"].error is None and by_id["good"].audio[0].endswith("good.wav")
    bad = [p for p in lb.problems if p.sample_id in ("absolute", "dotdot", "symlink")]
    assert sorted(p.sample_id for p in bad) == ["absolute", "dotdot", "symlink"]
    for p in bad:
        assert p.file == str(meta) and p.field == "audio_path"
        assert "outside the data folder" in p.message and "--audio-root" in p.message
        assert "\n" not in str(p)
        assert by_id[p.sample_id].error and by_id[p.sample_id].audio == []


def test_no_model_or_captioner_receives_an_outside_file(data, tmp_path, monkeypatch):
    meta, private = data
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as srv:
        run = CliRunner().invoke(
            main,
            ["run", "--model", "openai-compatible", "-o", "model=m", "--endpoint", srv.url,
             "--bench", "mmar", "--data", str(meta), "--out", str(tmp_path / "run"),
             "--judge", "none", "--quiet"],
        )  # fmt: skip
        model_calls = srv.count
        cap = CliRunner().invoke(
            main,
            ["caption", "--bench", "mmar", "--data", str(meta), "--captioner",
             "openai-compatible", "--model", "c", "--endpoint", srv.url,
             "--out", str(tmp_path / "caps.jsonl")],
        )  # fmt: skip
    assert model_calls == 1 and srv.count == 2  # only the good clip, once each
    for out in (run.output, cap.output):
        for sid in ("absolute", "dotdot", "symlink"):
            line = next(x for x in out.splitlines() if f"[{sid}]" in x or f" {sid}" in x)
            assert str(meta) in line and "audio_path" in line and "outside the data folder" in line
        assert "Traceback" not in out
    lines = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    preds = [json.loads(x) for x in lines]
    assert run.exit_code == 1  # 3 of 4 failed: most of the run produced nothing
    assert {p["sample_id"]: p["parse_status"] for p in preds} == {
        "good": "ok", "absolute": "failed", "dotdot": "failed", "symlink": "failed"
    }  # fmt: skip


def test_audio_root_allows_a_folder_kept_elsewhere(data, tmp_path):
    meta, private = data
    lb = MMAR()
    lb.audio_root = str(private)
    loaded = lb.load(str(meta))
    by_id = {s.id: s for s in loaded.samples}
    assert by_id["absolute"].error is None
    assert by_id["absolute"].audio == [str(private / "secret.wav")]
    # relative paths are now relative to the root
    assert by_id["good"].audio == [str(private / "audio" / "good.wav")]


def test_hf_copy_ids_that_differ_only_in_unsafe_characters_get_their_own_clips(
    tmp_path, monkeypatch
):
    import io

    import pyarrow as pyarrow_mod
    import pyarrow.parquet as pq
    import soundfile as sf

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    ids = ["a/b", "a:b", "a b", "a_b"]
    rows = []
    for n, sid in enumerate(ids):
        buf = io.BytesIO()
        sf.write(buf, np.full(160, 0.01 * (n + 1), dtype=np.float32), 16000, format="WAV")
        rows.append({**_item(sid, ""), "audio": {"bytes": buf.getvalue(), "path": f"{n}.wav"}})
    for r in rows:
        del r["audio_path"]
    copy = tmp_path / "hf" / "data"
    copy.mkdir(parents=True)
    pq.write_table(pyarrow_mod.Table.from_pylist(rows), copy / "test-00000.parquet")
    got, _, _ = hf_copy.load_rows(tmp_path / "hf", "audio_path")
    paths = [r["audio_path"] for r in got]
    assert len(set(paths)) == 4
    for n, p in enumerate(paths):  # each id's own audio, not the first one's
        x, _ = sf.read(p, dtype="float32")
        assert np.allclose(x, 0.01 * (n + 1), atol=1e-4)
    assert all(os.path.basename(p).startswith("a_b-") for p in paths)  # readable + hash
