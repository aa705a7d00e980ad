"""Perception decay (SPEC §3): group (item, run) predictions by reasoning length into equal-width
bins, report per bin its position (x, the interval's midpoint, as the paper's evenly spaced
ticks), the mean length inside it (x_mean), reasoning accuracy and CAFE Acc_per, and correlate the
two series across bins (Pearson r and p, as in the paper; Spearman as a rank check). The default
is the paper's binning: equal width, no merging; a bin under ``min_count`` is kept, drawn and
flagged sparse (left out of the correlations; ``pearson_all_bins`` keeps it); merging sparse bins
into a neighbour is an option. A per-sample logistic slope of correctness on length is a
robustness check that needs no binning at all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cafe.adapters.token_counts import WORDS, length_unit
from cafe.metrics.cafe import cafe_metrics
from cafe.records import Judgement, Prediction

DEFAULT_BINS = 10
DEFAULT_MIN_COUNT = 5


@dataclass
class _Bin:
    lo: float
    hi: float
    members: list[Prediction] = field(default_factory=list)


def _edges(lengths: np.ndarray, bins: int | None, bin_width: float | None) -> np.ndarray:
    lo, hi = float(lengths.min()), float(lengths.max())
    if bin_width:
        start = math.floor(lo / bin_width) * bin_width
        n = max(1, math.ceil((hi - start) / bin_width + 1e-9))
        if start + n * bin_width <= hi:  # the maximum must fall inside the last bin
            n += 1
        return start + bin_width * np.arange(n + 1)
    if hi == lo:
        hi = lo + 1.0
    return np.linspace(lo, hi, (bins or DEFAULT_BINS) + 1)


def _merge_sparse(bins: list[_Bin], min_count: int) -> list[_Bin]:
    """Merge each bin under min_count into its smaller neighbour until none is left (or one bin)."""
    bins = [b for b in bins]
    while len(bins) > 1:
        sparse = [i for i, b in enumerate(bins) if len(b.members) < min_count]
        if not sparse:
            break
        i = sparse[0]
        if i == 0:
            j = 1
        elif i == len(bins) - 1:
            j = i - 1
        else:
            j = i - 1 if len(bins[i - 1].members) <= len(bins[i + 1].members) else i + 1
        a, b = sorted((i, j))
        bins[a : b + 1] = [_Bin(bins[a].lo, bins[b].hi, bins[a].members + bins[b].members)]
    return bins


def pearson(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return {"r": None, "p": None, "n": len(x), "note": "needs >= 3 bins with varying values"}
    from scipy import stats  # imported only when there is something to correlate

    r, p = stats.pearsonr(x, y)
    return {"r": float(r), "p": float(p), "n": len(x)}


def spearman(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return {"rho": None, "p": None, "n": len(x), "note": "needs >= 3 bins with varying values"}
    from scipy import stats

    rho, p = stats.spearmanr(x, y)
    return {"rho": float(rho), "p": float(p), "n": len(x)}


def logistic_slope(lengths: Sequence[float], correct: Sequence[bool]) -> dict[str, Any]:
    """Maximum-likelihood logistic regression correct ~ a + b * length (scipy, no sklearn).
    The slope is reported per 100 tokens with a Wald standard error and two-sided p."""
    from scipy import optimize, stats

    x = np.asarray(lengths, dtype=float)
    y = np.asarray(correct, dtype=float)
    if x.size < 3 or np.std(x) == 0 or y.min() == y.max():
        return {"slope_per_100": None, "n": int(x.size), "note": "needs varying length and outcome"}
    mu, sd = x.mean(), x.std()
    X = np.column_stack([np.ones_like(x), (x - mu) / sd])  # standardised for a stable fit

    def nll(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ w
        loss = np.sum(np.logaddexp(0.0, z) - y * z)
        grad = X.T @ (1.0 / (1.0 + np.exp(-z)) - y)
        return float(loss), grad

    res = optimize.minimize(nll, np.zeros(2), jac=True, method="BFGS")
    w = res.x
    p_hat = 1.0 / (1.0 + np.exp(-(X @ w)))
    hess = X.T @ (X * (p_hat * (1 - p_hat))[:, None])
    try:
        se_std = float(np.sqrt(np.linalg.inv(hess)[1, 1]))
    except np.linalg.LinAlgError:
        se_std = float("nan")
    slope = w[1] / sd * 100.0
    se = se_std / sd * 100.0
    p = float(2 * stats.norm.sf(abs(w[1] / se_std))) if se_std and se_std == se_std else None
    return {
        "slope_per_100": float(slope),
        "se": float(se),
        "p": p,
        "intercept_at_mean": float(w[0]),
        "n": int(x.size),
        "converged": bool(res.success),
    }


def _filled_bins(
    usable: Sequence[Prediction], lengths: Any, bins: int | None, bin_width: float | None
) -> list[_Bin]:
    """The length intervals with their members (empty ones included)."""
    edges = _edges(lengths, bins, bin_width)
    idx = np.clip(np.searchsorted(edges, lengths, side="right") - 1, 0, len(edges) - 2)
    raw = [_Bin(float(edges[i]), float(edges[i + 1])) for i in range(len(edges) - 1)]
    for p, i in zip(usable, idx, strict=True):
        raw[i].members.append(p)
    return raw


def _bin_row(
    b: _Bin, by_key: dict[tuple[str, int], Judgement], mode: str, min_count: int
) -> dict[str, Any]:
    """One bin of the section: its interval, reasoning accuracy and CAFE Acc_per."""
    n = len(b.members)
    js = [by_key[k] for k in ((p.sample_id, p.run_index) for p in b.members) if k in by_key]
    cm = cafe_metrics(js, mode)
    return {
        "lo": b.lo,
        "hi": b.hi,
        "n": n,
        "x": (b.lo + b.hi) / 2.0,
        "x_mean": float(np.mean([p.reasoning_tokens for p in b.members])),
        "reasoning_acc": 100.0 * sum(p.correct for p in b.members) / n,
        "acc_per": cm["acc_per"],
        "judged_ok": cm["judgements"]["ok"],
        "sparse": n < min_count,
    }


def decay_section(
    predictions: Sequence[Prediction],
    judgements: Sequence[Judgement] = (),
    *,
    bins: int | None = None,
    bin_width: float | None = None,
    min_count: int = DEFAULT_MIN_COUNT,
    merge: bool = False,
    mode: str = "micro",
    counter: str | None = None,
) -> dict[str, Any]:
    """The metrics.json "decay" section. Bins hold (item, run) predictions with a reasoning
    length; bins under ``min_count`` are kept and flagged sparse and left out of the correlations
    (the paper's way), or merged into a neighbour with ``merge`` (then unequal widths).
    ``counter`` is the run's ``token_counter``: lengths are labelled tokens, or words when the
    run had no tokenizer (the word fallback)."""
    if bins is not None and bin_width is not None:
        raise ValueError("give either bins or bin_width, not both")
    usable = [p for p in predictions if p.reasoning_tokens is not None and p.error is None]
    settings = {
        "bins": None if bin_width else (bins or DEFAULT_BINS),
        "bin_width": bin_width,
        "min_count": min_count,
        "sparse": "merged into the smaller neighbour" if merge else "flagged, not correlated",
        "x": "interval midpoint (x_mean: mean length inside the bin)",
        "acc_per_mode": mode,
        "token_counter": counter or WORDS,
        "length_unit": length_unit(counter),
    }
    out: dict[str, Any] = {
        "settings": settings,
        "n": len(usable),
        "excluded_no_length_or_failed": len(predictions) - len(usable),
        "bins": [],
    }
    if not usable:
        out.update(pearson=pearson([], []), spearman=spearman([], []))
        out["logistic"] = logistic_slope([], [])
        return out
    lengths = np.array([p.reasoning_tokens for p in usable], dtype=float)
    raw = _filled_bins(usable, lengths, bins, bin_width)
    out["empty_bins"] = sum(not b.members for b in raw)
    raw = [b for b in raw if b.members]  # an empty interval has no accuracy to draw
    final = _merge_sparse(raw, min_count) if merge else raw

    by_key = {(j.sample_id, j.run_index): j for j in judgements}
    xs, accs, pers = [], [], []
    all_accs: list[float] = []
    all_pers: list[float] = []
    for b in final:
        row = _bin_row(b, by_key, mode, min_count)
        acc = row["reasoning_acc"]
        out["bins"].append(row)
        if row["acc_per"] is not None:
            all_accs.append(acc)
            all_pers.append(row["acc_per"])
        if not row["sparse"] and row["acc_per"] is not None:
            xs.append(row["x"])
            accs.append(acc)
            pers.append(row["acc_per"])
    out["series_bins"] = len(xs)
    out["pearson"] = pearson(accs, pers)  # reasoning accuracy vs perception accuracy (paper)
    out["spearman"] = spearman(accs, pers)
    out["pearson_all_bins"] = pearson(all_accs, all_pers)  # sparse bins included
    out["pearson_length_acc_per"] = pearson(xs, pers)
    out["logistic"] = logistic_slope(lengths, [p.correct for p in usable])
    return out


def _fmt(v: Any, nd: int = 2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def format_decay(section: dict[str, Any]) -> str:
    st = section.get("settings") or {}
    unit = st.get("length_unit", "tokens")
    lines = [
        f"reasoning length in {unit} ({st.get('token_counter', 'counter not recorded')})",
        f"bins: {st.get('bins') or 'width ' + str(st.get('bin_width'))}, equal width; sparse "
        f"(< {st.get('min_count')}): {st.get('sparse')}; x = interval midpoint, "
        f"mean = mean length in the bin; Acc_per {st.get('acc_per_mode')}",
        f"{'bin':>17} {'n':>5} {'x':>8} {'mean':>8} {'acc':>7} {'acc_per':>8}",
    ]
    for b in section["bins"]:
        flag = " sparse" if b["sparse"] else ""
        lines.append(
            f"{b['lo']:>8.1f}-{b['hi']:<8.1f} {b['n']:>5} {b['x']:>8.1f} "
            f"{b.get('x_mean', b['x']):>8.1f} "
            f"{_fmt(b['reasoning_acc']):>7} {_fmt(b['acc_per']):>8}{flag}"
        )
    pe, sp, lg = section["pearson"], section["spearman"], section["logistic"]
    # the paper's r pairs two accuracies across bins; a reader expects r against length, so
    # each line says what it pairs (and the length one, computed, is shown too)
    lines.append(
        f"reasoning accuracy against Acc_per across {pe['n']} bins (the paper's r): "
        f"Pearson r={_fmt(pe['r'], 3)} p={_fmt(pe['p'], 4)}; "
        f"Spearman rho={_fmt(sp['rho'], 3)} p={_fmt(sp['p'], 4)}"
    )
    pl = section.get("pearson_length_acc_per")
    if isinstance(pl, dict):
        lines.append(
            f"length (bin midpoint) against Acc_per across {pl.get('n')} bins: "
            f"Pearson r={_fmt(pl.get('r'), 3)} p={_fmt(pl.get('p'), 4)}"
        )
    lines.append(
        f"logistic slope of correctness on length: {_fmt(lg.get('slope_per_100'), 3)} per 100 "
        f"{unit} (se {_fmt(lg.get('se'), 3)}, n={lg['n']})"
    )
    if section["excluded_no_length_or_failed"]:
        lines.append(f"left out: {section['excluded_no_length_or_failed']} with no length/failed")
    return "\n".join(lines)
