"""What the chat clients put on the wire for a clip: the 16 kHz mono 16-bit WAV of it, read
without a decode when the file already is one, and spliced into the JSON body unescaped."""

from __future__ import annotations

import base64
import io
import json
import struct

import numpy as np
import pytest
import soundfile as sf

import cafe.audio as audio
from cafe.audio import api_wav, load_audio, wav_bytes, write_wav
from cafe.clients import make_client
from cafe.clients.common import audio_b64
from cafe.clients.openai_compat import spliced_json
from cafe.records import InputError


def _tone(n: int = 8000, sr: int = 16000, channels: int = 1) -> np.ndarray:
    t = np.arange(n) / sr
    x = 0.4 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 97 * t)
    return np.stack([x] * channels, axis=1).astype(np.float32) if channels > 1 else x


def _decoded(path) -> bytes:
    return wav_bytes(load_audio(path))


def test_a_16k_mono_pcm16_wav_is_sent_as_its_samples_without_a_decode(tmp_path, monkeypatch):
    path = tmp_path / "a.wav"
    write_wav(path, _tone())
    expected = _decoded(path)  # decode + re-encode: what every clip was sent as before
    monkeypatch.setattr(audio, "load_audio", lambda *a, **k: pytest.fail("decoded"))
    got = api_wav(path)
    assert got == expected
    assert got[:4] == b"RIFF" and len(got) == 44 + 2 * 8000


def test_extra_chunks_are_dropped_and_the_samples_kept(tmp_path):
    """A LIST chunk (odd length, so padded) between fmt and data: the same bytes as decoding."""
    plain = tmp_path / "plain.wav"
    write_wav(plain, _tone())
    raw = plain.read_bytes()
    fmt, data = raw[12:36], raw[36:]
    info = b"INFOISFT" + struct.pack("<I", 3) + b"ab\x00"  # 3 bytes: one pad byte follows
    chunk = b"LIST" + struct.pack("<I", len(info)) + info + b"\x00"
    body = b"WAVE" + fmt + chunk + data
    tagged = tmp_path / "tagged.wav"
    tagged.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    assert api_wav(tagged) == _decoded(tagged) == raw


def test_an_extensible_header_gives_the_same_bytes(tmp_path):
    """WAVE_FORMAT_EXTENSIBLE around 16 kHz mono PCM_16 (Python 3.11's wave refuses it, so it is
    decoded; a later wave may read it directly): either way the plain 44-byte form is sent."""
    path = tmp_path / "x.wav"
    sf.write(
        path,
        _tone(),
        16000,
        subtype="PCM_16",
        format="WAV",
    )
    plain = path.read_bytes()
    sf.write(path, _tone(), 16000, subtype="PCM_16", format="WAVEX")
    assert path.read_bytes() != plain
    assert api_wav(path) == _decoded(path) == plain


@pytest.mark.parametrize("kind", ["stereo", "44k", "float", "pcm24", "wavex", "flac", "short-data"])
def test_every_other_file_is_decoded_and_reencoded(kind, tmp_path, monkeypatch):
    path = tmp_path / f"{kind}.{'flac' if kind == 'flac' else 'wav'}"
    if kind == "stereo":
        sf.write(path, _tone(channels=2), 16000, subtype="PCM_16")
    elif kind == "44k":
        sf.write(path, _tone(22050, 44100), 44100, subtype="PCM_16")
    elif kind == "float":
        sf.write(path, _tone(), 16000, subtype="FLOAT")
    elif kind == "pcm24":
        sf.write(path, _tone(), 16000, subtype="PCM_24")
    elif kind == "flac":
        sf.write(path, _tone(), 16000, format="FLAC")
    else:  # the data chunk says 8000 frames, the file holds 6000
        write_wav(path, _tone())
        path.write_bytes(path.read_bytes()[: 44 + 2 * 6000])
    calls = []
    real = audio.load_audio

    def spy(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(audio, "load_audio", spy)
    got = api_wav(path)
    assert calls == [path]
    assert got == wav_bytes(real(path))
    x, sr = sf.read(io.BytesIO(got), dtype="float32")
    assert sr == 16000 and x.ndim == 1


@pytest.mark.parametrize("kind", ["missing", "empty", "no-samples", "too-long", "not-audio"])
def test_bad_files_fail_as_the_decoder_says(kind, tmp_path, monkeypatch):
    path = tmp_path / "bad.wav"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "no-samples":
        write_wav(path, np.zeros(0, dtype=np.float32))
    elif kind == "too-long":
        write_wav(path, _tone(16000))
        monkeypatch.setenv("CAFE_MAX_AUDIO_S", "0.5")
    elif kind == "not-audio":
        path.write_text("RIFF, but only in name")
    with pytest.raises(InputError) as decoded:
        load_audio(path)
    with pytest.raises(InputError) as sent:
        api_wav(path)
    assert str(sent.value) == str(decoded.value)
    assert str(path) in str(sent.value)


def test_clips_are_spliced_into_the_body_unchanged(tmp_path):
    """Two clips and a question that spells a placeholder: the spliced body parses to exactly
    the body built inline, the question untouched."""
    a, b = tmp_path / "a.wav", tmp_path / "b.wav"
    write_wav(a, _tone())
    write_wav(b, _tone(4000))
    question = 'Which is louder? "cafe-audio-0123456789abcdef" \\ \u00e9 \n'
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "audio", "path": str(a)}, {"type": "text", "text": question},
            {"type": "audio", "path": str(b)},
        ]},
    ]  # fmt: skip
    c = make_client("openai-compatible", "m", ["http://127.0.0.1:1/v1"])
    inline = c.body(messages, 0.0, 64, 7, {})
    blobs: dict[str, bytes] = {}
    placeholders = c.body(messages, 0.0, 64, 7, {}, blobs)
    assert len(blobs) == 2 and all(t not in question for t in blobs)
    sent = json.loads(spliced_json(placeholders, blobs))
    assert sent == inline
    parts = sent["messages"][1]["content"]
    assert parts[1] == {"type": "text", "text": question}
    assert [p["input_audio"]["data"] for p in (parts[0], parts[2])] == [
        audio_b64(str(a)),
        audio_b64(str(b)),
    ]
    assert base64.b64decode(parts[2]["input_audio"]["data"]) == api_wav(b)


def test_only_a_large_clip_is_encoded_in_a_worker_thread(tmp_path, monkeypatch):
    import asyncio
    import threading

    import cafe.clients.common as common

    small, large = tmp_path / "small.wav", tmp_path / "large.wav"
    write_wav(small, _tone(1000))
    write_wav(large, _tone(16000))
    monkeypatch.setattr(common, "OFFLOOP_AUDIO_BYTES", 10_000)  # between the two files' sizes
    threads = {}
    real = common.audio_wav

    def spy(path):
        threads[path] = threading.get_ident()
        return real(path)

    monkeypatch.setattr(common, "audio_wav", spy)

    async def both():
        return threading.get_ident(), [await common.audio_wav_async(str(p)) for p in (small, large)]

    loop_thread, wavs = asyncio.run(both())
    assert wavs == [api_wav(small), api_wav(large)]
    assert threads[str(small)] == loop_thread and threads[str(large)] != loop_thread


def test_a_body_that_lost_its_clip_is_never_sent(tmp_path):
    """extra_body replacing the messages drops the clip's placeholder: the call fails before
    anything is sent, saying why, instead of posting a question without its audio."""
    from cafe.execution import run_sync
    from cafe.testing.loopback import OpenAILoopback

    a = tmp_path / "a.wav"
    write_wav(a, _tone())
    messages = [{"role": "user", "content": [{"type": "audio", "path": str(a)},
                                             {"type": "text", "text": "What is it?"}]}]  # fmt: skip
    with OpenAILoopback() as srv:
        c = make_client("openai-compatible", "m", [srv.url],
                        extra_body={"messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        reply = run_sync(c.achat(messages))
        assert srv.count == 0
    assert reply.text is None and "placeholder is missing" in reply.error
