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


def test_caption_clips_with_a_gemini_loopback_resumably(tmp_path, monkeypatch):
    import asyncio

    import numpy as np

    from cafe.audio import write_wav
    from cafe.cache import Cache
    from cafe.clients import make_client
    from cafe.judge.captions import caption_samples
    from cafe.testing.loopback import GeminiLoopback

    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "test-key")
    samples = []
    for i in range(3):
        wav = tmp_path / f"clip{i}.wav"
        write_wav(wav, np.sin(np.arange(1600) * (i + 1) / 10).astype("float32") * 0.1)
        samples.append(Sample(f"c{i}", "mmar", "1", "q", ["x"], "x", [str(wav)]))
    samples.append(Sample("gone", "mmar", "1", "q", ["x"], "x", [str(tmp_path / "nope.wav")]))
    out = tmp_path / "caps.jsonl"

    def reply(body):
        parts = body["contents"][0]["parts"]
        assert any("inline_data" in p or "inlineData" in p for p in parts)  # the audio itself
        assert body["generationConfig"]["temperature"] == 0
        return f"A tone sounds ({len(parts)} parts)."

    async def go(srv, cache):
        client = make_client("gemini", "gemini-3-pro", endpoints=[srv.url])
        try:
            return await caption_samples(samples, client, out, concurrency=2, cache=cache,
                                         progress=False)  # fmt: skip
        finally:
            await client.aclose()

    with GeminiLoopback(reply=reply) as srv:
        first = asyncio.run(go(srv, Cache(tmp_path / "c.sqlite")))
        assert first["written"] == 3 and len(srv.requests) == 3
        assert [p.sample_id for p in first["problems"]] == ["gone"]
        again = asyncio.run(go(srv, Cache(None)))  # resume: the file already has them
        assert again["written"] == 0 and again["skipped_done"] == 3 and len(srv.requests) == 3
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["sample_id"] for r in rows) == ["c0", "c1", "c2"]
    assert all(len(r["audio_sha256"]) == 64 and r["captioner"].startswith("gemini") for r in rows)
    assert load_captions(out)["c1"] == "A tone sounds (2 parts)."


def test_caption_command_on_synth_clips(tmp_path):
    from click.testing import CliRunner

    from cafe.benchmarks.synth.generator import generate
    from cafe.judge.cli import caption_command
    from cafe.testing.loopback import OpenAILoopback

    data = generate(tmp_path / "synth", n=2, seed=1)
    out = tmp_path / "caps.jsonl"

    def reply(body):
        parts = body["messages"][0]["content"]
        assert parts[0]["type"] == "input_audio" and parts[0]["input_audio"]["format"] == "wav"
        return "Two beeps, then silence."

    base = ["--bench", "synth", "--data", str(data), "--captioner", "openai-compatible",
            "--out", str(out), "--cache", str(tmp_path / "c.sqlite")]  # fmt: skip
    args = [*base, "--model", "omni"]
    with OpenAILoopback(reply=reply) as srv:
        res = CliRunner().invoke(caption_command, [*args, "--endpoint", srv.url])
        assert res.exit_code == 0, res.output
        assert "2 captions written" in res.output and len(srv.requests) == 2
    assert set(load_captions(out).values()) == {"Two beeps, then silence."}
    res = CliRunner().invoke(caption_command, base)
    assert res.exit_code != 0 and "--model is required" in res.output
