"""Listening controls: the same items with the audio taken away or made uninformative, so the
accuracy a model keeps under them is what it gets without listening.

- ``silence``: every clip replaced by digital silence of the same length;
- ``noise``: white noise at the clip's own level (same RMS) and length, seeded per item;
- ``shuffled``: each item gets another item's clip, by a seeded derangement that never hands
  an item its own clip (nor another copy of the same file);
- ``text-only``: no audio at all (the prompt alone);
- ``caption``: caption-only (audio necessity, cafe.robustness.necessity): no audio, a caption of
  the clip in front of the question.

Replacement clips are written once into a content-addressed folder (``$CAFE_CACHE/controls``
by default: silence by length, noise by source hash, seed and item), so every model and every
re-run reads the same files. A control is part of the run's identity (its name and seed)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cafe.benchmarks.choice_order import permuted
from cafe.benchmarks.ids import selected_ids
from cafe.records import Sample
from cafe.registry import Registry

CONTROLS = ("silence", "noise", "shuffled", "text-only")
DEFAULT_SEED = 0
#: the line in front of the question under caption-only
CAPTION_LEAD = "Caption of the audio clip (given instead of the audio): "


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
    """$CAFE_CACHE/controls, read at call time (cafe.cache.cache_file)."""
    from cafe.cache import cache_file

    return cache_file("controls")


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


def _source_key(path: str, sample_id: str) -> str:
    """The clip file's identity from one stat (absolute path, size, mtime): a changed file gets
    new control clips; an unchanged one is looked up without opening it."""
    try:
        st = os.stat(path)
    except OSError:
        from cafe.audio import check_audio

        check_audio(path, sample_id=sample_id)  # the InputError naming file, item and field
        raise
    ident = f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def decoded_length(path: str, sample_id: str) -> int:
    """Samples at 16 kHz that load_audio would return, from the header alone (polyphase
    resampling gives ceil(n * 16000 / rate) samples)."""
    from cafe.audio import TARGET_SR, audio_info

    info = audio_info(path, sample_id=sample_id)  # missing / empty / not audio: an InputError
    if info.samplerate == TARGET_SR:
        return int(info.frames)
    g = math.gcd(int(info.samplerate), TARGET_SR)
    up, down = TARGET_SR // g, int(info.samplerate) // g
    return -(-int(info.frames) * up // down)


def _link(link: Path, target: Path) -> str:
    """``link`` -> ``target`` (a symlink, so silence is stored once per length), atomically."""
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f"{link.stem}.{os.getpid()}.{threading.get_ident()}.tmp.wav")
        try:
            tmp.symlink_to(os.path.relpath(target, link.parent))
        except OSError:  # no symlinks here (some filesystems): a copy
            shutil.copyfile(target, tmp)
        tmp.replace(link)
    return str(link)


def silence_clip(path: str, folder: Path, sample_id: str) -> str:
    """Silence as long as the clip. Found again by the source file's identity (one stat), so a
    second run opens no clip; stored once per length."""
    link = folder / "silence" / "by-source" / f"{_source_key(path, sample_id)}.wav"
    if link.exists():
        return str(link)
    n = decoded_length(path, sample_id)
    target = folder / "silence" / f"{n}.wav"
    _write_once(target, np.zeros(n, dtype=np.float32))
    return _link(link, target)


def noise_clip(path: str, folder: Path, sample_id: str, seed: int, k: int = 0) -> str:
    """White noise with the clip's RMS (the clip's level) and length, seeded per item."""
    from cafe.audio import load_audio

    key = _source_key(path, sample_id)
    name = hashlib.sha256(f"{key}:{seed}:{sample_id}:{k}".encode()).hexdigest()
    out = folder / "noise" / f"{name[:32]}.wav"
    if out.exists():  # made before: no decode
        return str(out)
    x = load_audio(path, sample_id=sample_id)
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
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
    pool: Sequence[Sample] | None = None,
) -> list[Sample]:
    """The samples as the model sees them under ``control``: ids, questions, choices and
    answers untouched; ``audio`` replaced; events and caption set to what the model actually
    got (for judges). Items that failed to load (Sample.error) pass through as they are; an
    unreadable clip makes its item failed, with the reason, like any bad input.

    ``pool``: the whole benchmark, when ``samples`` is a selection of it (--limit): the
    derangement is drawn over the pool, so an item gets the same clip whatever the selection."""
    if control not in CONTROLS:
        raise ValueError(f"unknown control {control!r}; choose from {', '.join(CONTROLS)}")
    drawn = dict(zip((s.id for s in pool or samples),
                     _sources(pool or samples, control, seed), strict=True))  # fmt: skip
    sources = [drawn.get(s.id) for s in samples]
    out = _replace_audio(samples, control, seed, sources, folder)
    return [_with_truth(s, control, src) for s, src in zip(out, sources, strict=True)]


#: what the model got, for judges: under these controls no sound event exists
SILENT_TRUTH = {
    "silence": "The clip is digital silence: there is no sound in it at all.",
    "noise": "The clip is steady white noise: there is no sound event in it.",
    "text-only": "No audio was given: there is no sound at all.",
}


def _sources(samples: Sequence[Sample], control: str, seed: int) -> list[Sample | None]:
    """Per sample, the sample whose clip it gets under ``shuffled`` (None otherwise)."""
    if control != "shuffled":
        return [None] * len(samples)
    usable = [s for s in samples if s.error is None and s.audio]
    src = derangement(["\n".join(s.audio) for s in usable], seed)
    by_id = {s.id: usable[src[i]] for i, s in enumerate(usable)}
    return [by_id.get(s.id) for s in samples]


def _replace_audio(
    samples: Sequence[Sample],
    control: str,
    seed: int,
    sources: Sequence[Sample | None],
    folder: str | Path | None,
) -> list[Sample]:
    from cafe.records import InputError

    root = Path(folder) if folder is not None else default_folder()
    out = []
    for s, source in zip(samples, sources, strict=True):
        if s.error is not None or not s.audio:
            out.append(s)
            continue
        if control == "text-only":
            out.append(dataclasses.replace(s, audio=[]))
            continue
        if control == "shuffled":
            out.append(s if source is None else dataclasses.replace(s, audio=list(source.audio)))
            continue
        try:
            if control == "silence":
                clips = [silence_clip(p, root, s.id) for p in s.audio]
            else:
                clips = [noise_clip(p, root, s.id, seed, k) for k, p in enumerate(s.audio)]
        except InputError as e:
            out.append(dataclasses.replace(s, error=str(e)))
            continue
        out.append(dataclasses.replace(s, audio=clips))
    return out


def _with_truth(s: Sample, control: str, source: Sample | None) -> Sample:
    """The ground truth a judge must use under the control: no event under silence, noise and
    text-only (every event the model reports is then a hallucination); the played clip's
    events and caption under shuffled (none of them required by this question)."""
    from cafe.judge.rule import NO_SOUND

    if s.error is not None:
        return s
    if control in SILENT_TRUTH:
        return dataclasses.replace(
            s, events=[] if s.events is not None else None, caption=SILENT_TRUTH[control],
            meta={**s.meta, NO_SOUND: True},
        )  # fmt: skip
    if source is None:
        return s
    events = None
    if source.events is not None:
        events = [dataclasses.replace(e, required=False) for e in source.events]
    meta = {**s.meta, NO_SOUND: not events} if events is not None else s.meta
    return dataclasses.replace(s, events=events, caption=source.caption, meta=meta)


def control_captions(
    samples: Sequence[Sample], control: str, seed: int, captions: dict[str, str]
) -> dict[str, str]:
    """A captions map (sample id -> caption) for judging a control run whose real run was
    judged with ``captions``: the played clip's caption, or the silent truth."""
    out = {}
    for s, source in zip(samples, _sources(samples, control, seed), strict=True):
        if control in SILENT_TRUTH:
            out[s.id] = SILENT_TRUTH[control]
        elif source is not None and source.id in captions:
            out[s.id] = captions[source.id]
    return out


def caption_only_samples(
    samples: Sequence[Sample], captions_file: str | Path | None = None
) -> tuple[list[Sample], str]:
    """The items as caption-only shows them: no audio, the caption in front of the question;
    an item without a caption fails with the reason. Returns them and the caption source's name
    (``benchmark`` or ``<file>:<sha256[:12]>``), which is part of the run's identity."""
    mapping: dict[str, str] | None = None
    source = "benchmark reference captions"
    if captions_file is not None:
        from cafe.judge.captions import load_captions

        mapping = load_captions(captions_file)
        digest = hashlib.sha256(json.dumps(mapping, sort_keys=True).encode()).hexdigest()
        source = f"{Path(captions_file).name}:{digest[:12]}"
    out = []
    for s in samples:
        if s.error is not None:
            out.append(s)
            continue
        cap = mapping.get(s.id) if mapping is not None else s.caption
        if not cap:
            where = Path(captions_file).name if captions_file else "the benchmark"
            out.append(dataclasses.replace(s, audio=[], error=(
                f"{where}: sample {s.id}: field caption: no caption for this item (caption-only "
                "needs one: pass --captions FILE from `cafe caption`)")))  # fmt: skip
            continue
        out.append(dataclasses.replace(s, audio=[], question=f"{CAPTION_LEAD}{cap}\n{s.question}"))
    return out, source


# ------------------------------------------------------------- the runner's sample transforms


@dataclass(frozen=True)
class SampleTransform:
    """How the runner changes a run's items when a RunRequest field is set: ``apply(request,
    samples, pool)`` -> (the items, that field's value in the run's identity; None: none).
    ``selects``: it picks items from the pool (applied before those that change items)."""

    apply: Callable[[Any, list[Sample], list[Sample]], tuple[list[Sample], Any]]
    selects: bool = False


def controlled(request: Any, samples: list[Sample], pool: list[Sample]) -> tuple[list, Any]:
    """The sample transform of RunRequest.control (and its seed, a caption-only's captions)."""
    control, seed = request.control, request.control_seed
    if control == "caption":
        samples, source = caption_only_samples(samples, request.control_captions)
        return samples, {"name": control, "seed": seed, "captions": source}
    return control_samples(samples, control, seed, pool=pool), {"name": control, "seed": seed}


#: RunRequest field -> its transform; the RunSpec field of the same name holds its identity
SAMPLE_TRANSFORMS: Registry[SampleTransform] = Registry("sample transform", base=SampleTransform)
SAMPLE_TRANSFORMS.add("ids", SampleTransform(selected_ids, selects=True))
SAMPLE_TRANSFORMS.add("control", SampleTransform(controlled))
SAMPLE_TRANSFORMS.add("permutation", SampleTransform(permuted))


def transform_samples(
    request: Any, samples: list[Sample], pool: list[Sample]
) -> tuple[list[Sample], dict[str, Any]]:
    """Each registered transform whose field ``request`` sets (selections first) -> the items
    and the identity by field. Bad input (an unknown id, a missing caption file): ValueError."""
    transforms = SAMPLE_TRANSFORMS.names()
    identity = {}
    for name in sorted(transforms, key=lambda n: not SAMPLE_TRANSFORMS.get(n).selects):
        if getattr(request, name, None):
            samples, value = SAMPLE_TRANSFORMS.get(name).apply(request, samples, pool)
            if value is not None:
                identity[name] = value
    return samples, identity
