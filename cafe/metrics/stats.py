"""Small statistics helpers shared by metrics and reports: mean/std over runs and seeded
bootstrap confidence intervals. numpy only, so report code never pulls in a heavy stack."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


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
