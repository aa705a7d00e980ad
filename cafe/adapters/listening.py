"""Signal-processing listening for the reference adapter (numpy only, a few ms per clip): find
sound events in a waveform from its energy envelope, then describe each one (pitch track,
contour, spectral flatness, harmonic content, impulsiveness) and name its source in the synth
vocabulary. Nothing here sees a benchmark's ground truth: only samples."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SR = 16_000
HOP = 160  # 10 ms energy frames
N_FFT = 1024  # 64 ms spectral frames (16 Hz bins) for pitch
THRESH_DB = 3.0  # event frames: this far above the background floor
MERGE_GAP_S = 0.06  # shorter gaps join (click trains dip between clicks)
MIN_EVENT_S = 0.04


@dataclass
class Detected:
    onset: float
    offset: float
    label: str = "unknown"
    f0: float | None = None  # median pitch (Hz) for pitched sources
    f0_start: float | None = None
    f0_end: float | None = None
    contour: str | None = None  # rising | falling | flat | rising then falling
    level_db: float = 0.0  # above the background floor
    features: dict[str, float] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.offset - self.onset

    def describe(self) -> str:
        """ "label (attributes)" in the synth vocabulary, for the perception list."""
        bits = []
        if self.f0 is not None and self.label in ("tone", "buzz"):
            bits.append(f"about {self.f0:.0f} Hz")
            if self.contour:
                bits.append(f"pitch {self.contour}")
        if self.label == "chirp" and self.f0_start and self.f0_end:
            way = "up" if self.f0_end > self.f0_start else "down"
            bits.append(f"sweeping {way} from {self.f0_start:.0f} to {self.f0_end:.0f} Hz")
        if self.label == "click train" and "click_rate" in self.features:
            bits.append(f"about {self.features['click_rate']:.0f} clicks per second")
        bits.append(f"{self.level_db:.0f} dB above background")
        return f"{self.label} ({', '.join(bits)})"


def frame_energy_db(x: np.ndarray, hop: int = HOP) -> np.ndarray:
    """Mean-square energy per hop, smoothed over 3 hops (30 ms), in dB."""
    n = len(x) // hop
    e = np.mean(x[: n * hop].astype(np.float64).reshape(n, hop) ** 2, axis=1)
    if n >= 3:
        e = np.convolve(e, np.ones(3) / 3, mode="same")
    return 10 * np.log10(e + 1e-12)


def segment(x: np.ndarray, sr: int = SR) -> tuple[list[tuple[int, int]], np.ndarray, float]:
    """Event spans (hop indices, end exclusive), the energy curve and the background floor."""
    db = frame_energy_db(x)
    if len(db) == 0:
        return [], db, -120.0
    floor = float(np.percentile(db, 10))
    active = db > floor + THRESH_DB
    edges = np.flatnonzero(np.diff(np.concatenate([[0], active.astype(np.int8), [0]])))
    spans = [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    merged: list[tuple[int, int]] = []
    gap = int(MERGE_GAP_S * sr / HOP)
    for a, b in spans:
        if merged and a - merged[-1][1] <= gap:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    min_len = int(MIN_EVENT_S * sr / HOP)
    return [(a, b) for a, b in merged if b - a >= min_len], db, floor


_WINDOW = np.hanning(N_FFT).astype(np.float32)


def _spectra(x: np.ndarray, a: int, b: int) -> np.ndarray:
    """Power spectra of Hann frames centred inside hops [a, b): every hop for short events,
    every second hop for longer ones (pitch moves slowly; halves the cost)."""
    step = 1 if b - a < 16 else 2
    centres = np.arange(a, b, step) * HOP + HOP // 2
    starts = np.clip(centres - N_FFT // 2, 0, max(0, len(x) - N_FFT))
    idx = starts[:, None] + np.arange(N_FFT)[None, :]
    frames = x[np.minimum(idx, len(x) - 1)] * _WINDOW
    spec = np.fft.rfft(frames, axis=1)
    return (spec.real**2 + spec.imag**2).astype(np.float64)


def _peak_hz(spec: np.ndarray) -> np.ndarray:
    """Strongest bin per frame above 80 Hz, refined by parabolic interpolation."""
    lo = int(80 * N_FFT / SR)
    k = np.argmax(spec[:, lo:], axis=1) + lo
    k = np.clip(k, 1, spec.shape[1] - 2)
    rows = np.arange(len(k))
    la, lb, lc = (np.log(spec[rows, k + d] + 1e-20) for d in (-1, 0, 1))
    denom = la - 2 * lb + lc
    delta = np.where(np.abs(denom) > 1e-12, 0.5 * (la - lc) / np.where(denom == 0, 1, denom), 0)
    return (k + np.clip(delta, -0.5, 0.5)) * SR / N_FFT


def _contour(track: np.ndarray) -> str:
    """Compare the log-pitch of the first, middle and last quarter of the event."""
    if len(track) < 4:
        return "flat"
    lg = np.log2(track)
    q = max(1, len(lg) // 4)
    first, last = np.median(lg[:q]), np.median(lg[-q:])
    mid = np.median(lg[len(lg) // 2 - q // 2 : len(lg) // 2 + q // 2 + 1])
    if mid - max(first, last) > 0.12:
        return "rising then falling"
    if last - first > 0.12:
        return "rising"
    if first - last > 0.12:
        return "falling"
    return "flat"


def describe_span(x: np.ndarray, a: int, b: int, db: np.ndarray, floor: float) -> Detected:
    det = Detected(onset=a * HOP / SR, offset=b * HOP / SR)
    det.level_db = float(np.max(db[a:b]) - floor)
    seg = x[a * HOP : b * HOP].astype(np.float64)
    seg = seg - seg.mean()
    sq = seg * seg
    kurt = float(np.mean(sq * sq) / (np.mean(sq) ** 2 + 1e-20))
    spec = _spectra(x, a, b)
    # per-frame spectral flatness over 100 Hz - 7 kHz: noise ~0.5, tones and buzzes near 0
    band = spec[:, int(100 * N_FFT / SR) : int(7000 * N_FFT / SR)] + 1e-20
    flat = float(np.median(np.exp(np.mean(np.log(band), axis=1)) / np.mean(band, axis=1)))
    peaks = _peak_hz(spec)
    # keep frames fully inside the event for the pitch track (edges mix with background)
    inner = peaks[1:-1] if len(peaks) > 4 else peaks
    rows = np.arange(len(spec))
    k1 = np.clip(np.round(peaks * N_FFT / SR).astype(int), 1, spec.shape[1] - 2)
    k3 = np.clip(np.round(3 * peaks * N_FFT / SR).astype(int), 1, spec.shape[1] - 2)
    p1 = sum(spec[rows, k1 + d] for d in (-1, 0, 1))
    p3 = sum(spec[rows, k3 + d] for d in (-1, 0, 1))
    harm3 = float(np.median(10 * np.log10((p3 + 1e-20) / (p1 + 1e-20))))
    lo, hi = np.percentile(inner, [10, 90])
    spread = float(np.log2(hi / max(lo, 1.0)))
    det.features = {"kurtosis": kurt, "flatness": flat, "harm3_db": harm3, "pitch_spread": spread}
    if kurt > 6.0:
        det.label = "click train"
        det.features["click_rate"] = _click_rate(seg)
    elif flat > 0.25:
        det.label = "noise burst"
    else:
        det.f0 = float(np.median(inner))
        det.f0_start, det.f0_end = float(np.median(inner[:3])), float(np.median(inner[-3:]))
        if spread > 1.0 and det.duration < 0.7:
            det.label = "chirp"
            det.contour = "rising" if det.f0_end > det.f0_start else "falling"
        else:
            det.label = "buzz" if harm3 > -18.0 else "tone"
            det.contour = _contour(inner)
    return det


def _click_rate(seg: np.ndarray) -> float:
    """Clicks per second from the autocorrelation of the rectified signal (20-100 Hz)."""
    env = np.abs(seg)
    env = env - env.mean()
    n = len(env)
    if n < SR // 10:
        return 0.0
    spec = np.fft.rfft(env, 2 * n)
    ac = np.fft.irfft(np.abs(spec) ** 2)[:n]
    lo, hi = SR // 100, SR // 20
    lag = int(np.argmax(ac[lo:hi])) + lo
    return SR / lag


def listen(x: np.ndarray, sr: int = SR) -> list[Detected]:
    """Every event heard in ``x`` (16 kHz mono), in time order, with its source named."""
    x = np.asarray(x, dtype=np.float32)
    spans, db, floor = segment(x, sr)
    return [describe_span(x, a, b, db, floor) for a, b in spans]
