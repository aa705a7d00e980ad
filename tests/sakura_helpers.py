"""Hand-made SAKURA-shaped folders (``data/<Track>/metadata.json`` plus generated clips) and a
copy of the real metadata with a placeholder clip per key, for the SAKURA tests."""

from __future__ import annotations

import json
import os
import shutil
import wave
from pathlib import Path

import numpy as np

from cafe.audio import write_wav

#: track -> clip stem -> (attribute, single (instruction, answer), multi (instruction, answer))
CLIPS = {
    "Animal": {
        "a1": ("dog", ("Which animal is heard [a1s]? (a) dog (b) cat (c) cow (d) owl", "(a) dog"),
               ("What does the animal have [a1m]? (a) Feathers (b) Scales (c) Claws (d) Horns",
                "(c) Claws")),
        "a2": ("cow", ("Which animal is heard [a2s]? (a) dog (b) cat (c) cow (d) owl", "(c) cow"),
               ("Where does the animal live [a2m]? (a) sea (b) farm (c) sky (d) cave",
                "(b) farm")),
    },
    "Gender": {
        "g1": ("female", ("Please identify the gender [g1s]. (a) Female (b) Male", " (a) Female"),
               ("Which term of address fits [g1m]? (a) Ms. (b) Mr.", "(a) Ms.")),
    },
}  # fmt: skip


def write_folder(root: Path, clips: dict = CLIPS) -> Path:
    """The official layout with a distinct short tone per clip; returns the dataset root."""
    for t, (track, items) in enumerate(clips.items()):
        meta = {}
        for i, (stem, (label, single, multi)) in enumerate(items.items()):
            key = f"data/{track}/audio/{stem}.wav"
            meta[key] = {"attribute_label": label, "single_instruction": single[0],
                         "single_answer": single[1], "multi_instruction": multi[0],
                         "multi_answer": multi[1]}  # fmt: skip
            wav = root / key
            wav.parent.mkdir(parents=True, exist_ok=True)
            freq = 220.0 * (1 + t + i)
            tone = 0.1 * np.sin(2 * np.pi * freq * np.arange(1600) / 16000)
            write_wav(wav, tone.astype("float32"))
        (root / "data" / track / "metadata.json").write_text(json.dumps(meta, indent=2))
    return root


def placeholder_copy(real: Path, root: Path) -> Path:
    """The real metadata (``real``: the folder holding the track folders) in the official layout
    under ``root``, every key a hard link to one silent clip (the real audio is not here)."""
    silence = root / "silence.wav"
    root.mkdir(parents=True, exist_ok=True)
    with wave.open(str(silence), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 1600)
    for track in ("Animal", "Emotion", "Gender", "Language"):
        src = real / track / "metadata.json"
        (root / "data" / track / "audio").mkdir(parents=True, exist_ok=True)
        shutil.copy(src, root / "data" / track / "metadata.json")
        for key in json.loads(src.read_text()):
            target = root / key
            if not target.exists():
                os.link(silence, target)  # a link inside the folder: contained, like a file
    return root
