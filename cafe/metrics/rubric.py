"""The metrics.json "rubric" section from RubricScore records (cafe.judge.rubric).

As the MMAR authors report it: mean score and accuracy in percent, overall and by modality,
category and sub-category, over every (item, run). A wrong answer scores 0 (it is never rated).
An item a rater could not rate (invalid replies after its retries) or without a rubric is left
out of every denominator and listed as not evaluated, as their scorer leaves it out; one
without a prediction counts 0 (cafe's own rule, counted by status). A failed judge call is no
rating at all: while any is left (a re-run retries them) the score of every figure it belongs
to is absent (None), never a 0 the judge did not give. The mean over rated items only is given
beside it, labelled."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cafe.metrics.stats import bootstrap_ci, canonical, mean_std
from cafe.records import RubricScore, Sample

STATUSES = ("ok", "wrong", "invalid", "failed", "no_rubric", "no_prediction")
#: what the authors' scorer leaves out of every denominator (listed as not evaluated)
NOT_EVALUATED = ("invalid", "no_rubric")


def _pct(x: float) -> float:
    return round(100.0 * x, 2)


def _cell(records: Sequence[RubricScore]) -> dict[str, Any]:
    n = len(records)
    if not n:
        return {"score": None, "acc": None, "total": 0}
    unrated = any(r.status == "failed" for r in records)
    return {
        "score": None if unrated else _pct(sum(r.score or 0.0 for r in records) / n),
        "acc": _pct(sum(r.correct for r in records) / n),
        "total": n,
    }


def _values(v: Any) -> list[str]:
    if isinstance(v, (list, tuple, set)):
        return [str(x) for x in v] or ["none"]
    return ["none" if v is None else str(v)]


def rubric_section(
    records: Sequence[RubricScore],
    samples: Sequence[Sample],
    breakdowns: dict[str, Callable[[Sample], Any]] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    records = canonical(records)  # the same section whatever the order of the file's lines
    status = {s: 0 for s in STATUSES}
    for r in records:
        status[r.status] = status.get(r.status, 0) + 1
    left_out = [r for r in records if r.status in NOT_EVALUATED]
    invalid_replies = sum(r.invalid_replies for r in records)
    records = [r for r in records if r.status not in NOT_EVALUATED]
    section: dict[str, Any] = dict(_cell(records))
    section["status"] = status
    section["not_evaluated"] = sorted(f"{r.sample_id}#run{r.run_index}" for r in left_out)
    rated = [r for r in records if r.status == "ok"]
    section["score_rated_only"] = _pct(np.mean([r.score for r in rated])) if rated else None
    section["invalid_replies"] = invalid_replies
    section["note"] = (
        "score: mean over every evaluated (item, run) of the trimmed-mean rubric score (0 for a "
        "wrong answer or no prediction); not_evaluated: left out of every denominator (a rater "
        "invalid after its retries, no rubric), as the authors' scorer; score_rated_only: the "
        "mean over rated items only"
    )
    per_run: dict[int, list[RubricScore]] = defaultdict(list)
    per_item: dict[str, list[float]] = defaultdict(list)
    for r in records:
        per_run[r.run_index].append(r)
        per_item[r.sample_id].append(r.score or 0.0)
    run_scores = [_cell(rs)["score"] for _, rs in sorted(per_run.items())]
    if section["score"] is None:  # failed calls left: no spread of a score that is absent
        section["runs"] = {"per_run": run_scores}
        section["ci95"] = None
    else:
        section["runs"] = {**mean_std(run_scores), "per_run": run_scores}
        item_means = np.array([np.mean(v) for v in per_item.values()])
        ci = bootstrap_ci(
            len(item_means), lambda idx: 100.0 * item_means[idx].mean(axis=1),
            resamples=resamples, seed=seed,
        )  # fmt: skip
        section["ci95"] = list(ci) if ci else None
    by_id = {s.id: s for s in samples}
    out: dict[str, Any] = {}
    for key, func in (breakdowns or {}).items():
        groups: dict[str, list[RubricScore]] = defaultdict(list)
        for r in records:
            s = by_id.get(r.sample_id)
            for v in _values(func(s)) if s else []:
                groups[v].append(r)
        if groups:
            out[key] = {v: _cell(rs) for v, rs in sorted(groups.items())}
    section["breakdowns"] = out
    return section


def format_rubric(section: dict[str, Any]) -> str:
    """A short human summary, laid out like the authors' scorer prints it."""

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    j = section.get("judge") or {}
    st = section["status"]
    lines = [
        f"MMAR rubric score (judge {j.get('judge')}, {j.get('raters')} raters, trim "
        f"{j.get('trim')}, temperature {j.get('temperature')}, seed {j.get('seed')})",
    ]
    for key, values in (section.get("breakdowns") or {}).items():
        lines.append(f"  by {key}:")
        for v, c in values.items():
            lines.append(f"    {v:<40} score={f(c['score'])}, acc={f(c['acc'])}% over {c['total']}")
    ci = section.get("ci95")
    lines.append(
        f"  total: score={f(section['score'])}"
        + (f" [{f(ci[0])}, {f(ci[1])}]" if ci else "")
        + f", acc={f(section['acc'])}% over {section['total']}; rated-only mean "
        f"{f(section['score_rated_only'])}"
    )
    lines.append(
        "  status: " + ", ".join(f"{k} {v}" for k, v in st.items() if v)
        + f"; invalid replies retried: {section.get('invalid_replies', 0)}"
    )  # fmt: skip
    gone = section.get("not_evaluated") or []
    if gone:
        shown = ", ".join(gone[:20]) + (f" and {len(gone) - 20} more" if len(gone) > 20 else "")
        lines.append(f"  not evaluated (in no denominator): {shown}")
    return "\n".join(lines)
