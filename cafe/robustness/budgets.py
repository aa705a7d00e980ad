"""Reasoning-budget sweeps: one run per budget, the budget part of the run's identity (the
generation setting ``reasoning_budget``: it is in the model-call cache key and names the
folder), then accuracy and CAFE perception against the budget.

How a model takes a budget is its adapter's to say (``Adapter.budget_method``): local models by
budget forcing (the reasoning cut at N tokens and the answer forced after it, s1-style), API
models by the provider's thinking budget. An adapter that names none cannot be swept: its runs
would differ only in their labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the generation key a budget travels in (Request.generation, RunSpec.generation)
KEY = "reasoning_budget"


def parse_budgets(text: str) -> list[int]:
    """``"0,256,1024"`` -> [0, 256, 1024]: non-negative integers, no repeats, in order."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            n = int(part)
        except ValueError:
            raise ValueError(f"budget {part!r} is not a whole number of tokens") from None
        if n < 0:
            raise ValueError(f"budget {n} is negative")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("no budget given (e.g. --budgets 0,256,1024,4096)")
    return out


def budget_method(adapter_cls: type, model: str) -> str:
    """How ``adapter_cls`` spends a reasoning budget (its ``budget_method``), or ValueError."""
    method = getattr(adapter_cls, "budget_method", None)
    if not method:
        raise ValueError(
            f"model {model!r} (adapter {getattr(adapter_cls, '__name__', adapter_cls)}) has no "
            "way to set a reasoning budget (no budget forcing, no thinking budget): it cannot "
            "be swept"
        )
    return str(method)


def budget_identity(budget: int, method: str) -> dict[str, Any]:
    """What a sweep point adds to a run: the generation setting (identity) and its name."""
    return {"generation": {KEY: int(budget)}, "budget": int(budget), "method": method}


def decay_r(decay: Mapping[str, Any] | None) -> tuple[float | None, list[float] | None]:
    """The run's decay as the sweep shows it: Pearson r of Acc_per against reasoning length
    across the decay section's (non-sparse) bins, with its 95% interval (scipy's, by Fisher's
    z; none under 4 bins) -> (r, [lo, hi])."""
    bins = [
        b
        for b in (decay or {}).get("bins") or []
        if not b.get("sparse") and b.get("acc_per") is not None and b.get("x") is not None
    ]
    xs, ys = [b["x"] for b in bins], [b["acc_per"] for b in bins]  # fmt: skip
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None, None
    from scipy import stats

    res = stats.pearsonr(xs, ys)
    if len(xs) < 4:
        return float(res.statistic), None
    ci = res.confidence_interval(0.95)
    return float(res.statistic), [round(float(ci.low), 4), round(float(ci.high), 4)]


def sweep_section(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The sweep's table: per budget (ascending), accuracy with its interval, CAFE Acc_per /
    Err_per with theirs, the decay correlation, and the mean reasoning length actually spent.
    ``points``: {"budget", "method", "run_dir", "metrics": that run's metrics.json}."""
    rows = []
    for p in sorted(points, key=lambda p: p["budget"]):
        m = p["metrics"]
        total = (m.get("accuracy") or {}).get("total") or {}
        caf = m.get("cafe") or {}
        ci = caf.get("ci95") or {}
        r, r_ci = decay_r(m.get("decay"))
        rows.append({
            "budget": p["budget"],
            "method": p["method"],
            "run_dir": p.get("run_dir"),
            "n": total.get("total"),
            "acc": total.get("acc"),
            "acc_ci95": p.get("acc_ci95"),
            "acc_per": caf.get("acc_per"),
            "acc_per_ci95": ci.get("acc_per"),
            "err_per": caf.get("err_per"),
            "err_per_ci95": ci.get("err_per"),
            "decay_r": r,
            "decay_r_ci95": r_ci,
            "reasoning_tokens": p.get("reasoning_tokens"),
        })  # fmt: skip
    return {
        "budgets": [r["budget"] for r in rows],
        "rows": rows,
        "labels": {
            "acc": "accuracy (percent, the benchmark's headline rule; every item)",
            "acc_per": "CAFE Acc_per (percent; the run's CAFE headline)",
            "err_per": "CAFE Err_per (percent)",
            "decay_r": "Pearson r of Acc_per against reasoning length across the run's "
            "decay bins (negative: perception decays as reasoning grows), 95% interval by "
            "Fisher's z over the bins",
            "reasoning_tokens": "mean reasoning length per answered item: the whole reasoning "
            "section as the run counts it (tokens, or words without a tokenizer), which the "
            "budget need not bound: the budget bounds what its method names",
        },
    }


def format_sweep(section: Mapping[str, Any]) -> str:
    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.2f}"

    def ci(c: Any) -> str:
        return f" [{f(c[0])}, {f(c[1])}]" if c else ""

    rows = section["rows"]
    method = rows[0]["method"] if rows else "?"
    lines = [f"reasoning-budget sweep ({method}); percent, 95% bootstrap intervals over items"]
    lines.append("budget  items  accuracy              Acc_per               Err_per"
                 "               decay r (length)   reasoning length*")  # fmt: skip
    for r in rows:
        lines.append(
            f"{r['budget']:>6}  {r['n']!s:>5}  {(f(r['acc']) + ci(r['acc_ci95'])):<20}  "
            f"{(f(r['acc_per']) + ci(r['acc_per_ci95'])):<20}  "
            f"{(f(r['err_per']) + ci(r['err_per_ci95'])):<20}  "
            # .get: a sweep.json from before the decay r has none (shown as –)
            f"{(f(r.get('decay_r')) + ci(r.get('decay_r_ci95'))):<20}  "
            f"{f(r['reasoning_tokens']):>16}"
        )
    # the column counts the whole reasoning; the budget bounds what its method names (the
    # reference listener's: perception words only), so 129 beside budget 0 is no contradiction
    lines.append(f"* mean reasoning length per answered item, the whole reasoning as the run "
                 f"counts it; the budget bounds only what its method names: {method}")  # fmt: skip
    return "\n".join(lines)


def accuracy_ci(item_acc: Sequence[float], resamples: int = 1000, seed: int = 0) -> list | None:
    """95% percentile bootstrap interval of mean item accuracy (percent) over items."""
    import numpy as np

    from cafe.metrics.stats import bootstrap_ci

    arr = np.asarray(item_acc, dtype=float)
    ci = bootstrap_ci(len(arr), lambda idx: arr[idx].mean(axis=1), resamples=resamples, seed=seed)
    return None if ci is None else [round(ci[0], 2), round(ci[1], 2)]


def mean_reasoning_tokens(predictions: Sequence[Any]) -> float | None:
    xs = [
        p.reasoning_tokens
        for p in predictions
        if p.error is None and p.reasoning_tokens is not None
    ]
    return round(sum(xs) / len(xs), 2) if xs else None
