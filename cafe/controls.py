"""Listening controls: the same items with the audio taken away or made uninformative, so the
accuracy a model keeps under them is what it gets without listening.

- ``silence``: every clip replaced by digital silence of the same length;
- ``noise``: white noise at the clip's own level (same RMS) and length, seeded per item;
- ``shuffled``: each item gets another item's clip, by a seeded derangement that never hands
  an item its own clip (nor another copy of the same file);
- ``text-only``: no audio at all (the prompt alone).

Replacement clips are written once into a content-addressed folder (``$CAFE_CACHE/controls``
by default: silence by length, noise by source hash, seed and item), so every model and every
re-run reads the same files. A control is part of the run's identity (its name and seed)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cafe.records import Sample

CONTROLS = ("silence", "noise", "shuffled", "text-only")
DEFAULT_SEED = 0


def parse_controls(text: str | Sequence[str] | None) -> list[str]:
    """``"silence,noise"`` (or a list) -> validated names in the given order, no repeats."""
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    names = [n.strip() for n in items if n.strip()]
    if "all" in names:
        return list(CONTROLS)
    bad = [n for n in names if n not in CONTROLS]
    if bad:
        raise ValueError(f"unknown control(s) {', '.join(bad)}; choose from {', '.join(CONTROLS)}")
    return list(dict.fromkeys(names))


def default_folder() -> Path:
    from cafe.cache import DEFAULT_DIR

    return DEFAULT_DIR / "controls"


def _item_seed(seed: int, sample_id: str, k: int) -> int:
    digest = hashlib.sha256(f"{seed}:{sample_id}:{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _write_once(path: Path, audio: np.ndarray) -> str:
    from cafe.audio import write_wav

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.wav")
        write_wav(tmp, audio)
        tmp.replace(path)  # atomic: parallel runs never read half a file
    return str(path)


def silence_clip(path: str, folder: Path, sample_id: str) -> str:
    from cafe.audio import load_audio

    n = len(load_audio(path, sample_id=sample_id))
    return _write_once(folder / "silence" / f"{n}.wav", np.zeros(n, dtype=np.float32))


def noise_clip(path: str, folder: Path, sample_id: str, seed: int, k: int = 0) -> str:
    """White noise with the clip's RMS (the clip's level) and length, seeded per item."""
    from cafe.audio import file_sha256, load_audio

    x = load_audio(path, sample_id=sample_id)
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
    name = hashlib.sha256(f"{file_sha256(path)}:{seed}:{sample_id}:{k}".encode()).hexdigest()
    out = folder / "noise" / f"{name[:32]}.wav"
    if out.exists():
        return str(out)
    rng = np.random.default_rng(_item_seed(seed, sample_id, k))
    noise = rng.standard_normal(len(x)) * rms
    # a clip near full scale would clip its noise; keep the level and the length, cap peaks
    return _write_once(out, np.clip(noise, -1.0, 1.0).astype(np.float32))


def derangement(keys: Sequence[str], seed: int) -> list[int]:
    """source[i] for each position i: a seeded permutation in which no position receives a
    clip with its own key (items sharing one file share a key). Groups of equal keys are laid
    out contiguously in random order and the whole order is rotated by the largest group's
    size, so every item draws from another group; impossible only when one key holds more than
    half of the items (then as many items as possible get another key, the rest keep theirs)."""
    n = len(keys)
    if n < 2:
        return list(range(n))
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    blocks = list(groups.values())
    rng.shuffle(blocks)
    for b in blocks:
        rng.shuffle(b)
    order = [i for b in blocks for i in b]
    shift = max(len(b) for b in blocks)
    if shift >= n:  # one file for every item: nothing to swap in
        return list(range(n))
    source = [0] * n
    for pos, i in enumerate(order):
        source[i] = order[(pos + shift) % n]
    return source


def control_samples(
    samples: Sequence[Sample],
    control: str,
    seed: int = DEFAULT_SEED,
    folder: str | Path | None = None,
) -> list[Sample]:
    """The samples as the model sees them under ``control`` (ids, questions, choices and answers
    untouched; only ``audio``). Items that failed to load (Sample.error) pass through as they
    are; an unreadable clip makes its item failed, with the reason, like any bad input."""
    from cafe.records import InputError

    if control not in CONTROLS:
        raise ValueError(f"unknown control {control!r}; choose from {', '.join(CONTROLS)}")
    folder = Path(folder) if folder is not None else default_folder()
    usable = [s for s in samples if s.error is None and s.audio]
    if control == "text-only":
        return [dataclasses.replace(s, audio=[]) if s.error is None else s for s in samples]
    if control == "shuffled":
        keys = ["\n".join(s.audio) for s in usable]
        src = derangement(keys, seed)
        swapped = {s.id: usable[src[i]].audio for i, s in enumerate(usable)}
        return [dataclasses.replace(s, audio=list(swapped[s.id])) if s.id in swapped else s
                for s in samples]  # fmt: skip
    out = []
    for s in samples:
        if s.error is not None or not s.audio:
            out.append(s)
            continue
        try:
            if control == "silence":
                clips = [silence_clip(p, folder, s.id) for p in s.audio]
            else:
                clips = [noise_clip(p, folder, s.id, seed, k) for k, p in enumerate(s.audio)]
        except InputError as e:
            out.append(dataclasses.replace(s, error=str(e)))
            continue
        out.append(dataclasses.replace(s, audio=clips))
    return out
