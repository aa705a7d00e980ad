"""VoiceBench's metrics.json "official" section: each subset's figure by its own evaluator (one
file per subset and split, as evaluate.py is run; sd-qa's leaderboard column is its usa split,
mmsu's column every domain split's rows together), each leaderboard column, and the Overall;
beside the official (seeded-fallback) figures, labelled, the ones with unread multiple-choice
and BBH replies counted wrong."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.benchmarks.voicebench.figure import Figure
from cafe.benchmarks.voicebench.scorers import COLUMNS, EVALUATORS, evaluate, overall

SDQA_SPLIT = "usa"  # the split the leaderboard's SD-QA column reports


def group_rows(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Rows by (subset, split), in file order."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault((str(row.get("subset")), str(row.get("split"))), []).append(row)
    return out


def column_figures(rows: Sequence[dict[str, Any]], seed: int) -> tuple[dict[str, Figure], dict]:
    """The figure per subset as the leaderboard takes it, and every (subset, split) figure."""
    groups = group_rows(rows)
    splits = {f"{s}/{sp}": evaluate(s, g, seed) for (s, sp), g in sorted(groups.items())
              if s in EVALUATORS}  # fmt: skip
    columns: dict[str, Figure] = {}
    for subset, _ in COLUMNS.values():
        parts = {sp: g for (s, sp), g in groups.items() if s == subset}
        if subset == "sd-qa":
            parts = {sp: g for sp, g in parts.items() if sp == SDQA_SPLIT}
        if not parts:
            continue
        if len(parts) == 1:
            columns[subset] = splits[f"{subset}/{next(iter(parts))}"]
        else:  # mmsu's domains: every row together, each split's fallback drawn as evaluated
            columns[subset] = _pooled(subset, [splits[f"{subset}/{sp}"] for sp in sorted(parts)])
    return columns, splits


def _pooled(subset: str, figs: list[Figure]) -> Figure:
    n = sum(f.rows for f in figs)
    value = sum((f.value or 0) * f.rows for f in figs) / n if n else None
    strict = sum((f.extra.get("unread_wrong") or 0) * f.rows for f in figs) / n if n else None
    fallback = sum(f.extra.get("fallback", 0) for f in figs)
    extra = {"seed": figs[0].extra.get("seed"), "fallback": fallback,
             "fallback_rate": 100 * fallback / n if n else None, "unread_wrong": strict,
             "splits": len(figs)}  # fmt: skip
    kept = [k for f in figs for k in f.kept_out]
    return Figure(subset, figs[0].evaluator, value, n, extra, None if n else "no row", kept)


def _label(fig: Figure) -> str:
    if fig.value is None:
        return f"absent: {fig.why}"
    text = {"open": "GPT score 1-5, mean of every judge reply; x20 in the Overall",
            "qa": "percent of rows whose judges' majority is 'yes'",
            "mcq": "multiple-choice accuracy, unread replies a seeded random letter",
            "bbh": "BBH accuracy over its four tasks, unread replies a seeded random answer",
            "ifeval": "mean of strict / loose, prompt / instruction level",
            "harm": "refusal rate"}[fig.evaluator]  # fmt: skip
    if "fallback" in fig.extra:
        text += (f" (seed {fig.extra['seed']}; fallback {fig.extra['fallback']} of {fig.rows}, "
                 f"{fig.extra['fallback_rate']:.2f}%)")  # fmt: skip
    if fig.extra.get("ties"):
        text += f"; {fig.extra['ties']} tied votes counted not 'yes'"
    if fig.kept_out:
        text += f"; {len(fig.kept_out)} rows the official script stops on kept out"
    return text


def section(
    rows: Sequence[dict[str, Any]],
    seed: int,
    source: str,
    unanswered: int = 0,
    judge: str | None = None,
) -> dict[str, Any]:
    """The official section: Overall as headline, each column and the unread-wrong Overall as
    labelled variants, every split's figure under ``splits``."""
    from cafe.benchmarks.voicebench.judge import OFFICIAL_JUDGE
    from cafe.benchmarks.voicebench.scorers import column_value

    columns, splits = column_figures(rows, seed)
    by_col = {c: columns.get(s) for c, (s, _) in COLUMNS.items()}
    head = overall(columns)
    strict = overall(columns, strict=True)
    judged_by = judge or ("the file's own" if source == "file" else "not run yet")
    why = f"columns without a figure: {', '.join(head['missing'])}" if head["missing"] else None
    headline = {
        "label": (f"official Overall: mean of the nine leaderboard columns (GPT scores x20), "
                  f"fallback seeded {seed}; GPT judge {judged_by} (the official one is "
                  f"{OFFICIAL_JUDGE})"),
        "total": {"acc": None if head["value"] is None else round(head["value"], 2),
                  "items": len(rows)},
        "columns": head["columns"],
        "seed": seed,
        "unanswered": unanswered,
        "source": source,
    }  # fmt: skip
    if why:
        headline["absent_reason"] = why
    variants: dict[str, Any] = {
        "unread_wrong": {
            "label": "NOT the official figure: Overall with unread multiple-choice and BBH "
            "replies counted wrong instead of a random choice",
            "total": {
                "acc": None if strict["value"] is None else round(strict["value"], 2),
                "items": len(rows),
            },  # fmt: skip
        }
    }
    for col, fig in by_col.items():
        if fig is None:
            continue
        v = column_value(fig)
        variants[col] = {"label": _label(fig), "value": fig.value,
                         "total": {"acc": None if v is None else round(v, 2), "items": fig.rows},
                         "kept_out": {"rows the script stops on": len(fig.kept_out)}}  # fmt: skip
        if fig.evaluator in ("mcq", "bbh") and fig.value is not None:
            variants[f"{col} unread wrong"] = {
                "label": f"NOT the official figure: {col} with its {fig.extra['fallback']} "
                "unread replies counted wrong",
                "total": {"acc": round(fig.extra["unread_wrong"], 2), "items": fig.rows},
            }
    return {
        "rule": ("VoiceBench's evaluators per subset; Overall = mean of the nine leaderboard "
                 "columns"),
        "headline": headline,
        "variants": variants,
        "splits": {k: f.to_dict() for k, f in splits.items()},
        "needs_no_answers": True,  # its evaluators read the rows, not items' answers
    }  # fmt: skip
