"""`cafe compare RUN_A RUN_B [RUN_C …]`: is B really better than A? Each later run against the
first, over the (item, run) units both hold (the rest counted and named):

- the difference B − A in accuracy (percentage points), overall and per breakdown cell, with a
  paired bootstrap interval that resamples items (an item's runs move with it: items are the
  unit, runs are nested in them; scipy.stats.bootstrap, paired, percentile, seeded);
- a test: McNemar's exact test on the discordant items when each item has one run (a two-sided
  binomial test of "B right, A wrong" among the items where they disagree), else the Wilcoxon
  signed-rank test on the items' accuracy differences (their mean over runs);
- Holm's correction of the breakdown cells' p-values (many cells tested: a few small p-values
  come by chance), the headline test left as it is;
- Acc_per / Err_per / Err_use / Err_omit (from the judgements both hold), the listening gap per
  control (from the control folders) with the same item bootstrap, and the decay r fitted again
  on the items both hold (fewer resamples: each one re-bins and re-fits).

``gate`` turns the result into a CI check: B worse than A by more than POINTS with the interval
below zero. The method, seed and resample count are part of the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cafe.errors import CafeError
from cafe.reports.outcomes import Key, RunOutcomes

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
SHOWN = 10  # ids named of the units only one run holds
CAFE_KEYS = ("acc_per", "err_per", "err_use", "err_omit")


class CompareError(CafeError):
    """Two folders that cannot be compared; the message says why."""


@dataclass(frozen=True)
class Settings:
    resamples: int = RESAMPLES
    seed: int = SEED
    level: float = LEVEL

    def method(self) -> dict[str, Any]:
        return {
            "interval": f"paired percentile bootstrap over items (runs nested in items), "
            f"scipy.stats.bootstrap, {self.resamples} resamples, seed {self.seed}, "
            f"{round(100 * self.level)}%",
            "test_one_run": "McNemar's exact test: two-sided binomial test on the discordant "
            "items (scipy.stats.binomtest)",
            "test_k_runs": "Wilcoxon signed-rank test on per-item accuracy differences "
            "(scipy.stats.wilcoxon; items with no difference dropped)",
            "correction": "Holm over the breakdown cells of each comparison",
            "cafe": "difference of the pooled ratios, item bootstrap (numpy, same seed)",
            "decay": f"Pearson r of the decay section fitted again on the items both hold, "
            f"B - A, items resampled {DECAY_RESAMPLES} times (each resample re-binned)",
            "seed": self.seed,
            "resamples": self.resamples,
            "level": self.level,
        }


# statistics ---------------------------------------------------------------------------------
def paired_interval(
    xa: np.ndarray, xb: np.ndarray, w: np.ndarray, settings: Settings, scale: float = 100.0
) -> list[float] | None:
    """Interval of scale * (Σxb − Σxa) / Σw with items resampled (the same items for both)."""
    from scipy import stats

    if len(w) < 2:
        return None
    d = (xb - xa) / np.where(w > 0, w, 1)
    if np.allclose(d, d[0]) and np.allclose(w, w[0]):  # no spread to resample
        v = float(scale * (xb.sum() - xa.sum()) / w.sum())
        return [v, v]

    def stat(a: np.ndarray, b: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
        return scale * (b.sum(axis=axis) - a.sum(axis=axis)) / n.sum(axis=axis)

    res = stats.bootstrap(
        (xa, xb, w), stat, paired=True, vectorized=True, method="percentile",
        n_resamples=settings.resamples, confidence_level=settings.level,
        rng=np.random.default_rng(settings.seed),
    )  # fmt: skip
    lo, hi = res.confidence_interval
    return [float(lo), float(hi)]


def paired_test(ca: np.ndarray, cb: np.ndarray, n: np.ndarray) -> dict[str, Any]:
    """McNemar's exact test where every item has one run, else Wilcoxon over items."""
    from scipy import stats

    if len(n) and (n == 1).all():
        a_only = int(((ca == 1) & (cb == 0)).sum())
        b_only = int(((ca == 0) & (cb == 1)).sum())
        k = a_only + b_only
        p = float(stats.binomtest(b_only, k, 0.5).pvalue) if k else 1.0
        return {"test": "mcnemar_exact", "a_only": a_only, "b_only": b_only, "p": p}
    d = (cb - ca) / np.where(n > 0, n, 1)  # one division: equal differences tie exactly
    if not np.any(d != 0):
        return {"test": "wilcoxon", "nonzero": 0, "p": 1.0}
    return {"test": "wilcoxon", "nonzero": int(np.sum(d != 0)),
            "p": float(stats.wilcoxon(d).pvalue)}  # fmt: skip


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m, out, running = len(pvalues), [1.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def _cell(ca: np.ndarray, cb: np.ndarray, n: np.ndarray, settings: Settings) -> dict[str, Any]:
    total = float(n.sum())
    a, b = float(100.0 * ca.sum() / total), float(100.0 * cb.sum() / total)
    return {
        "a": a,
        "b": b,
        "diff": b - a,
        "ci95": paired_interval(ca, cb, n, settings),
        "items": len(n),
        "units": int(total),
        **paired_test(ca, cb, n),
    }


# the pair ------------------------------------------------------------------------------------
def _common(a: RunOutcomes, b: RunOutcomes) -> tuple[list[Key], dict[str, Any], dict[str, Any]]:
    common = sorted(set(a.units) & set(b.units))

    def only(x: RunOutcomes, y: RunOutcomes) -> dict[str, Any]:
        keys = sorted(set(x.units) - set(y.units))
        return {"count": len(keys), "first": [f"{sid}#{r}" for sid, r in keys[:SHOWN]]}

    return common, only(a, b), only(b, a)


def _per_item(
    units: list[Key], a: RunOutcomes, b: RunOutcomes
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    ids = sorted({k[0] for k in units})
    pos = {sid: i for i, sid in enumerate(ids)}
    ca, cb, n = (np.zeros(len(ids)) for _ in range(3))
    for k in units:
        i = pos[k[0]]
        ca[i] += a.units[k].official
        cb[i] += b.units[k].official
        n[i] += 1
    return ids, ca, cb, n


def _cafe(
    units: list[Key], a: RunOutcomes, b: RunOutcomes, settings: Settings
) -> list[dict[str, Any]]:
    """CAFE ratios over the units both judged: pooled counts, item bootstrap of B − A."""
    from cafe.jsontext import finite
    from cafe.metrics.cafe import _ratios, counts_of
    from cafe.metrics.stats import bootstrap_ci

    both = [k for k in units if k in a.judgements and k in b.judgements]
    if not both:
        return []
    ids = sorted({k[0] for k in both})
    pos = {sid: i for i, sid in enumerate(ids)}
    cnt = np.zeros((2, len(ids), 5))
    for k in both:
        cnt[0, pos[k[0]]] += counts_of(a.judgements[k])
        cnt[1, pos[k[0]]] += counts_of(b.judgements[k])
    out = []
    for name in CAFE_KEYS:

        def stat(v: np.ndarray, idx: np.ndarray, name: str = name) -> np.ndarray:
            return _ratios(v[idx].sum(axis=1))[name]

        full = np.arange(len(ids))[None, :]
        xa, xb = finite(float(stat(cnt[0], full)[0])), finite(float(stat(cnt[1], full)[0]))
        ci = None
        if xa is not None and xb is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                ci = bootstrap_ci(len(ids), lambda idx: stat(cnt[1], idx) - stat(cnt[0], idx),
                                  resamples=settings.resamples, seed=settings.seed,
                                  level=settings.level)  # fmt: skip
        out.append({"metric": name, "a": xa, "b": xb, "units": len(both),
                    "diff": None if xa is None or xb is None else xb - xa,
                    "ci95": list(ci) if ci else None})  # fmt: skip
    return out


def _control_accuracy(run: RunOutcomes, control: str) -> dict[str, float] | None:
    """Item -> accuracy under a listening control, from the control's own folder."""
    from cafe.metrics.listening import item_accuracy
    from cafe.store import RunStore

    entry = ((run.metrics.get("listening") or {}).get("controls") or {}).get(control) or {}
    folder = entry.get("run_dir")
    if not folder or not RunStore(folder).has_manifest():
        return None
    return item_accuracy(list(run.samples.values()), RunStore(folder).predictions())


def _listening(
    ids: list[str], a: RunOutcomes, b: RunOutcomes, settings: Settings
) -> list[dict[str, Any]]:
    """The listening gap per control both measured: B's gap − A's, items resampled."""
    from cafe.metrics.listening import item_accuracy

    ca = (a.metrics.get("listening") or {}).get("controls") or {}
    cb = (b.metrics.get("listening") or {}).get("controls") or {}
    out = []
    for control in sorted(set(ca) & set(cb)):
        ctl_a, ctl_b = _control_accuracy(a, control), _control_accuracy(b, control)
        row: dict[str, Any] = {"control": control, "a": ca[control].get("gap"),
                               "b": cb[control].get("gap")}  # fmt: skip
        if ctl_a is None or ctl_b is None or not ids:
            recorded = None if None in (row["a"], row["b"]) else row["b"] - row["a"]
            row.update(diff=recorded, ci95=None, note="a control folder is missing: recorded gaps")
            out.append(row)
            continue
        ra = item_accuracy(list(a.samples.values()), list(a.predictions.values()))
        rb = item_accuracy(list(b.samples.values()), list(b.predictions.values()))
        ga = np.array([ra[i] - ctl_a.get(i, 0.0) for i in ids])
        gb = np.array([rb[i] - ctl_b.get(i, 0.0) for i in ids])
        w = np.ones(len(ids))
        ci = paired_interval(ga, gb, w, settings, scale=1.0)
        row.update(a=float(ga.mean()), b=float(gb.mean()), diff=float(gb.mean() - ga.mean()),
                   ci95=ci, items=len(ids))  # fmt: skip
        out.append(row)
    return out


DECAY_RESAMPLES = 200  # each resample re-bins and re-fits both runs: kept small


def _decay_r(run: RunOutcomes, ids: Sequence[str]) -> float | None:
    """The decay section's Pearson r (reasoning accuracy against Acc_per over length bins),
    fitted again on the items ``ids`` (a resample: an item drawn twice counts twice) with the
    settings the run's own section was computed with."""
    from dataclasses import replace

    from cafe.metrics.decay import decay_section

    kept = (run.metrics.get("decay") or {}).get("settings") or {}
    preds, judged = [], []
    for n, sid in enumerate(ids):
        for r in run.runs:
            if (p := run.predictions.get((sid, r))) is not None:
                preds.append(replace(p, sample_id=f"{sid}~{n}"))
            if (j := run.judgements.get((sid, r))) is not None:
                judged.append(replace(j, sample_id=f"{sid}~{n}"))
    section = decay_section(
        preds, judged, bins=kept.get("bins"), bin_width=kept.get("bin_width"),
        min_count=kept.get("min_count", 3), merge=str(kept.get("sparse", "")).startswith("merged"),
        mode=kept.get("acc_per_mode", "micro"), counter=run.manifest.get("token_counter"),
    )  # fmt: skip
    r = (section.get("pearson") or {}).get("r")
    return None if r is None or not np.isfinite(r) else float(r)


def _decay(
    ids: list[str], a: RunOutcomes, b: RunOutcomes, settings: Settings
) -> list[dict[str, Any]]:
    """Decay r of both runs where both have a decay section, fitted again on the items both
    hold; the interval resamples those items (DECAY_RESAMPLES, the same seed)."""
    if not (a.metrics.get("decay") and b.metrics.get("decay")) or not ids:
        return []
    ra, rb = _decay_r(a, ids), _decay_r(b, ids)
    row: dict[str, Any] = {"metric": "decay_r", "a": ra, "b": rb, "ci95": None,
                           "diff": None if ra is None or rb is None else rb - ra}  # fmt: skip
    if row["diff"] is not None:
        rng = np.random.default_rng(settings.seed)
        diffs = []
        for _ in range(DECAY_RESAMPLES):
            drawn = [ids[i] for i in rng.integers(0, len(ids), len(ids))]
            x, y = _decay_r(a, drawn), _decay_r(b, drawn)
            if x is not None and y is not None:
                diffs.append(y - x)
        if diffs:
            alpha = (1 - settings.level) / 2
            row["ci95"] = [float(v) for v in np.quantile(diffs, [alpha, 1 - alpha])]
    return [row]


def compare_pair(a: RunOutcomes, b: RunOutcomes, settings: Settings) -> dict[str, Any]:
    (ba, va), (bb, vb) = a.bench, b.bench
    if ba != bb:
        raise CompareError(f"{a.root} is {ba}, {b.root} is {bb}: compare runs of one benchmark")
    if va != vb and not a.benchmark().versions_comparable:
        raise CompareError(
            f"{a.root} is {ba}/{va}, {b.root} is {ba}/{vb}: this benchmark's versions are "
            "different tests; compare runs of one version"
        )
    units, only_a, only_b = _common(a, b)
    if not units:
        raise CompareError(f"{a.root} and {b.root} hold no (item, run) in common")
    ids, ca, cb, n = _per_item(units, a, b)
    cells: dict[str, dict[str, Any]] = {}
    for name, values in a.breakdown_values().items():
        for value, members in values.items():
            inside = set(members)
            keep = [k for k in units if k[0] in inside]
            if keep:
                _, xa, xb, xn = _per_item(keep, a, b)
                cells.setdefault(name, {})[value] = _cell(xa, xb, xn, settings)
    flat = [c for by in cells.values() for c in by.values()]
    for c, p in zip(flat, holm([c["p"] for c in flat]), strict=True):
        c["p_holm"] = p
    return {
        "a": a.title,
        "b": b.title,
        "a_dir": str(a.root),
        "b_dir": str(b.root),
        "bench": f"{ba}/{va}" + ("" if va == vb else f" vs {vb}"),
        "units": len(units),
        "items": len(ids),
        "runs": sorted({k[1] for k in units}),
        "only_a": only_a,
        "only_b": only_b,
        "headline": _cell(ca, cb, n, settings),
        "breakdowns": cells,
        "cafe": _cafe(units, a, b, settings),
        "listening": _listening(ids, a, b, settings),
        "decay": _decay(ids, a, b, settings),
    }


def compare(
    run_a: str | Path,
    run_b: str | Path,
    *more: str | Path,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> dict[str, Any]:
    """Each of RUN_B, RUN_C … against RUN_A -> {"baseline", "comparisons": [...], "method"}:
    per comparison the headline and breakdown cells (both figures, B − A, its paired item
    bootstrap interval, McNemar's exact test or Wilcoxon over items, Holm-adjusted p for the
    cells), CAFE, listening gap and decay r where both runs have them."""
    settings = Settings(resamples, seed, level)
    base = RunOutcomes.load(run_a)
    pairs = [compare_pair(base, RunOutcomes.load(d), settings) for d in (run_b, *more)]
    return {"baseline": base.title, "comparisons": pairs, "method": settings.method()}


def regressions(result: dict[str, Any], points: float) -> list[dict[str, Any]]:
    """The comparisons whose accuracy is worse than the baseline's by more than ``points``
    with the whole interval below zero (the gate of ``--fail-if-worse``)."""
    bad = []
    for c in result["comparisons"]:
        h = c["headline"]
        if h["diff"] < -points and h["ci95"] is not None and h["ci95"][1] < 0:
            bad.append(c)
    return bad


# text ---------------------------------------------------------------------------------------
def _f(v: Any, sign: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.2f}" if sign else f"{v:.2f}"


def _ci(ci: Any) -> str:
    return "-" if not ci else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _p(c: dict[str, Any]) -> str:
    if c.get("test") == "mcnemar_exact":
        return f"McNemar p={c['p']:.3g} ({c['a_only']} A-only, {c['b_only']} B-only right)"
    return f"Wilcoxon p={c['p']:.3g}"


def format_compare(result: dict[str, Any]) -> str:
    lines = []
    for c in result["comparisons"]:
        h = c["headline"]
        lines += [
            f"A = {c['a']}  B = {c['b']}  [{c['bench']}]",
            f"  {c['units']} (item, run) units over {c['items']} items in both (runs "
            f"{','.join(map(str, c['runs']))}); only in A: {c['only_a']['count']}"
            + (f" ({', '.join(c['only_a']['first'])})" if c["only_a"]["count"] else "")
            + f"; only in B: {c['only_b']['count']}"
            + (f" ({', '.join(c['only_b']['first'])})" if c["only_b"]["count"] else ""),
            f"  {'':<28} {'A':>7} {'B':>7} {'B − A':>7} {'95% interval':>18}  test",
            f"  {'accuracy':<28} {_f(h['a']):>7} {_f(h['b']):>7} {_f(h['diff'], True):>7} "
            f"{_ci(h['ci95']):>18}  {_p(h)}",
        ]
        for name, by in c["breakdowns"].items():
            for value, x in by.items():
                lines.append(
                    f"  {(name + '=' + value)[:28]:<28} {_f(x['a']):>7} {_f(x['b']):>7} "
                    f"{_f(x['diff'], True):>7} {_ci(x['ci95']):>18}  {_p(x)}, Holm "
                    f"p={x['p_holm']:.3g}"
                )
        for x in c["cafe"] + c["decay"]:
            lines.append(f"  {x['metric']:<28} {_f(x['a']):>7} {_f(x['b']):>7} "
                         f"{_f(x['diff'], True):>7} {_ci(x['ci95']):>18}")  # fmt: skip
        for x in c["listening"]:
            lines.append(f"  {'gap ' + x['control']:<28} {_f(x['a']):>7} {_f(x['b']):>7} "
                         f"{_f(x['diff'], True):>7} {_ci(x['ci95']):>18}")  # fmt: skip
    m = result["method"]
    lines += [f"method: {m['interval']}; one run: {m['test_one_run']}; K runs: "
              f"{m['test_k_runs']}; {m['correction']}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def compare_html(result: dict[str, Any]) -> str:
    """The tests' section of the HTML comparison page (cafe.reports.html)."""
    import html

    def e(x: Any) -> str:
        return html.escape(str(x), quote=True)

    rows = []
    for c in result["comparisons"]:
        cells = [("accuracy", c["headline"], None)]
        cells += [(f"{n}={v}", x, x["p_holm"]) for n, by in c["breakdowns"].items()
                  for v, x in by.items()]  # fmt: skip
        cells += [(x["metric"], x, None) for x in c["cafe"] + c["decay"]]
        cells += [(f"gap {x['control']}", x, None) for x in c["listening"]]
        for name, x, adj in cells:
            test = e(_p(x)) if "test" in x else "–"  # CAFE, gap, decay: interval only
            rows.append(
                f"<tr><th>{e(name)}</th><td>{_f(x['a'])}</td><td>{_f(x['b'])}</td>"
                f"<td>{_f(x['diff'], True)}</td><td>{e(_ci(x['ci95']))}</td><td>{test}</td>"
                f"<td>{'–' if adj is None else f'{adj:.3g}'}</td></tr>"
            )
    m = result["method"]
    c0 = result["comparisons"][0]
    return (
        f"<p>{c0['units']} (item, run) units over {c0['items']} items in both; only in A: "
        f"{c0['only_a']['count']}, only in B: {c0['only_b']['count']}.</p>"
        '<table class="headline" id="tests"><tr><th>cell</th><th>A</th><th>B</th><th>B − A</th>'
        "<th>95% interval</th><th>test</th><th>Holm p</th></tr>" + "".join(rows) + "</table>"
        f"<p class=note>{e(m['interval'])}; one run: {e(m['test_one_run'])}; K runs: "
        f"{e(m['test_k_runs'])}; {e(m['correction'])}.</p>"
    )


def tests_section(run_a: str | Path, run_b: str | Path) -> str:
    """The comparison page's "Paired tests" section (what `cafe compare` prints); a pair it
    cannot compare says why in place of the table."""
    import html

    try:
        body = compare_html(compare(run_a, run_b))
    except CafeError as e:
        body = f"<p class=note>{html.escape(str(e))}</p>"
    return f'<section id="tests"><h2>Paired tests: B − A</h2>{body}</section>'
