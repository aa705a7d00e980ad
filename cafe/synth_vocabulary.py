"""The synth benchmark's closed vocabulary: every sound source a clip can hold, the words a
question may use for it, how it is synthesised and which attributes its events carry. Plain
data, here at the bottom: the benchmark's generator, the reference listener (an adapter), the
rule judge and the training data all read it.

Event labels in synth.jsonl are always the canonical ``label``; questions use any synonym, so a
listener has to map words to sources. Attributes by source:

- ``tone``: a pure sine. ``f0`` (Hz, at the start), ``pitch`` (rising | falling | flat |
  rising then falling) and ``f0_end`` / ``f0_peak`` for gliding tones.
- ``buzz``: a band-limited square wave (odd harmonics, 1/k amplitudes). Same pitch attributes.
- ``noise burst``: broadband white noise. No pitch.
- ``click train``: 1 ms decaying clicks repeated at ``rate_hz`` (30-50 Hz): a rattle.
- ``chirp``: a fast sine sweep over more than an octave; ``f0``, ``f0_end``, ``pitch``.

Rhythm items add ``tempo`` (slow | fast), ``bpm`` and ``regular`` (bool) to each pulse of the
sequence. Every event also has ``level_db`` (peak level re full scale).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    label: str  # canonical event label
    synonyms: tuple[str, ...]  # words a question may use (the label itself first)
    article: str  # "a" / "an" for captions and choices
    synthesis: str  # how the generator makes it
    pitched: bool  # has a fundamental frequency a listener can track
    description: str  # how a caption describes it

    @property
    def phrase(self) -> str:
        return f"{self.article} {self.label}"


SOURCES: dict[str, Source] = {
    s.label: s
    for s in (
        Source(
            "tone",
            ("tone", "beep", "pure tone", "sine tone"),
            "a",
            "sine wave, 10 ms raised-cosine fades",
            True,
            "clean electronic beep",
        ),
        Source(
            "buzz",
            ("buzz", "buzzer", "square wave"),
            "a",
            "band-limited square wave (odd harmonics up to 7.5 kHz), 10 ms fades",
            True,
            "harsh buzzing tone",
        ),
        Source(
            "noise burst",
            ("noise burst", "hiss", "burst of static"),
            "a",
            "white noise, 10 ms fades",
            False,
            "burst of broadband hiss",
        ),
        Source(
            "click train",
            ("click train", "rattle", "clicking"),
            "a",
            "1 ms exponentially decaying clicks at 30-50 per second",
            False,
            "dry rattling click train",
        ),
        Source(
            "chirp",
            ("chirp", "sweep", "whistle sweep"),
            "a",
            "sine sweep over 1.5-2.5 octaves in 0.25-0.5 s (exponential)",
            True,
            "quick sweeping chirp",
        ),
    )
}

LABELS: tuple[str, ...] = tuple(SOURCES)

#: tonal sources whose pitch contour a question may ask about
CONTOUR_SOURCES: tuple[str, ...] = ("tone", "buzz")

PITCH_CONTOURS: tuple[str, ...] = ("rising", "falling", "flat", "rising then falling")

#: rhythm answers: tempo x regularity
RHYTHMS: tuple[str, ...] = (
    "slow and regular",
    "slow and irregular",
    "fast and regular",
    "fast and irregular",
)

#: inter-onset intervals (s): slow 0.6-0.9 s (67-100 bpm), fast 0.22-0.3 s (200-270 bpm).
#: Regular sequences keep one interval. Irregular ones jitter each interval by 20-45 % and have
#: no steady beat: at most half of the intervals lie within 10 % of a whole multiple of the
#: median interval (and their coefficient of variation is at least 0.2).
TEMPO_IOI: dict[str, tuple[float, float]] = {"slow": (0.6, 0.9), "fast": (0.22, 0.3)}
IRREGULAR_JITTER = 0.45

DIMENSIONS: tuple[str, ...] = ("counting", "pitch", "rhythm", "temporal", "timbre")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")

#: per difficulty: signal-to-noise ratio of the background hiss (dB, re the target's RMS),
#: number of distractor events, and whether distractors may overlap the target events
DIFFICULTY_SETTINGS: dict[str, dict[str, float | int | bool]] = {
    "easy": {"snr_db": 30.0, "distractors": 0, "overlap": False},
    "medium": {"snr_db": 12.0, "distractors": 2, "overlap": False},
    "hard": {"snr_db": 6.0, "distractors": 2, "overlap": True},
}


def label_for_word(text: str) -> str | None:
    """The canonical label a phrase names (longest synonym wins), or None."""
    low = text.lower()
    best: tuple[int, str] | None = None
    for src in SOURCES.values():
        for syn in src.synonyms:
            if _contains_word(low, syn) and (best is None or len(syn) > best[0]):
                best = (len(syn), src.label)
    return best[1] if best else None


def labels_in(text: str) -> list[str]:
    """Every label a text mentions, in order of first mention (synonyms included)."""
    low = text.lower()
    found: list[tuple[int, str]] = []
    for src in SOURCES.values():
        positions = [_find_word(low, syn) for syn in src.synonyms]
        positions = [p for p in positions if p >= 0]
        if positions:
            found.append((min(positions), src.label))
    return [label for _, label in sorted(found)]


def _find_word(low: str, phrase: str) -> int:
    import re

    m = re.search(rf"(?<!\w){re.escape(phrase)}(?:s|es)?(?!\w)", low)
    return m.start() if m else -1


def _contains_word(low: str, phrase: str) -> bool:
    return _find_word(low, phrase) >= 0
