"""The metrics.json "official" section for benchmarks whose official figure is not the accuracy
section's headline: a denominator that drops format failures (MMSU, AIR-Bench), an LLM judge
(SAKURA). One tally over (item, run) pairs, with the official script's breakdowns and its
averages, so each benchmark module only says which pairs are right, wrong or dropped."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from cafe.records import Prediction, Sample

#: (sample, its prediction or None) -> True (right) | False (wrong) | None (dropped from the
#: denominator, as the official script drops a format failure)
Verdict = Callable[[Sample, Prediction | None], bool | None]


#: where scripts and tools put a prediction: every benchmark's official key and common others
KNOWN_KEYS = ("model_output", "answer_prediction", "model_prediction", "prediction", "response")
#: the "reading" of an official section that counts a file's rows as the script does
ROWS_READING = "rows"


def row_id(row: dict[str, Any], id_keys: tuple[str, ...]) -> str | None:
    """A row's item id: its first present ``id_keys`` field, as text."""
    for k in id_keys:
        v = row.get(k)
        if v is not None:
            return str(v)
    return None


def percent(correct: int, total: int) -> float | None:
    """correct / total as a percentage; over no item there is no figure (None), never 0.00."""
    return round(100.0 * correct / total, 2) if total else None


def cell(correct: int, total: int) -> dict[str, Any]:
    """correct, total and their percentage (acc None over no item)."""
    return {"correct": correct, "total": total, "acc": percent(correct, total)}


def run_ids(predictions: Sequence[Prediction], runs: int | None) -> list[int]:
    """The runs an accuracy counts: 0..runs-1 when given, plus any present (at least one), as
    cafe.benchmarks.scoring.accuracy_section counts them."""
    return sorted({p.run_index for p in predictions} | set(range(runs or 0))) or [0]


def tally(
    samples: Sequence[Sample],
    predictions: Sequence[Prediction],
    verdict: Verdict,
    breakdowns: dict[str, Callable[[Sample], Any]],
    runs: int | None = None,
) -> dict[str, Any]:
    """Micro accuracy over every scorable (item, run) pair: total, dropped (pairs the verdict
    left out), and one cell per breakdown value."""
    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    counted = run_ids(predictions, runs)  # once: a comprehension's inner loop re-evaluates
    pairs = [(s, verdict(s, by_key.get((s.id, r))))
             for s in samples if s.answer is not None
             for r in counted]  # fmt: skip
    return tally_pairs(pairs, breakdowns)


def tally_pairs(
    pairs: Sequence[tuple[Sample, bool | None]], breakdowns: dict[str, Callable[[Sample], Any]]
) -> dict[str, Any]:
    """Micro accuracy over (item, verdict) pairs, None left out and counted as dropped: total,
    dropped and one cell per breakdown value."""
    correct = total = dropped = 0
    cells: dict[str, dict[str, list[int]]] = {n: defaultdict(lambda: [0, 0]) for n in breakdowns}
    for s, v in pairs:
        if v is None:
            dropped += 1
            continue
        correct += v
        total += 1
        for n, fn in breakdowns.items():
            k = str(fn(s))
            cells[n][k][0] += v
            cells[n][k][1] += 1
    return {
        "total": cell(correct, total),
        "dropped": dropped,
        "breakdowns": {n: {k: cell(*c[k]) for k in sorted(c)} for n, c in cells.items()},
    }


STOPS_LABEL = (
    "lenient: the official rule over the rows the official script scores, leaving out those "
    "it stops on (named beside the headline); NOT the official figure: the script prints none"
)


def without_stops(headline: dict[str, Any]) -> dict[str, Any]:
    """Where the official script would stop (``headline["stopped"]``: count, items, reasons;
    or ``empty_cells``): the headline's figure moves beside it, labelled (returned as
    {"script_stops_left_out": figure}), and the headline keeps no figure, saying why; the
    script prints none. {} where it would not stop."""
    stopped = headline.get("stopped") or {}
    if not stopped.get("count") and not headline.get("empty_cells"):
        return {}
    keys = ("total", "dropped", "format_failures", "left_out", "breakdowns", "average")
    lenient = {"label": STOPS_LABEL, **{k: headline[k] for k in keys if k in headline}}
    n, cells = stopped.get("count") or 0, headline.get("empty_cells") or []
    on = ([f"{n} row(s) of the file"] if n else []) + (
        [f"{len(cells)} row(s) of its table with no scored reply"] if cells else [])  # fmt: skip
    why = "; ".join(f"{c} x {r}" for r, c in (stopped.get("reasons") or {}).items())
    if isinstance(headline.get("average"), dict):
        headline["average"] = dict.fromkeys(headline["average"])
    headline.update(
        total=None,
        breakdowns={k: {} for k in headline.get("breakdowns") or {}},
        absent_reason=f"the official script stops on {' and '.join(on)} and prints no figure "
        f"({why})",
    )
    return {"script_stops_left_out": lenient}


def mean_of(cells: dict[str, dict[str, Any]], keys: Sequence[str] | None = None) -> float | None:
    """The unweighted mean of some cells' accuracies (a script's "average of the task rows")."""
    accs = [cells[k]["acc"] for k in (keys if keys is not None else sorted(cells)) if k in cells]
    accs = [a for a in accs if a is not None]
    return round(statistics.fmean(accs), 2) if accs else None


def answered(p: Prediction | None) -> str | None:
    """The answer text a rule reads, or None where the pair has no usable prediction."""
    from cafe.benchmarks.string_match import official_text

    if p is None or p.error is not None:
        return None
    return official_text(p)


def format_official(section: dict[str, Any]) -> str:
    """The "official" section as table lines: the headline, then each labelled variant, with
    its dropped pairs, what the official script kept out or read its own way (counted) and would
    stop on (named), and averages; a figure over no item is absent with its reason."""
    lines = [f"official rule: {section.get('rule', '')}"]
    rows = [("headline", section.get("headline") or {})]
    rows += list((section.get("variants") or {}).items())
    for name, fig in rows:
        t = fig.get("total")
        if not t or t.get("acc") is None:
            figure = "absent" + (f" ({fig['absent_reason']})" if fig.get("absent_reason") else "")
        elif "correct" in t:
            figure = f"{t['acc']:.2f} ({t['correct']}/{t['total']})"
        else:
            figure = f"{t['acc']:.2f} ({t.get('items')} (item, run) pairs)"
        extra = f"; dropped {fig['dropped']}" if fig.get("dropped") else ""
        if fig.get("left_out"):  # what the dropped are
            extra += " (" + ", ".join(f"{k} {v}" for k, v in fig["left_out"].items()) + ")"
        extra += "".join(f"; {k.replace('_', ' ')} {v}" for k, v in _counts(fig))
        if fig.get("average"):
            extra += "; average " + averages(fig)
        lines.append(f"  {name}: {figure}{extra}\n    {fig.get('label', '')}")
        lines += _stopped_lines(fig)
    return "\n".join(lines)


def averages(fig: dict[str, Any]) -> str:
    """A figure's averages as "name value"; one over no row is "absent", never "None"."""
    avg = fig.get("average") or {}
    return ", ".join(f"{k} {'absent' if v is None else v}" for k, v in avg.items())


#: counts a figure carries beside it (what the official script could not score, or read its own
#: way), printed where they are not zero
COUNT_KEYS = (
    "null_outputs",
    "unknown_identifiers",
    "open_replies_with_defaults",
    "open_replies_scored_in_thinking",
)


def _counts(fig: dict[str, Any]) -> list[tuple[str, int]]:
    kept = fig.get("kept_out") or {}
    out = [(f"kept out ({k})", v) for k, v in kept.items() if isinstance(v, int) and v]
    out += [(k, fig[k]) for k in COUNT_KEYS if fig.get(k)]
    if fig.get("absent"):
        out.append(("items absent from the file (in no denominator)", fig["absent"]))
    out += [(k, v) for k, v in (fig.get("row_cases") or {}).items() if v]  # string_match_rows
    return out


def _stopped_lines(fig: dict[str, Any]) -> list[str]:
    """What the official script would stop (crash) on, named, beside the figure that leaves it
    out: the letter rule's ``stopped`` ({count, items, reasons}) or MMAU-Pro's
    ``crashed_items``."""
    stopped = fig.get("stopped") or {}
    items = stopped.get("items") or fig.get("crashed_items") or []
    count = stopped.get("count") or len(items)
    if not count and not fig.get("empty_cells"):
        return []
    shown = ", ".join(items[:20]) + (f" and {len(items) - 20} more" if len(items) > 20 else "")
    lines = [f"    left out, the official script would stop on them: {count} "
             f"item(s){': ' + shown if shown else ''}"] if count else []  # fmt: skip
    lines += [f"      {n} x {reason}" for reason, n in (stopped.get("reasons") or {}).items()]
    if fig.get("empty_cells"):
        lines.append(f"      rows with no scored reply: {', '.join(fig['empty_cells'])}")
    return lines
