"""Small statistics helpers shared by metrics and reports: mean/std over runs and seeded
bootstrap confidence intervals. numpy only, so report code never pulls in a heavy stack."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


def canonical(records: Iterable[Any]) -> list[Any]:
    """Records (judgements, rubric scores, predictions: anything with sample_id and run_index)
    in one order, whatever order their file's lines came in: every statistic, the bootstrap's
    resampled units and float sums included, is then the same for the same records."""
    return sorted(records, key=lambda r: (str(r.sample_id), int(r.run_index)))


def mean_std(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean and sample std (ddof=1; 0.0 for a single value) of the non-None values."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"n": 0, "mean": None, "std": None}
    std = float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0
    return {"n": len(xs), "mean": float(np.mean(xs)), "std": std}


def bootstrap_ci(
    n_units: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap over units (samples). ``statistic`` gets an index matrix of shape
    (resamples, n_units) and returns one value per row (NaN where undefined, e.g. an empty
    denominator); those rows are left out. Seeded, so a report is reproducible."""
    if n_units == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_units, size=(resamples, n_units))
    values = np.asarray(statistic(idx), dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def safe_ratio(num: float, den: float) -> float | None:
    """Percentage num/den, None when the denominator is empty (never a silent 0)."""
    return 100.0 * num / den if den else None


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> dict[str, Any]:
    """mean(a) - mean(b) over paired units (a[i] and b[i] belong to the same item), with a
    percentile bootstrap interval that resamples units, so both sides move together and the
    item-to-item spread that both share cancels. Units where either side is None are left out
    and counted. Seeded: the same inputs give the same interval."""
    pairs = [
        (float(x), float(y)) for x, y in zip(a, b, strict=True) if x is not None and y is not None
    ]
    out: dict[str, Any] = {"n": len(pairs), "left_out": len(a) - len(pairs)}
    if not pairs:
        return {**out, "diff": None, "ci95": None}
    d = np.array([x - y for x, y in pairs])
    ci = bootstrap_ci(
        len(d), lambda idx: d[idx].mean(axis=1), resamples=resamples, seed=seed, level=level
    )
    out.update(
        diff=float(d.mean()),
        ci95=list(ci) if ci else None,
        method=f"paired percentile bootstrap over items, {resamples} resamples, seed {seed}",
    )
    return out


def trimmed_mean(values: Sequence[float], trim: int = 1) -> float | None:
    """Mean after dropping the ``trim`` lowest and ``trim`` highest values; with too few values
    to drop 2 * trim and keep one, the plain mean (the MMAR rubric scorer's rule for 5 raters:
    sort, drop the lowest and the highest, average the middle three)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return None
    if trim > 0 and len(xs) > 2 * trim:
        xs = xs[trim:-trim]
    return sum(xs) / len(xs)


#: Fieller, Hartley & Pearson (1957): the standard error of atanh(Spearman's rho)
FIELLER_SE = 1.06


def spearman_ci(x: Sequence[float | None], y: Sequence[float | None], level: float = 0.95) -> dict:
    """Spearman's rho of paired values (pairs with a None left out), its p-value, and a
    confidence interval from Fisher's z with the Fieller standard error 1.06 / sqrt(n - 3)
    (defined for n >= 4). None where a side is constant or there are fewer than 3 pairs."""
    pairs = [
        (float(u), float(v)) for u, v in zip(x, y, strict=True) if u is not None and v is not None
    ]
    n = len(pairs)
    out: dict[str, Any] = {"n": n, "rho": None, "p": None, "ci95": None}
    if n < 3:
        return {**out, "note": "needs >= 3 pairs"}
    xs, ys = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    if np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return {**out, "note": "one side is constant"}
    from scipy import stats

    rho, p = stats.spearmanr(xs, ys)
    out.update(rho=float(rho), p=float(p))
    if n >= 4:
        z = float(np.arctanh(np.clip(rho, -0.999999, 0.999999)))
        half = float(stats.norm.ppf(0.5 + level / 2)) * FIELLER_SE / np.sqrt(n - 3)
        out["ci95"] = [float(np.tanh(z - half)), float(np.tanh(z + half))]
        out["method"] = "Fisher z, SE 1.06/sqrt(n-3) (Fieller et al. 1957)"
    return out
