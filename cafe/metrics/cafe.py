"""CAFE perception metrics (SPEC §2) from judgements.

Counts per category: matched (N_mat), hallucinated (``error_matched``, N_hal), misused
(``error_use``, N_misuse), neutral (N_neu), missed (N_miss).
N_pred = N_mat + N_hal + N_misuse + N_neu and N_tgt = N_mat + N_miss;
Acc_per = N_mat/N_pred, Err_per = N_hal/N_pred, Err_use = N_misuse/N_pred, Err_omit = N_miss/N_tgt,
in percent. The paper does not say whether counts are pooled; ``micro`` (default) pools counts
within a run, ``macro`` averages the per-judgement ratios and skips judgements whose denominator is
zero (the number skipped is reported). Only status ``ok`` judgements count; invalid and failed ones
are counted and reported, never silently dropped.

The headline of `cafe_section` follows the paper ("averaged over three inference runs"): the mean
over runs of each run's value, with a bootstrap interval over items of that same statistic (all
runs of an item move together). The figure pooled over every (item, run) stays, labelled
``pooled``; with one run the two are equal."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from cafe.metrics.stats import bootstrap_ci, canonical, mean_std, safe_ratio
from cafe.records import Judgement, Sample

MODES = ("micro", "macro")
CATEGORIES = ("matched", "hallucinated", "misused", "neutral", "missed")
#: category -> Judgement field (the paper's JSON keys)
FIELDS = {
    "matched": "matched_events",
    "hallucinated": "error_matched",
    "misused": "error_use",
    "neutral": "neutral_events",
    "missed": "missed_events",
}
METRICS = ("acc_per", "err_per", "err_use", "err_omit")
#: metric -> (numerator category, denominator: "pred" or "tgt")
_DEFS = {
    "acc_per": ("matched", "pred"),
    "err_per": ("hallucinated", "pred"),
    "err_use": ("misused", "pred"),
    "err_omit": ("missed", "tgt"),
}
#: Sample.meta keys reported as breakdowns where present
BREAKDOWN_KEYS = ("modality", "layer", "category", "isolation", "task", "difficulty", "dimension")


def counts_of(j: Judgement) -> np.ndarray:
    """[mat, hal, misuse, neu, miss] of one judgement."""
    return np.array([len(getattr(j, FIELDS[c]) or []) for c in CATEGORIES], dtype=float)


def _denoms(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """N_pred and N_tgt for counts with categories on the last axis."""
    return c[..., 0] + c[..., 1] + c[..., 2] + c[..., 3], c[..., 0] + c[..., 4]


def _ratios(c: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row metric ratios in percent (NaN where the denominator is zero)."""
    n_pred, n_tgt = _denoms(c)
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, (cat, den) in _DEFS.items():
            d = n_pred if den == "pred" else n_tgt
            out[name] = np.where(d > 0, 100.0 * c[..., CATEGORIES.index(cat)] / d, np.nan)
    return out


def status_counts(judgements: Sequence[Judgement]) -> dict[str, int]:
    out = {"ok": 0, "invalid": 0, "failed": 0}
    for j in judgements:
        out[j.status] = out.get(j.status, 0) + 1
    out["total"] = len(judgements)
    return out


def reply_health(judgements: Sequence[Judgement]) -> dict[str, Any]:
    """Counts of this batch's judge replies by outcome, and a warning when most were not usable
    (a thinking judge out of budget, a wrong template, a dead server: never a quiet gap)."""
    out = {"judged": len(judgements), "ok": 0, "empty": 0, "unparseable": 0, "failed": 0}
    first: str | None = None
    for j in judgements:
        if j.status == "ok":
            out["ok"] += 1
            continue
        why = j.reason or ""
        empty = "empty reply" in why or "no answer after the thinking" in why
        out["failed" if j.status == "failed" else "empty" if empty else "unparseable"] += 1
        first = first or why
    bad = out["judged"] - out["ok"]
    out["warning"] = (
        f"{bad} of {out['judged']} judge replies unusable ({out['empty']} empty or thinking only, "
        f"{out['unparseable']} unparseable, {out['failed']} failed calls); first: {first}"
        if out["judged"] and bad * 2 > out["judged"]
        else None
    )
    return out


def cafe_metrics(judgements: Iterable[Judgement], mode: str = "micro") -> dict[str, Any]:
    """Acc_per, Err_per, Err_use, Err_omit (percent; None where undefined), the pooled counts and
    the judgement status counts. ``mode`` is ``micro`` (pooled counts) or ``macro``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    judgements = canonical(judgements)  # float sums in one order
    ok = [j for j in judgements if j.status == "ok"]
    c = np.array([counts_of(j) for j in ok]).reshape(len(ok), len(CATEGORIES))
    total = c.sum(axis=0)
    n_pred, n_tgt = _denoms(total)
    out: dict[str, Any] = {"mode": mode}
    if mode == "micro":
        for name, (cat, den) in _DEFS.items():
            out[name] = safe_ratio(total[CATEGORIES.index(cat)], n_pred if den == "pred" else n_tgt)
    else:
        per = _ratios(c)
        used = {}
        for name in METRICS:
            vals = per[name][~np.isnan(per[name])]
            out[name] = float(vals.mean()) if vals.size else None
            used[name] = int(vals.size)
        out["macro_samples"] = {
            "used": used,
            "skipped_zero_pred": int(np.sum(_denoms(c)[0] == 0)),
            "skipped_zero_tgt": int(np.sum(_denoms(c)[1] == 0)),
            "note": "macro averages per (item, run) ratios; judgements whose denominator is "
            "zero are skipped for that metric",
        }
    out["counts"] = {cat: int(total[i]) for i, cat in enumerate(CATEGORIES)}
    out["counts"].update(n_pred=int(n_pred), n_tgt=int(n_tgt))
    out["judgements"] = status_counts(judgements)
    return out


def cafe_ci(
    judgements: Sequence[Judgement], mode: str = "micro", *, resamples: int = 1000, seed: int = 0
) -> dict[str, list[float] | None]:
    """Bootstrap 95% intervals, resampling samples (all runs of a sample move together); the
    units in sample-id order, so the same judgements give the same interval in any order."""
    by_sample: dict[str, list[np.ndarray]] = defaultdict(list)
    for j in canonical(judgements):
        if j.status == "ok":
            by_sample[j.sample_id].append(counts_of(j))
    units = list(by_sample.values())
    out: dict[str, list[float] | None] = {}
    if mode == "micro":
        sums = np.array([np.sum(u, axis=0) for u in units]).reshape(len(units), len(CATEGORIES))

        def stat_for(name: str) -> Callable[[np.ndarray], np.ndarray]:
            return lambda idx: _ratios(sums[idx].sum(axis=1))[name]

    else:
        # per sample: sum of per-judgement ratios and how many were defined, per metric
        ratio_sum = {m: np.zeros(len(units)) for m in METRICS}
        ratio_n = {m: np.zeros(len(units)) for m in METRICS}
        for i, u in enumerate(units):
            r = _ratios(np.array(u))
            for m in METRICS:
                ratio_sum[m][i] = np.nansum(r[m])
                ratio_n[m][i] = np.sum(~np.isnan(r[m]))

        def stat_for(name: str) -> Callable[[np.ndarray], np.ndarray]:
            def f(idx: np.ndarray) -> np.ndarray:
                n = ratio_n[name][idx].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    return np.where(n > 0, ratio_sum[name][idx].sum(axis=1) / n, np.nan)

            return f

    for name in METRICS:
        ci = bootstrap_ci(len(units), stat_for(name), resamples=resamples, seed=seed)
        out[name] = list(ci) if ci else None
    return out


def _over_runs(judgements: Sequence[Judgement], mode: str) -> dict[str, Any]:
    """Per-run metrics and their mean over runs (runs where a metric is undefined are left out)."""
    per_run: dict[int, list[Judgement]] = defaultdict(list)
    for j in judgements:
        per_run[j.run_index].append(j)
    run_metrics = {r: cafe_metrics(js, mode) for r, js in sorted(per_run.items())}
    out: dict[str, Any] = {"n": len(run_metrics), "run_indices": list(run_metrics)}
    for m in METRICS:
        out[m] = {**mean_std([rm[m] for rm in run_metrics.values()]),
                  "per_run": [rm[m] for rm in run_metrics.values()]}  # fmt: skip
    return out


def cafe_ci_over_runs(
    judgements: Sequence[Judgement], mode: str = "micro", *, resamples: int = 1000, seed: int = 0
) -> dict[str, list[float] | None]:
    """Bootstrap 95% intervals of the headline statistic (the mean over runs of the per-run
    value), resampling items: every run of a resampled item comes along."""
    ok = [j for j in judgements if j.status == "ok"]
    items = sorted({j.sample_id for j in ok})
    runs = sorted({j.run_index for j in ok})
    pos_i = {s: i for i, s in enumerate(items)}
    pos_r = {r: i for i, r in enumerate(runs)}
    n, k = len(items), len(runs)
    counts = np.zeros((n, k, len(CATEGORIES)))
    seen = np.zeros((n, k))
    for j in ok:
        counts[pos_i[j.sample_id], pos_r[j.run_index]] += counts_of(j)
        seen[pos_i[j.sample_id], pos_r[j.run_index]] = 1
    ratios = _ratios(counts)  # (n, k) per metric, NaN where undefined

    def weights(idx: np.ndarray) -> np.ndarray:
        """(resamples, n): how often each item is drawn in each resample."""
        rows = idx.shape[0]
        flat = (idx + np.arange(rows)[:, None] * n).ravel()
        return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(float)

    def stat_for(name: str) -> Callable[[np.ndarray], np.ndarray]:
        def f(idx: np.ndarray) -> np.ndarray:
            w = weights(idx)
            with np.errstate(invalid="ignore", divide="ignore"):
                if mode == "micro":
                    sums = (w @ counts.reshape(n, -1)).reshape(len(w), k, len(CATEGORIES))
                    per_run = _ratios(sums)[name]  # (resamples, k)
                else:
                    r = ratios[name]
                    defined = ~np.isnan(r) & (seen > 0)
                    tot = w @ np.where(defined, r, 0.0)
                    cnt = w @ defined.astype(float)
                    per_run = np.where(cnt > 0, tot / cnt, np.nan)
                valid = ~np.isnan(per_run)
                n_valid = valid.sum(axis=1)
                mean = np.where(valid, per_run, 0.0).sum(axis=1) / np.maximum(n_valid, 1)
                return np.where(n_valid > 0, mean, np.nan)

        return f

    out: dict[str, list[float] | None] = {}
    for name in METRICS:
        ci = bootstrap_ci(n, stat_for(name), resamples=resamples, seed=seed) if n and k else None
        out[name] = list(ci) if ci else None
    return out


def _values(v: Any) -> list[str]:
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def cafe_section(
    judgements: Sequence[Judgement],
    samples: Sequence[Sample] = (),
    mode: str = "micro",
    *,
    breakdown_keys: Sequence[str] = BREAKDOWN_KEYS,
    breakdowns: dict[str, Callable[[Sample], Any]] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The metrics.json "cafe" section. Headline (``acc_per`` … ``err_omit``): the mean over runs
    of the per-run value (``mode`` within a run), as the paper averages its three runs; ``ci95``:
    bootstrap over items of that statistic; ``pooled``: the same metrics over every (item, run)
    at once, with its own interval; ``counts``: pooled counts. Breakdowns (the benchmark's own
    ``breakdowns`` functions when given, else the Sample.meta keys ``breakdown_keys``) use the
    same mean over runs. Independent of the judgements' order (sorted first: ``canonical``)."""
    judgements = canonical(judgements)
    pooled = cafe_metrics(judgements, mode)
    runs = _over_runs(judgements, mode)
    section: dict[str, Any] = {
        "mode": mode,
        "headline": f"mean over runs of the per-run value ({mode} within a run)",
    }
    for m in METRICS:
        section[m] = runs[m]["mean"]
    section.update({k: v for k, v in pooled.items() if k not in (*METRICS, "mode")})
    section["runs"] = runs
    method = f"percentile bootstrap over items, {resamples} resamples, seed {seed}"
    section["ci95"] = {
        "method": method + "; the statistic: mean over runs of the per-run value",
        **cafe_ci_over_runs(judgements, mode, resamples=resamples, seed=seed),
    }
    section["pooled"] = {
        "label": f"pooled over every (item, run) ({mode}); not the headline",
        **{m: pooled[m] for m in METRICS},
        "ci95": cafe_ci(judgements, mode, resamples=resamples, seed=seed),
    }
    by_id = {s.id: s for s in samples}
    funcs = breakdowns or {k: (lambda s, k=k: s.meta.get(k)) for k in breakdown_keys}
    out: dict[str, dict[str, Any]] = {}
    for key, func in funcs.items():
        groups: dict[str, list[Judgement]] = defaultdict(list)
        for j in judgements:
            s = by_id.get(j.sample_id)
            for v in _values(func(s)) if s else []:
                groups[v].append(j)
        if groups:
            out[key] = {v: _group(js, mode) for v, js in sorted(groups.items())}
    section["breakdowns"] = out
    return section


def _group(judgements: Sequence[Judgement], mode: str) -> dict[str, Any]:
    """One breakdown cell: the headline statistic (mean over runs), pooled counts and statuses."""
    pooled = cafe_metrics(judgements, mode)
    runs = _over_runs(judgements, mode)
    cell = {k: v for k, v in pooled.items() if k not in (*METRICS, "mode")}
    cell.update({m: runs[m]["mean"] for m in METRICS})
    return cell


def neutral_share(cafe: dict[str, Any]) -> float | None:
    """The share of reported events that are neutral (true but not needed): what Acc_per, Err_per
    and Err_use leave of 100, so Acc_per 74 of a listener right 96% of the time reads right."""
    parts = [cafe.get(k) for k in ("acc_per", "err_per", "err_use")]
    if any(not isinstance(v, int | float) for v in parts):
        return None
    return round(max(0.0, 100.0 - sum(parts)), 2)


def fmt(v: Any, digits: int = 2) -> str:
    """A figure as the judges' summaries print it ("-": none)."""
    return "-" if v is None else f"{v:.{digits}f}"


def format_cafe(section: dict[str, Any]) -> str:
    """A short human summary of a "cafe" section."""
    st = section["judgements"]
    runs = section.get("runs", {})
    lines = [
        f"CAFE: {section.get('headline', section['mode'])}; judge {section['judge']['judge']}, "
        f"template {section['template_hash'][:12]}, runs {runs.get('n', 1)}",
    ]
    for m in ("acc_per", "err_per", "err_use", "err_omit"):
        ci = section.get("ci95", {}).get(m)
        sd = runs.get(m, {}).get("std")
        extra = f"  95% CI [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
        extra += f"  std over runs {fmt(sd)}" if runs.get("n", 1) > 1 else ""
        pooled = (section.get("pooled") or {}).get(m)
        extra += f"  (pooled over (item, run): {fmt(pooled)})" if runs.get("n", 1) > 1 else ""
        lines.append(f"  {m.capitalize():<9}{fmt(section[m]):>7}{extra}")  # Acc_per, Err_per…
    if ms := section.get("macro_samples"):
        lines.append(
            f"  macro = mean of per-(item, run) ratios; skipped: {ms['skipped_zero_pred']} with "
            f"no predicted events, {ms['skipped_zero_tgt']} with no required events"
        )
    lines.append(
        f"  judgements: {st['ok']} ok, {st['invalid']} invalid, {st['failed']} failed "
        f"(of {st['total']}); reasoning accuracy {fmt(section['reasoning_accuracy']['acc'])}"
    )
    lines += section.get("failed_reasons") or []
    return "\n".join(lines)
