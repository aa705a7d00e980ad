"""Waveform synthesis for the synth benchmark: one function per vocabulary source, and the mixer
that renders a clip from its events. Every parameter a waveform depends on is read from the
Event's attributes (plus the item's random generator for noise), so the audio is exactly what the
events say."""

from __future__ import annotations

import numpy as np

from cafe.records import Event

SR = 16_000
FADE_S = 0.01
#: RMS of an event at level_db 0 (every source is normalised to the same RMS, not peak)
BASE_RMS = 0.07
CLICK_TAU_SAMPLES = 16  # 1 ms decay


def _fade(x: np.ndarray) -> np.ndarray:
    n = min(int(FADE_S * SR), len(x) // 2)
    if n > 0:
        ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(n) / n)
        x[:n] *= ramp
        x[-n:] *= ramp[::-1]
    return x


def f0_track(attrs: dict, n: int) -> np.ndarray:
    """Instantaneous frequency (Hz) per sample for a pitched event, interpolated in log2."""
    f0 = float(attrs["f0"])
    pitch = attrs.get("pitch", "flat")
    t = np.linspace(0.0, 1.0, n, endpoint=False)
    if pitch in ("rising", "falling"):
        f1 = float(attrs["f0_end"])
        return 2.0 ** (np.log2(f0) + t * (np.log2(f1) - np.log2(f0)))
    if pitch == "rising then falling":
        fp = float(attrs["f0_peak"])
        tri = 1.0 - np.abs(2.0 * t - 1.0)
        return 2.0 ** (np.log2(f0) + tri * (np.log2(fp) - np.log2(f0)))
    return np.full(n, f0)


def _phase(freq: np.ndarray) -> np.ndarray:
    return 2.0 * np.pi * np.cumsum(freq) / SR


def synth_tone(attrs: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    return np.sin(_phase(f0_track(attrs, n)))


def synth_buzz(attrs: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    freq = f0_track(attrs, n)
    ph = _phase(freq)
    out = np.zeros(n)
    top = float(freq.max())
    k = 1
    while k * top < 7500.0:  # band-limited: no aliasing above Nyquist
        out += np.sin(k * ph) / k
        k += 2
    return out


def synth_noise(attrs: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(n)


def synth_clicks(attrs: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    period = SR / float(attrs["rate_hz"])
    out = np.zeros(n)
    starts = (np.arange(0.0, n, period)).astype(int)
    kernel = np.exp(-np.arange(6 * CLICK_TAU_SAMPLES) / CLICK_TAU_SAMPLES)
    for s in starts:
        seg = out[s : s + len(kernel)]
        seg += kernel[: len(seg)]
    return out


def synth_chirp(attrs: dict, n: int, rng: np.random.Generator) -> np.ndarray:
    return np.sin(_phase(f0_track(attrs, n)))


SYNTHS = {
    "tone": synth_tone,
    "buzz": synth_buzz,
    "noise burst": synth_noise,
    "click train": synth_clicks,
    "chirp": synth_chirp,
}


def render_event(event: Event, rng: np.random.Generator) -> np.ndarray:
    n = int(round((event.offset - event.onset) * SR))
    x = SYNTHS[event.label](event.attributes, n, rng).astype(np.float64)
    x *= (
        BASE_RMS
        * 10 ** (float(event.attributes.get("level_db", 0.0)) / 20)
        / (np.sqrt(np.mean(x**2)) + 1e-12)
    )
    return _fade(x)


def render_clip(
    events: list[Event], duration: float, snr_db: float, rng: np.random.Generator
) -> np.ndarray:
    """Background white noise at ``snr_db`` below an event at level 0 dB, plus every event."""
    n = int(round(duration * SR))
    noise_rms = BASE_RMS / 10 ** (snr_db / 20)
    clip = rng.standard_normal(n) * noise_rms
    for ev in events:
        x = render_event(ev, rng)
        start = int(round(ev.onset * SR))
        clip[start : start + len(x)] += x[: max(0, n - start)]
    peak = float(np.abs(clip).max())
    if peak > 0.98:  # never clip: scale the whole mix (keeps every ratio)
        clip *= 0.98 / peak
    return clip.astype(np.float32)
