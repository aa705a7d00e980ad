"""Signal-processing listening for the reference adapter (numpy only, a few ms per clip): find
sound events in a waveform from its energy envelope, then describe each one (pitch track,
contour, spectral flatness, harmonic content, impulsiveness) and name its source in the synth
vocabulary. Nothing here sees a benchmark's ground truth: only samples."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SR = 16_000
HOP = 160  # 10 ms energy frames
N_FFT = 512  # 32 ms spectral frames (31 Hz bins, parabolic peak refinement)
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
_CLICK, _NOISE, _BUZZ, _TONE = range(4)
CLICK_KURTOSIS = 6.0  # impulsive: clicks (white noise 3, sines 1.5, square waves 1)
NOISE_FLATNESS = 0.3  # noise frames ~0.56, tonal frames near 0
BUZZ_HARM3_DB = -18.0  # square wave: 3rd harmonic at -9.5 dB; sine: only background there
SPLIT_MIN_S = 0.3  # shorter spans are single events
RUN_MIN_S = 0.08  # a source must hold this long to count as its own event
JUMP_OCT = 0.3  # a steady pitch that jumps this far is a new tonal event


@dataclass
class Frames:
    """Per spectral frame (32 ms Hann, every 1-3 hops) of one loud span."""

    hop: np.ndarray  # centre of each frame, in hops
    flat: np.ndarray  # spectral flatness, 100 Hz - 7 kHz
    peak: np.ndarray  # strongest frequency (Hz), parabolic refinement
    harm3: np.ndarray  # power at 3x peak re the peak (dB)
    cls: np.ndarray  # _CLICK | _NOISE | _BUZZ | _TONE after a 5-frame majority vote
    step: int


def analyse_frames(x: np.ndarray, a: int, b: int) -> Frames:
    # sparser frames for longer spans: pitch moves slowly and the cost stays flat
    step = 1 if b - a < 16 else 2 if b - a < 60 else 3
    hops = np.arange(a, b, step)
    starts = np.clip(hops * HOP + HOP // 2 - N_FFT // 2, 0, max(0, len(x) - N_FFT))
    raw = x[np.minimum(starts[:, None] + np.arange(N_FFT)[None, :], len(x) - 1)]
    spec = np.fft.rfft(raw * _WINDOW, axis=1)
    # float32 throughout: ratios and argmaxes need no more, and it halves the memory traffic
    spec = (spec.real**2 + spec.imag**2).astype(np.float32) + np.float32(1e-20)
    band = spec[:, int(100 * N_FFT / SR) : int(7000 * N_FFT / SR)]
    flat = np.exp(np.mean(np.log(band), axis=1)) / np.mean(band, axis=1)
    peak = _peak_hz(spec)
    rows = np.arange(len(spec))
    k1 = np.clip(np.round(peak * N_FFT / SR).astype(int), 1, spec.shape[1] - 2)
    k3 = np.clip(np.round(3 * peak * N_FFT / SR).astype(int), 1, spec.shape[1] - 2)
    p1 = spec[rows, k1 - 1] + spec[rows, k1] + spec[rows, k1 + 1]
    p3 = spec[rows, k3 - 1] + spec[rows, k3] + spec[rows, k3 + 1]
    harm3 = 10 * np.log10(p3 / p1)
    raw = raw - raw.mean(axis=1, keepdims=True)
    sq = raw * raw
    kurt = np.mean(sq * sq, axis=1) / (np.mean(sq, axis=1) ** 2 + np.float32(1e-20))
    cls = np.where(
        kurt > CLICK_KURTOSIS,
        _CLICK,
        np.where(flat > NOISE_FLATNESS, _NOISE, np.where(harm3 > BUZZ_HARM3_DB, _BUZZ, _TONE)),
    )
    if len(cls) >= 5:  # majority over 5 frames removes single-frame flips
        onehot = (np.pad(cls, 2, mode="edge")[:, None] == np.arange(4)).astype(np.int32)
        c = np.cumsum(np.vstack([np.zeros((1, 4), np.int32), onehot]), axis=0)
        cls = np.argmax(c[5:] - c[:-5], axis=1)
    return Frames(hops, flat, peak, harm3, cls, step)


def _peak_hz(spec: np.ndarray) -> np.ndarray:
    """Strongest bin per frame above 80 Hz, refined by parabolic interpolation."""
    lo = int(80 * N_FFT / SR)
    k = np.argmax(spec[:, lo:], axis=1) + lo
    k = np.clip(k, 1, spec.shape[1] - 2)
    rows = np.arange(len(k))
    la, lb, lc = (np.log(spec[rows, k + d]) for d in (-1, 0, 1))
    denom = la - 2 * lb + lc
    delta = np.where(np.abs(denom) > 1e-12, 0.5 * (la - lc) / np.where(denom == 0, 1, denom), 0)
    return (k + np.clip(delta, -0.5, 0.5)) * SR / N_FFT


def _runs(values: np.ndarray) -> list[list[int]]:
    """[start, end) index runs of equal values."""
    bounds = [0, *(np.flatnonzero(np.diff(values)) + 1).tolist(), len(values)]
    return [[bounds[i], bounds[i + 1]] for i in range(len(bounds) - 1)]


def split_span(fr: Frames, a: int, b: int) -> list[tuple[int, int]]:
    """Split a loud span where one source hands over to another (overlapping events): runs of
    a different frame class, or a steady pitch that jumps to another steady pitch."""
    if (b - a) * HOP / SR < SPLIT_MIN_S:
        return [(a, b)]
    min_run = max(2, int(RUN_MIN_S * SR / HOP / fr.step))
    runs = _runs(fr.cls)
    while len(runs) > 1:  # absorb the shortest too-short run into its neighbour
        i = min(range(len(runs)), key=lambda k: runs[k][1] - runs[k][0])
        if runs[i][1] - runs[i][0] >= min_run:
            break
        j = i - 1 if i > 0 else i + 1
        runs[min(i, j)] = [min(runs[i][0], runs[j][0]), max(runs[i][1], runs[j][1])]
        del runs[max(i, j)]
    cuts = [r[0] for r in runs[1:]]
    w = min_run
    if len(fr.peak) >= 2 * w:
        win = np.lib.stride_tricks.sliding_window_view(np.log2(np.maximum(fr.peak, 1.0)), w)
        med, sd = np.median(win, axis=1), np.std(win, axis=1)
        for r0, r1 in runs:  # pitch jumps between two steady tonal stretches
            if fr.cls[r0] not in (_BUZZ, _TONE):
                continue
            k = r0 + w
            while k <= r1 - w:
                if abs(med[k] - med[k - w]) > JUMP_OCT and sd[k - w] < 0.05 and sd[k] < 0.05:
                    cuts.append(k)
                    k += w
                else:
                    k += 1
    edges = [a, *sorted(a + c * fr.step for c in cuts), b]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1) if edges[i + 1] > edges[i]]


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


def describe_span(
    x: np.ndarray, a: int, b: int, fr: Frames, db: np.ndarray, floor: float
) -> Detected:
    """Name the source of hops [a, b) from its frames and its waveform's impulsiveness."""
    det = Detected(onset=a * HOP / SR, offset=b * HOP / SR)
    det.level_db = float(np.max(db[a:b]) - floor)
    seg = x[a * HOP : b * HOP].astype(np.float64)
    seg = seg - seg.mean()
    sq = seg * seg
    kurt = float(np.mean(sq * sq) / (np.mean(sq) ** 2 + 1e-20))
    sel = (fr.hop >= a) & (fr.hop < b)
    if not sel.any():
        sel = np.abs(fr.hop - (a + b) // 2) == np.min(np.abs(fr.hop - (a + b) // 2))
    flat = float(np.median(fr.flat[sel]))
    harm3 = float(np.median(fr.harm3[sel]))
    peaks = fr.peak[sel]
    # frames fully inside the event carry the pitch track (edges mix with background)
    inner = peaks[1:-1] if len(peaks) > 4 else peaks
    lo, hi = np.percentile(inner, [10, 90])
    spread = float(np.log2(hi / max(lo, 1.0)))
    det.features = {"kurtosis": kurt, "flatness": flat, "harm3_db": harm3, "pitch_spread": spread}
    if kurt > CLICK_KURTOSIS:
        det.label = "click train"
        det.features["click_rate"] = _click_rate(seg)
    elif flat > NOISE_FLATNESS - 0.05:
        det.label = "noise burst"
    else:
        det.f0 = float(np.median(inner))
        det.f0_start, det.f0_end = float(np.median(inner[:3])), float(np.median(inner[-3:]))
        if spread > 1.0 and det.duration < 0.7:
            det.label = "chirp"
            det.contour = "rising" if det.f0_end > det.f0_start else "falling"
        else:
            det.label = "buzz" if harm3 > BUZZ_HARM3_DB else "tone"
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
    out = []
    for a, b in spans:
        fr = analyse_frames(x, a, b)
        out += [describe_span(x, p, q, fr, db, floor) for p, q in split_span(fr, a, b)]
    return out
