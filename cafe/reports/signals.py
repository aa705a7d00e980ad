"""One view of the "is it listening?" signals of a run: accuracy, CAFE Acc_per, MMAR rubric
score, cue recall and the listening gap per control, with Spearman correlations (and 95%
intervals) between them across the run's items and across the leaderboard's models, so a user
sees whether the independent views agree.

Per item: accuracy = mean correctness over runs; Acc_per = matched / predicted events pooled
over the item's judged runs; rubric = mean rubric score over runs (0 for a wrong answer, so it
tracks accuracy by construction: its correlation is also given over correct items only); cue
recall = share of the item's cues mentioned (offline matcher; the judge's where it ran); gap =
the item's real minus control accuracy."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

from cafe.metrics.stats import spearman_ci
from cafe.store import RunStore, iter_jsonl

#: the metrics.json sections that say whether the model listens: a report shows the signals
#: (and the HTML page its listening part) when any is there
LISTENING_PARTS = ("rubric", "cues", "listening")

SIGNALS = ("acc", "acc_per", "rubric", "cue_recall", "cue_recall_judge")
LABELS = {
    "acc": "accuracy",
    "acc_per": "CAFE Acc_per",
    "rubric": "MMAR rubric score",
    "cue_recall": "cue recall (offline matcher)",
    "cue_recall_judge": "cue recall (judge)",
}


def _label(name: str) -> str:
    if name.startswith("gap_"):
        return f"listening gap ({name[4:].replace('_', '-')})"
    return LABELS.get(name, name)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def item_signals(run_dir: str | Path) -> dict[str, dict[str, float]]:
    """signal -> item id -> value (percent) for every signal the run folder holds."""
    from cafe.metrics.cafe import counts_of
    from cafe.metrics.cues import judge_hits, offline_hits, per_item_recall
    from cafe.metrics.listening import item_accuracy
    from cafe.records import Judgement

    store = RunStore(run_dir)
    metrics = store.read_metrics()
    samples = store.samples()
    by_id = {s.id: s for s in samples}
    preds = store.predictions()
    out: dict[str, dict[str, float]] = {"acc": item_accuracy(samples, preds)}
    counts: dict[str, list] = defaultdict(list)
    for j in store.judgements():
        if j.status == "ok":
            counts[j.sample_id].append(counts_of(j))
    per: dict[str, float] = {}
    for sid, cs in counts.items():
        tot = sum(cs)
        n_pred = tot[0] + tot[1] + tot[2] + tot[3]
        if n_pred:
            per[sid] = 100.0 * float(tot[0]) / float(n_pred)
    if per:
        out["acc_per"] = per
    rub = metrics.get("rubric") or {}
    if rub.get("file") and store.path(rub["file"]).exists():
        scores: dict[str, list[float]] = defaultdict(list)
        for d in iter_jsonl(store.path(rub["file"])):
            scores[d["sample_id"]].append(100.0 * (d.get("score") or 0.0))
        out["rubric"] = {sid: _mean(v) for sid, v in scores.items()}
    cues = metrics.get("cues") or {}
    if cues:
        hits = {
            (p.sample_id, p.run_index): offline_hits(by_id[p.sample_id], p)
            for p in preds
            if p.sample_id in by_id
        }
        out["cue_recall"] = {k: 100.0 * v for k, v in per_item_recall(hits).items()}
        jf = ((cues.get("judge") or {}).get("judge") or {}).get("file")
        if jf and store.path(jf).exists():
            js = [Judgement.from_dict(d) for d in iter_jsonl(store.path(jf))]
            jh = {
                (j.sample_id, j.run_index): judge_hits(by_id[j.sample_id], j)
                for j in js
                if j.status == "ok" and j.sample_id in by_id
            }
            out["cue_recall_judge"] = {k: 100.0 * v for k, v in per_item_recall(jh).items()}
    for name, c in ((metrics.get("listening") or {}).get("controls") or {}).items():
        ctl_dir = c.get("run_dir")
        if not ctl_dir or not Path(ctl_dir).exists():
            continue
        ctl = item_accuracy(samples, RunStore(ctl_dir).predictions())
        out["gap_" + name.replace("-", "_")] = {i: out["acc"][i] - ctl[i] for i in out["acc"]}
    return out


def overall(metrics: dict[str, Any]) -> dict[str, tuple[float | None, list | None]]:
    """signal -> (run value, 95% interval or None) from metrics.json."""
    acc = metrics.get("accuracy") or {}
    caf = metrics.get("cafe") or {}
    rub = metrics.get("rubric") or {}
    cues = metrics.get("cues") or {}
    out: dict[str, tuple[float | None, list | None]] = {
        "acc": ((acc.get("total") or {}).get("acc"), acc.get("ci95")),
        "acc_per": (caf.get("acc_per"), (caf.get("ci95") or {}).get("acc_per")),
        "rubric": (rub.get("score"), rub.get("ci95")),
        "cue_recall": ((cues.get("offline") or {}).get("recall"), None),
        "cue_recall_judge": ((cues.get("judge") or {}).get("recall"), None),
    }
    for name, c in ((metrics.get("listening") or {}).get("controls") or {}).items():
        out["gap_" + name.replace("-", "_")] = (c.get("gap"), c.get("ci95"))
    return {k: v for k, v in out.items() if v[0] is not None}


def _corr_rows(values: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for a, b in combinations(list(values), 2):
        keys = sorted(set(values[a]) & set(values[b]))
        res = spearman_ci([values[a][k] for k in keys], [values[b][k] for k in keys])
        rows.append({"a": a, "b": b, **res})
    return rows


def run_signals(run_dir: str | Path, board: Any = None) -> dict[str, Any]:
    """The run's signals, their item-level correlations, and (with a leaderboard) the model-level
    ones over the rows of the same benchmark and version."""
    from cafe.reports.freshness import current_metrics

    store = RunStore(run_dir)
    metrics = current_metrics(store).metrics  # a stale section gives no signal
    items = item_signals(run_dir)
    section: dict[str, Any] = {
        "values": {k: {"value": v, "ci95": ci} for k, (v, ci) in overall(metrics).items()},
        "across_items": _corr_rows(items),
    }
    if "rubric" in items and "acc" in items:  # rubric is 0 when wrong: also within correct ones
        right = {k for k, v in items["acc"].items() if v == 100.0}
        sub = {k: {i: v for i, v in vals.items() if i in right} for k, vals in items.items()}
        section["across_correct_items"] = [
            r
            for r in _corr_rows(sub)
            if "rubric" in (r["a"], r["b"]) and "acc" not in (r["a"], r["b"])
        ]
    if board is not None:
        bench = store.read_manifest().get("bench") or {}
        rows = board.select(benchmark=bench.get("name"), version=bench.get("version"))
        names = [*SIGNALS, *sorted({k for r in rows for k in r.metrics if k.startswith("gap_")})]
        per_model = {
            s: {f"{r.model}#{r.index}": r.metrics[s] for r in rows if r.metrics.get(s) is not None}
            for s in names
        }
        per_model = {s: v for s, v in per_model.items() if len(v) >= 3}
        section["across_models"] = _corr_rows(per_model)
        section["models"] = len(rows)
    return section


def format_signals(section: dict[str, Any]) -> str:
    """Markdown: the signals, then Spearman's rho between each pair (items; models)."""

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines = ["| signal | value | 95% interval |", "|---|---:|---|"]
    for k, v in section["values"].items():
        ci = v.get("ci95")
        lines.append(
            f"| {_label(k)} | {f(v['value'])} | {f'[{f(ci[0])}, {f(ci[1])}]' if ci else '-'} |"
        )

    def rho(r: dict[str, Any] | None) -> str:
        if r is None or r.get("rho") is None:
            return "-" if r is None else f"- (n {r['n']})"
        ci = r.get("ci95")
        band = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        return f"{r['rho']:.2f}{band} (n {r['n']})"

    models = {(r["a"], r["b"]): r for r in section.get("across_models", [])}
    correct = {(r["a"], r["b"]): r for r in section.get("across_correct_items", [])}
    lines += ["", "| pair | Spearman ρ across items | across correct items | across models |",
              "|---|---|---|---|"]  # fmt: skip
    for r in section["across_items"]:
        key = (r["a"], r["b"])
        lines.append(
            f"| {_label(r['a'])} ~ {_label(r['b'])} | {rho(r)} | "
            f"{rho(correct.get(key)) if key in correct else '-'} | "
            f"{rho(models.get(key)) if key in models else '-'} |"
        )
    return "\n".join(lines) + "\n"
