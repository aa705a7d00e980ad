"""Audio in one place: decode (any rate, any channel count) to 16 kHz mono float32, validate,
content-hash and encode as WAV bytes for APIs. Errors are InputErrors naming the file."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import wave
from collections.abc import Callable
from functools import lru_cache
from math import gcd
from pathlib import Path
from typing import TypeVar

import numpy as np

from cafe.records import InputError, Problem

TARGET_SR = 16_000
#: longest clip decoded, in seconds (CAFE_MAX_AUDIO_S overrides): a two-hour file in a
#: benchmark of seconds-long clips is a mistake, and decoding it would take gigabytes
DEFAULT_MAX_AUDIO_S = 1800.0


def max_audio_s() -> float:
    try:
        return float(os.environ.get("CAFE_MAX_AUDIO_S") or DEFAULT_MAX_AUDIO_S)
    except ValueError:
        return DEFAULT_MAX_AUDIO_S


def _check_info(p: Path, info: object, sample_id: str | None) -> None:
    """Header facts every reader checks before decoding: frames, a real rate, a sane length."""
    frames, rate = getattr(info, "frames", 0), getattr(info, "samplerate", 0)
    if rate <= 0:
        raise _problem(p, f"sample rate is {rate} Hz", sample_id)
    if frames <= 0:
        raise _problem(p, "audio has no samples", sample_id)
    seconds, limit = frames / rate, max_audio_s()
    if seconds > limit:
        raise _problem(
            p,
            f"audio is {seconds:.0f} s long, over the {limit:.0f} s limit (set CAFE_MAX_AUDIO_S "
            "to allow longer clips)",
            sample_id,
        )


T = TypeVar("T")


def _problem(path: str | Path, message: str, sample_id: str | None) -> InputError:
    return InputError(Problem(file=str(path), sample_id=sample_id, field="audio", message=message))


def _read(p: Path, sample_id: str | None, read: Callable[[str], T]) -> T:
    """``read(file)`` on a file that exists and is not empty; missing or empty files, and any
    failure of ``read`` itself, raise the matching InputError."""
    if not p.exists():
        raise _problem(p, "file not found", sample_id)
    if p.stat().st_size == 0:
        raise _problem(p, "file is empty", sample_id)
    try:
        return read(str(p))
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError on bad content
        raise _problem(p, f"cannot decode audio ({str(e).splitlines()[0]})", sample_id) from None


def load_audio(
    path: str | Path, sr: int = TARGET_SR, *, sample_id: str | None = None
) -> np.ndarray:
    """Decode to mono float32 at ``sr``. Missing, empty, corrupt or non-audio files raise
    InputError; other rates are resampled (polyphase) and channels averaged."""
    import soundfile as sf

    p = Path(path)
    _check_info(p, _read(p, sample_id, sf.info), sample_id)  # before decoding a byte
    data, file_sr = _read(p, sample_id, lambda f: sf.read(f, dtype="float32", always_2d=True))
    if data.shape[0] == 0:
        raise _problem(p, "audio has no samples", sample_id)
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1)  # no copy for mono files
    if file_sr != sr:
        mono = resample(mono, file_sr, sr)
    if not np.isfinite(mono).all():
        raise _problem(p, "audio contains NaN or inf samples", sample_id)
    return mono.astype(np.float32, copy=False)


@lru_cache(maxsize=64)
def _realpath(root: str) -> str:
    return os.path.realpath(root)


def contained_audio(
    rel: str, roots: list[Path], *, file: str, sample_id: str | None, field: str
) -> tuple[str | None, Problem | None]:
    """The absolute path of a metadata audio path (relative to ``roots[0]``), or a Problem when
    it resolves, after symlinks, outside every root: an absolute or ``../`` path in a metadata
    file must not make a model, an API upload or a captioner read an arbitrary file."""
    if not isinstance(rel, str) or not rel:  # a metadata row's value, unchecked until here
        shown = f"{type(rel).__name__} {str(rel)[:40]!r}"
        msg = f"an audio path must be a non-empty string, not {shown}"
        return None, Problem(file=file, sample_id=sample_id, field=field, message=msg)
    base = roots[0]
    p = os.path.expanduser(rel.replace("\\", "/"))
    given = os.path.normpath(p if os.path.isabs(p) else os.path.join(base, p))
    full = os.path.realpath(given)
    for root in roots:
        real = _realpath(str(root))
        if full == real or full.startswith(real.rstrip(os.sep) + os.sep):
            return given, None  # the path as written (normalised); its target was checked
    msg = (
        f"audio path {rel!r} resolves to {full}, outside the data folder {_realpath(str(base))}; "
        "keep audio under it or pass --audio-root DIR"
    )
    return None, Problem(file=file, sample_id=sample_id, field=field, message=msg)


def audio_state(paths: list[str]) -> str:
    """Size and mtime of each clip ("missing" where absent): a failed clip is retried when this
    changes, i.e. once the user adds or repairs the file."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            out.append("missing")
    return "|".join(out)


def check_audio(path: str | Path, *, sample_id: str | None = None) -> None:
    """Cheap validation before a model call (header only, no decode): missing, empty, non-audio
    or corrupt-header files and files without samples raise the same InputErrors as load_audio.
    The adapter's own decode still catches damage past the header."""
    if not _plain_pcm_wav(path):  # everything else, and every fault, through libsndfile
        audio_info(path, sample_id=sample_id)


def _plain_pcm_wav(path: str | Path) -> bool:
    """Whether ``path`` is a PCM WAV whose header passes _check_info's checks and whose file
    holds every frame it declares: read by Python's wave module, a third of libsndfile's
    header read (once per item on the run path); any doubt is False."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device: never opened here
            return False
        with wave.open(str(path), "rb") as w:
            channels, width, rate, n = (w.getnchannels(), w.getsampwidth(), w.getframerate(),
                                        w.getnframes())  # fmt: skip
    except (wave.Error, EOFError, OSError, ValueError):
        return False
    return rate > 0 and 0 < n <= rate * max_audio_s() and st.st_size >= 44 + n * channels * width


def audio_info(path: str | Path, *, sample_id: str | None = None):  # -> soundfile._SoundFileInfo
    """The file's header (frames, samplerate, channels), validated as check_audio says."""
    import soundfile as sf

    p = Path(path)
    info = _read(p, sample_id, sf.info)
    _check_info(p, info, sample_id)
    return info


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    from scipy.signal import resample_poly

    g = gcd(int(sr_in), int(sr_out))
    return resample_poly(x, sr_out // g, sr_in // g).astype(np.float32)


def write_wav(path: str | Path, audio: np.ndarray, sr: int = TARGET_SR) -> None:
    """16-bit PCM WAV, encoded in memory and written by Python: a full disk or a read-only
    folder is an OSError naming the file (libsndfile's own writes say only "System error")."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.asarray(audio, dtype=np.float32), sr, subtype="PCM_16", format="WAV")
    try:
        Path(path).write_bytes(buf.getvalue())
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def api_wav(path: str | Path, *, sample_id: str | None = None) -> bytes:
    """A clip as 16 kHz mono 16-bit PCM WAV bytes: the one audio encoding sent to every API. A
    file already in that form keeps its samples under a fresh header, without a decode: the same
    bytes as decoding and re-encoding it (16-bit PCM round-trips exactly through float32) for a
    fraction of the CPU. Anything else decodes (load_audio, with its checks and errors) and is
    re-encoded."""
    frames = _pcm16_mono_frames(Path(path))
    if frames is None:
        return wav_bytes(load_audio(path, sample_id=sample_id))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:  # the 44-byte header soundfile writes for PCM_16 too
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(TARGET_SR)
        w.writeframes(frames)
    return buf.getvalue()


def _pcm16_mono_frames(p: Path) -> bytes | None:
    """The sample bytes of a well-formed 16 kHz mono 16-bit PCM WAV within the length limit, or
    None for any other file (other formats, damage, a short data chunk, a missing file): those
    take load_audio's path, which says what is wrong with them."""
    try:
        with wave.open(str(p), "rb") as w:
            shape = (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getcomptype())
            n = w.getnframes()
            if shape != (1, 2, TARGET_SR, "NONE") or n <= 0 or n / TARGET_SR > max_audio_s():
                return None
            frames = w.readframes(n)
    except (wave.Error, EOFError, OSError):
        return None
    return frames if len(frames) == 2 * n else None


def wav_bytes(audio: np.ndarray, sr: int = TARGET_SR) -> bytes:
    """16-bit PCM WAV bytes (what OpenAI input_audio and Gemini inline_data take)."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.asarray(audio, dtype=np.float32), sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@lru_cache(maxsize=65536)
def _hash_cached(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    """Content hash (memoised on path, size and mtime): audio identity in cache keys."""
    st = os.stat(path)
    return _hash_cached(str(path), st.st_size, st.st_mtime_ns)
