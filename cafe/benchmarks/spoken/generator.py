"""Deterministic generator of the spoken benchmark: short English sentences spoken by espeak-ng,
each with one multiple-choice question about a fact that was said (who, how many, what, where,
which day). The ground truth is exact: the spoken sentence is the caption and its facts are the
events. The same (n, seed, GENERATOR_VERSION, espeak-ng version) gives byte-identical files.

Item i asks about slot ``i % 5`` and draws its sentence from its own generator seeded with
(seed, i), so items are independent of n (the first 20 of n=40 equal n=20)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cafe.benchmarks.generated import info_name, jsonl_name, record_head, write_set
from cafe.errors import CafeError
from cafe.records import Event

GENERATOR_VERSION = "1"
JSONL_NAME = jsonl_name("spoken")
INFO_NAME = info_name("spoken")
#: clear American English, slow, with a gap between words (the settings the cascade was tried at)
VOICE = ("-v", "en-us", "-s", "130", "-g", "8")
#: seconds espeak-ng may take for one sentence (it speaks one in well under a second)
ESPEAK_TIMEOUT_S = 60.0

NAMES = ["Maria", "David", "Sarah", "Thomas", "Emma", "Peter", "Laura", "James", "Anna", "Robert"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine"]
OBJECTS = [
    "lemons", "candles", "books", "chairs", "bottles",
    "tickets", "blankets", "carrots", "pencils", "flowers",
]  # fmt: skip
PLACES = [
    "bakery", "station", "library", "harbor", "museum",
    "garden", "hospital", "market", "school", "airport",
]  # fmt: skip
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

#: slot -> (vocabulary, question); the question names no other slot, so the question alone
#: carries no hint of the answer
SLOTS: dict[str, tuple[list[str], str]] = {
    "who": (NAMES, "Who is the person named in the spoken sentence?"),
    "count": (NUMBERS, "What number is said in the spoken sentence?"),
    "what": (OBJECTS, "Which objects does the speaker mention?"),
    "where": (PLACES, "Which place does the speaker mention?"),
    "when": (DAYS, "Which day of the week does the speaker mention?"),
}
DIMENSIONS = list(SLOTS)
TEMPLATES = [
    "{who} bought {count} {what} at the {where} on {when}.",
    "On {when}, {who} carried {count} {what} to the {where}.",
    "{who} found {count} {what} near the {where} last {when}.",
    "Last {when}, {who} sold {count} {what} outside the {where}.",
]


class EspeakMissing(CafeError):
    """espeak-ng is not installed: the spoken benchmark cannot speak its sentences."""


def espeak_version() -> str:
    """espeak-ng's version ("1.51"), or EspeakMissing naming the package to install."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise EspeakMissing(
            "the spoken benchmark needs espeak-ng to speak its sentences, and it is not on PATH: "
            "install the espeak-ng package (apt-get install espeak-ng; brew install espeak-ng)"
        )
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False,
                             timeout=ESPEAK_TIMEOUT_S).stdout  # fmt: skip
    except subprocess.TimeoutExpired:
        raise CafeError(f"{exe} --version did not answer in {ESPEAK_TIMEOUT_S:g} s") from None
    found = re.search(r"text-to-speech:\s*(\S+)", out)
    return found.group(1) if found else "unknown"


def speak(text: str, path: Path) -> None:
    """``text`` spoken by espeak-ng into the WAV ``path`` (22.05 kHz, 16-bit mono)."""
    espeak_version()
    try:
        done = subprocess.run(["espeak-ng", *VOICE, "-w", str(path), text], capture_output=True,
                              text=True, check=False, timeout=ESPEAK_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise CafeError(
            f"espeak-ng did not speak {text!r} within {ESPEAK_TIMEOUT_S:g} s (stopped)"
        ) from None
    if done.returncode != 0 or not path.is_file():
        raise CafeError(f"espeak-ng could not speak {text!r}: {done.stderr.strip()[:200]}")


def clip_duration(path: Path, item_id: str) -> float:
    """The seconds of the clip espeak-ng wrote; one CafeError (item, file) for one that is no
    readable WAV, instead of soundfile's traceback."""
    import soundfile as sf

    try:
        return round(sf.info(str(path)).duration, 3)
    except Exception as e:  # soundfile raises its own error types, and RuntimeError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CafeError(
            f"{path}: item {item_id}: espeak-ng wrote no readable WAV ({first})"
        ) from None


@dataclass
class Item:
    id: str
    dimension: str
    sentence: str
    facts: dict[str, str]
    question: str
    choices: list[str]
    answer: str
    duration: float = 0.0

    def record(self) -> dict:
        """One spoken.jsonl line (MMAR-like keys plus dimension, caption, events)."""
        required = self.dimension
        return {
            **record_head(self, "speech", "easy"),
            "caption": f'One voice (espeak-ng, American English) says: "{self.sentence}"',
            "events": [
                Event(
                    0.0,
                    self.duration,
                    f"spoken word: {word}",
                    {"slot": slot, "word": word},
                    required=slot == required,
                ).to_dict()
                for slot, word in self.facts.items()
            ],  # fmt: skip
        }


def make_item(index: int, seed: int) -> Item:
    """Item ``index`` of the benchmark with ``seed`` (its text; the audio is spoken later)."""
    rng = np.random.default_rng([int(seed), int(index), int(GENERATOR_VERSION)])
    facts = {slot: vocab[int(rng.integers(len(vocab)))] for slot, (vocab, _) in SLOTS.items()}
    template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
    sentence = template.format(**facts)
    dim = DIMENSIONS[index % len(DIMENSIONS)]
    vocab, question = SLOTS[dim]
    others = [w for w in vocab if w != facts[dim]]
    picked = [others[int(i)] for i in rng.choice(len(others), size=3, replace=False)]
    choices = [facts[dim], *picked]
    choices = [choices[int(i)] for i in rng.permutation(len(choices))]
    return Item(f"spoken-{index:05d}", dim, sentence, facts, question, choices, facts[dim])


def generate(out: str | Path, n: int = 40, seed: int = 0, progress: bool = False) -> Path:
    """Write ``out``/spoken.jsonl, ``out``/audio/*.wav and ``out``/spoken-info.json."""
    version = espeak_version()  # fails first, in one line, where espeak-ng is missing

    def write_item(i: int, wav: Path) -> dict:
        item = make_item(i, seed)
        speak(item.sentence, wav)
        item.duration = clip_duration(wav, item.id)
        return item.record()

    info = {"generator_version": GENERATOR_VERSION, "n": n, "seed": seed,
            "espeak_ng": version, "voice": " ".join(VOICE)}  # fmt: skip
    return write_set(Path(out), "spoken", n, write_item, info, progress)
