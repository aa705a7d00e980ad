"""Deterministic generator of the synth benchmark: multiple-choice questions about synthetic
clips, balanced over five dimensions (counting, pitch, rhythm, temporal, timbre) and three
difficulties. The same (n, seed, GENERATOR_VERSION) gives byte-identical WAVs and synth.jsonl.

Item i gets dimension/difficulty cell ``i % 15`` and its own random generator seeded with
(seed, i), so items are independent of n (the first 100 of n=200 equal n=100)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cafe import synth_vocabulary as V
from cafe.benchmarks.generated import info_name, jsonl_name, record_head, write_set
from cafe.benchmarks.synth.signals import SR, render_clip
from cafe.records import Event

GENERATOR_VERSION = "2"
JSONL_NAME = jsonl_name("synth")
INFO_NAME = info_name("synth")
MIN_GAP = 0.2  # s between events that must not touch (listeners resolve them as separate)


@dataclass
class Item:
    id: str
    dimension: str
    difficulty: str
    question: str
    choices: list[str]
    answer: str
    duration: float
    snr_db: float
    events: list[Event]
    caption: str = ""

    def record(self) -> dict:
        """One synth.jsonl line (MMAR-like keys plus dimension, difficulty, caption, events)."""
        return {
            **record_head(self, "sound", self.difficulty),
            "snr_db": self.snr_db,
            "caption": self.caption,
            "events": [e.to_dict() for e in self.events],
        }


# --------------------------------------------------------------------------- small helpers


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def _shuffled(rng: np.random.Generator, seq: list) -> list:
    return [seq[i] for i in rng.permutation(len(seq))]


def _r3(x: float) -> float:
    return round(float(x), 3)


def _attrs(rng: np.random.Generator, label: str, level_db: float, pitch: str = "flat") -> dict:
    """Synthesis attributes for one event of ``label`` (f0 ranges per source)."""
    a: dict = {}
    if label == "tone":
        a["f0"] = round(_u(rng, 350, 1200))
    elif label == "buzz":
        a["f0"] = round(_u(rng, 130, 400))
    elif label == "click train":
        a["rate_hz"] = int(rng.integers(35, 51))
    elif label == "chirp":
        pitch = "rising" if pitch == "flat" else pitch
        octaves = _u(rng, 1.5, 2.5)
        if pitch == "rising":
            a["f0"] = round(_u(rng, 400, 700))
            a["f0_end"] = round(a["f0"] * 2**octaves)
        else:
            a["f0"] = round(_u(rng, 2500, 3800))
            a["f0_end"] = round(a["f0"] / 2**octaves)
    if label in ("tone", "buzz"):
        ratio = _u(rng, 1.3, 1.6)
        if pitch == "rising":
            a["f0_end"] = round(a["f0"] * ratio)
        elif pitch == "falling":
            a["f0"] = round(a["f0"] * ratio)
            a["f0_end"] = round(a["f0"] / ratio)
        elif pitch == "rising then falling":
            a["f0_peak"] = round(a["f0"] * ratio)
    if V.SOURCES[label].pitched:
        a["pitch"] = pitch
    a["level_db"] = round(level_db, 1)
    return a


def _duration(rng: np.random.Generator, label: str, short: bool) -> float:
    if label == "chirp":
        return _u(rng, 0.25, 0.5)
    return _u(rng, 0.15, 0.35) if short else _u(rng, 0.35, 0.7)


def _event(onset: float, dur: float, label: str, attrs: dict, required: bool) -> Event:
    return Event(_r3(onset), _r3(onset + dur), label, attrs, required)


def _layout(rng: np.random.Generator, durs: list[float], gap=(0.2, 0.5)) -> tuple[list, float]:
    """Onsets for events played one after another, and the clip duration."""
    t = _u(rng, 0.2, 0.5)
    onsets = []
    for d in durs:
        onsets.append(t)
        t += d + _u(rng, *gap)
    return onsets, _r3(onsets[-1] + durs[-1] + _u(rng, 0.2, 0.5))


def _overlap_onto(rng: np.random.Generator, target: Event, dur: float, frac=(0.3, 0.6)) -> float:
    """Onset for a distractor that overlaps only ``target``'s outer ``frac`` at its start or end
    (hard items). Never clamped into the clip, which would widen the overlap: if the head side
    would start before 0.05 s the tail side is used, and the clip grows to fit."""
    span = target.offset - target.onset
    head = target.onset + span * _u(rng, *frac) - dur  # ends inside the target's head
    tail = target.onset + span * (1 - _u(rng, *frac))  # starts inside the target's tail
    return head if rng.random() < 0.5 and head >= 0.05 else tail


# --------------------------------------------------------------------------- dimensions


def _distractor_labels(rng: np.random.Generator, allowed: list[str], k: int) -> list[str]:
    return [_pick(rng, allowed) for _ in range(k)]


def _with_distractors(
    rng: np.random.Generator,
    targets: list[tuple[float, str, dict]],
    distractors: list[tuple[float, str, dict]],
    overlap: bool,
    frac=(0.3, 0.6),
    keep_first: bool = False,
) -> tuple[list[Event], float]:
    """Lay targets out in order with the distractors interleaved at random slots; on hard
    items the last distractor instead overlaps a random target."""
    seq = [(d, lab, a, True) for d, lab, a in targets]
    floating = distractors[-1] if overlap and distractors else None
    inline = distractors[:-1] if floating else distractors
    for d, lab, a in inline:
        lo = 1 if keep_first else 0
        pos = int(rng.integers(lo, len(seq) + 1))
        seq.insert(pos, (d, lab, a, False))
    onsets, clip = _layout(rng, [s[0] for s in seq])
    events = [_event(o, d, lab, a, req) for o, (d, lab, a, req) in zip(onsets, seq, strict=True)]
    if floating:
        d, lab, a = floating
        tgt = _pick(rng, [e for e in events if e.required])
        events.append(_event(_overlap_onto(rng, tgt, d, frac), d, lab, a, False))
    return sorted(events, key=lambda e: (e.onset, e.label)), clip


def _counting(rng, level, n_dis, overlap) -> tuple:
    label = _pick(rng, V.LABELS)
    count = int(rng.integers(2, 7))
    attrs = _attrs(rng, label, level)  # every repetition is the same sound
    dur = _duration(rng, label, short=True)
    others = [x for x in V.LABELS if x != label]
    dis = [
        (_duration(rng, lab, short=True), lab, _attrs(rng, lab, _u(rng, -4, 0)))
        for lab in _distractor_labels(rng, others, n_dis)
    ]
    events, clip = _with_distractors(rng, [(dur, label, attrs)] * count, dis, overlap)
    lo = max(1, count - int(rng.integers(0, 4)))
    choices = [str(k) for k in range(lo, lo + 4)]
    syn = _pick(rng, V.SOURCES[label].synonyms)
    q = _pick(
        rng,
        [
            f"How many times does the {syn} sound?",
            f"How many times is the {syn} heard in the clip?",
            f"Count the occurrences of the {syn}: how many are there?",
        ],
    )
    return q, choices, str(count), events, clip


def _pitch(rng, level, n_dis, overlap) -> tuple:
    label = _pick(rng, V.CONTOUR_SOURCES)
    contour = _pick(rng, V.PITCH_CONTOURS)
    target = (_u(rng, 0.8, 1.6), label, _attrs(rng, label, level, contour))
    dis = [
        (_duration(rng, lab, short=False), lab, _attrs(rng, lab, _u(rng, -4, 0)))
        for lab in _distractor_labels(rng, ["noise burst", "click train"], n_dis)
    ]
    events, clip = _with_distractors(rng, [target], dis, overlap, frac=(0.15, 0.3))
    syn = _pick(rng, V.SOURCES[label].synonyms)
    q = _pick(
        rng,
        [
            f"How does the pitch of the {syn} change over time?",
            f"Which best describes the pitch contour of the {syn}?",
        ],
    )
    return q, _shuffled(rng, list(V.PITCH_CONTOURS)), contour, events, clip


def _rhythm(rng, level, n_dis, overlap) -> tuple:
    label = _pick(rng, ["tone", "buzz", "noise burst"])
    tempo = _pick(rng, ["slow", "fast"])
    regular = bool(rng.random() < 0.5)
    pulse = _u(rng, 0.06, 0.09)
    lo, hi = V.TEMPO_IOI[tempo]
    base = _u(rng, lo, hi)
    n_pulses = max(4, int(_u(rng, 3.0, 3.6) / base) + 1)
    iois = np.full(n_pulses - 1, base)
    while not regular:  # redraw until the sequence is unmistakably uneven and in its tempo band
        j = rng.uniform(0.2, V.IRREGULAR_JITTER, n_pulses - 1) * rng.choice([-1, 1], n_pulses - 1)
        iois = np.maximum(base * (1 + j), pulse + 0.1)
        cv = float(np.std(iois) / np.mean(iois))
        med = float(np.median(iois))
        ratio = iois / med
        on_beat = float(np.mean(np.abs(ratio - np.maximum(np.round(ratio), 1)) < 0.1))
        in_band = med >= 0.55 if tempo == "slow" else med <= 0.35
        if cv >= 0.2 and on_beat <= 0.5 and in_band:
            break
    bpm = round(60.0 / float(np.median(iois)))
    attrs = _attrs(rng, label, level)
    attrs.update({"tempo": tempo, "bpm": bpm, "regular": regular})
    others = [x for x in V.LABELS if x != label]
    dis = [
        (_u(rng, 0.3, 0.6), lab, _attrs(rng, lab, _u(rng, -4, 0)))
        for lab in _distractor_labels(rng, others, n_dis)
    ]
    # the pulse sequence is one block in the layout; distractors go before or after it
    span = float(np.sum(iois)) + pulse
    block, clip = _with_distractors(rng, [(span, "__seq__", {})], dis, overlap, frac=(0.3, 0.7))
    events: list[Event] = []
    for ev in block:
        if ev.label != "__seq__":
            events.append(ev)
            continue
        onsets = ev.onset + np.concatenate([[0.0], np.cumsum(iois)])
        events += [_event(o, pulse, label, dict(attrs), True) for o in onsets]
    syn = _pick(rng, V.SOURCES[label].synonyms)
    q = _pick(
        rng,
        [
            f"How would you describe the rhythm of the repeated {syn}?",
            f"What are the tempo and regularity of the {syn} pulses?",
        ],
    )
    answer = f"{tempo} and {'regular' if regular else 'irregular'}"
    events.sort(key=lambda e: (e.onset, e.label))
    return q, _shuffled(rng, list(V.RHYTHMS)), answer, events, clip


def _temporal(rng, level, n_dis, overlap) -> tuple:
    labels = _shuffled(rng, list(V.LABELS))
    seq, absent, spare = labels[:3], labels[3], labels[4]
    targets = [
        (_duration(rng, lab, short=False), lab, _attrs(rng, lab, _u(rng, level - 1, level)))
        for lab in seq
    ]
    dis = [(_duration(rng, spare, False), spare, _attrs(rng, spare, _u(rng, -4, 0)))] * n_dis
    events, clip = _with_distractors(rng, targets, dis, overlap)
    order = [e.label for e in events if e.required]
    kind = _pick(rng, ["first", "last", "after", "before"])
    if kind == "first":
        q, answer = "Of the sounds listed below, which one is heard first?", order[0]
    elif kind == "last":
        q, answer = "Of the sounds listed below, which one is heard last?", order[-1]
    else:
        syn = _pick(rng, V.SOURCES[order[1]].synonyms)
        answer = order[2] if kind == "after" else order[0]
        q = f"Of the sounds listed below, which one comes right {kind} the {syn}?"
    return q, _shuffled(rng, [*seq, absent]), answer, events, clip


def _timbre(rng, level, n_dis, overlap) -> tuple:
    label = _pick(rng, V.LABELS)
    dur = _u(rng, 0.25, 0.5) if label == "chirp" else _u(rng, 0.6, 1.2)
    pitch = _pick(rng, ["rising", "falling"]) if label == "chirp" else "flat"
    target = (dur, label, _attrs(rng, label, level, pitch))
    others = [x for x in V.LABELS if x != label]
    dis = [
        (_duration(rng, lab, short=False), lab, _attrs(rng, lab, _u(rng, -4, 0)))
        for lab in _distractor_labels(rng, others, n_dis)
    ]
    events, clip = _with_distractors(rng, [target], dis, overlap, frac=(0.05, 0.15))
    choices = _shuffled(rng, [label, *_shuffled(rng, others)[:3]])
    if n_dis == 0:
        q = _pick(
            rng, ["What kind of sound is heard in the clip?", "Which source makes the sound?"]
        )
    else:
        tgt = next(e for e in events if e.required)
        span = tgt.offset - tgt.onset
        # the middle 60 % of the target, to 10 ms: distractors never reach into it
        a = math.ceil(round((tgt.onset + 0.2 * span) * 100, 6)) / 100
        b = math.floor(round((tgt.offset - 0.2 * span) * 100, 6)) / 100
        q = f"What kind of sound is heard between {a:.2f} s and {b:.2f} s?"
    return q, choices, label, events, clip


BUILDERS: dict[str, Callable] = {
    "counting": _counting,
    "pitch": _pitch,
    "rhythm": _rhythm,
    "temporal": _temporal,
    "timbre": _timbre,
}
CELLS = [(dim, diff) for diff in V.DIFFICULTIES for dim in V.DIMENSIONS]


# --------------------------------------------------------------------------- captions


def _loudness(level_db: float) -> str:
    return "loud" if level_db > -1.0 else "moderately loud" if level_db > -3.0 else "quieter"


def _details(ev: Event) -> str:
    a = ev.attributes
    if "f0" not in a:
        extra = f" at about {a['rate_hz']} clicks per second" if "rate_hz" in a else ""
        return extra
    pitch = a.get("pitch", "flat")
    if ev.label == "chirp":
        way = "up" if pitch == "rising" else "down"
        return f" sweeping {way} from about {a['f0']} Hz to {a['f0_end']} Hz"
    if pitch == "rising":
        return f" whose pitch rises from about {a['f0']} Hz to {a['f0_end']} Hz"
    if pitch == "falling":
        return f" whose pitch falls from about {a['f0']} Hz to {a['f0_end']} Hz"
    if pitch == "rising then falling":
        return f" whose pitch rises from about {a['f0']} Hz to {a['f0_peak']} Hz and falls back"
    return f" holding a steady pitch of about {a['f0']} Hz"


def caption(item: Item) -> str:
    """One chronological paragraph (as SPEC §2 describes captions): background, then every event
    in order with its time, duration, loudness and pitch; rhythm pulses as one series."""
    bg = "faint" if item.snr_db >= 25 else "soft" if item.snr_db >= 12 else "noticeable"
    parts = [f"This {item.duration:.1f}-second clip plays over a {bg}, steady background hiss."]
    events = sorted(item.events, key=lambda e: (e.onset, e.label))
    i, prev_end, said = 0, -1.0, []
    while i < len(events):
        ev = events[i]
        src = V.SOURCES[ev.label]
        overl = ", overlapping the previous sound," if ev.onset < prev_end else ""
        if "tempo" in ev.attributes:  # a rhythm series: one sentence for the whole sequence
            run = [e for e in events[i:] if e.label == ev.label and "tempo" in e.attributes]
            a = ev.attributes
            pace = f"{a['tempo']}, {'steady' if a['regular'] else 'uneven'}"
            what = (
                f"a series of {len(run)} short {src.description}s{_details(ev)}, repeating at a "
                f"{pace} pace (about {a['bpm']} per minute) until {run[-1].offset:.2f} s"
            )
            last = run[-1]
        else:
            again = any(p.label == ev.label and p.attributes == ev.attributes for p in said)
            loud = _loudness(ev.attributes.get("level_db", 0.0))
            what = (
                f"the same {src.description} again"
                if again
                else f"a {loud} {src.description}{_details(ev)}"
            ) + f", lasting {ev.offset - ev.onset:.2f} s"
            last = ev
        if i == 0:
            parts.append(f"It begins at {ev.onset:.2f} s with {what}.")
        else:
            parts.append(f"At {ev.onset:.2f} s{overl} comes {what}.")
        said.append(ev)
        prev_end = max(prev_end, last.offset)
        i = events.index(last) + 1
    parts.append("Then only the background hiss remains until the clip ends.")
    return " ".join(p[0].upper() + p[1:] for p in parts)


# --------------------------------------------------------------------------- entry points


def make_item(index: int, seed: int) -> tuple[Item, np.ndarray]:
    """Item ``index`` of the benchmark with ``seed``: record and waveform."""
    rng = np.random.default_rng([int(seed), int(index), int(GENERATOR_VERSION)])
    dim, diff = CELLS[index % len(CELLS)]
    cfg = V.DIFFICULTY_SETTINGS[diff]
    snr = round(float(cfg["snr_db"]) + _u(rng, -2, 2), 1)
    level = _u(rng, -2, 0)
    q, choices, answer, events, clip = BUILDERS[dim](
        rng, level, int(cfg["distractors"]), bool(cfg["overlap"])
    )
    clip = max(clip, _r3(max(e.offset for e in events) + 0.2))
    item = Item(f"synth-{index:05d}", dim, diff, q, choices, answer, clip, snr, events)
    item.caption = caption(item)
    audio = render_clip(events, clip, snr, rng)
    return item, audio


def generate(out: str | Path, n: int = 200, seed: int = 0, progress: bool = False) -> Path:
    """Write ``out``/synth.jsonl, ``out``/audio/*.wav and ``out``/synth-info.json."""
    from cafe.audio import write_wav

    def write_item(i: int, wav: Path) -> dict:
        item, audio = make_item(i, seed)
        write_wav(wav, audio, SR)
        return item.record()

    info = {"generator_version": GENERATOR_VERSION, "n": n, "seed": seed}
    return write_set(Path(out), "synth", n, write_item, info, progress)
