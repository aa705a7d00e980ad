"""Caption files: import, last-line-wins, broken lines named by file, line and field."""

from __future__ import annotations

import json

import pytest

from cafe.judge.captions import load_captions
from cafe.judge.pipeline import load_caption_map
from cafe.records import InputError, Sample


def test_caption_files_load_and_override_sample_captions(tmp_path):
    p = tmp_path / "caps.jsonl"
    rows = [
        {"sample_id": "a", "audio_sha256": "x", "caption": "A dog barks.", "captioner": "g"},
        {"sample_id": "b", "audio_sha256": "y", "caption": "Rain falls.", "captioner": "g"},
        {"sample_id": "a", "audio_sha256": "x", "caption": "A dog barks twice.", "captioner": "g"},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"sample_id": "c", "cap')  # torn
    assert load_captions(p) == {"a": "A dog barks twice.", "b": "Rain falls."}
    j = tmp_path / "caps.json"
    j.write_text(json.dumps({"z": "Birds sing."}))
    assert load_captions(j) == {"z": "Birds sing."}
    samples = [
        Sample("a", "b", "v", "q", ["x"], "x", [], caption="own"),
        Sample("q", "b", "v", "q", ["x"], "x", [], caption="kept"),
    ]
    assert load_caption_map(samples, p) == {"a": "A dog barks twice.", "q": "kept",
                                            "b": "Rain falls."}  # fmt: skip


def test_broken_caption_line_names_file_line_and_field(tmp_path):
    p = tmp_path / "caps.jsonl"
    p.write_text(json.dumps({"sample_id": "a", "caption": ""}) + "\n")
    with pytest.raises(InputError, match=r"caps.jsonl:1: sample a: field caption"):
        load_captions(p)
