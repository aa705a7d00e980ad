"""Choice-order robustness: K orderings of every multiple-choice item, and what the model did
under them. Ordering 0 is always the original order (the run without --permute-choices), so
the orderings are paired against it item by item.

How an item looks under an ordering (rotate / shuffle, the order kept in meta[ORDER_KEY]) is
cafe.benchmarks.choice_order's; here: which option a reply chose, the "choices" section
(circular accuracy, consistency, positional bias) and its console lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cafe.benchmarks.choice_order import ORDER_KEY, percent, positional_bias
from cafe.records import Prediction, Sample


def chosen_option(p: Prediction | None, shown: Sample) -> tuple[int, int] | None:
    """(displayed position, original option index) of the option a prediction chose, or None
    (unanswered, unmapped, failed). Mapped by POSITION: the option text names its position only
    where the texts are distinct and none reads as a letter; otherwise (options "A".."D", or a
    text shown twice) the reply's letter says the position, and a reply without one is
    unmapped (a text would credit a model that always answers "A" with one option throughout)."""
    if p is None or p.error is not None or p.answer is None:
        return None
    from cafe.parsing import reply_letter

    texts = [c.strip() for c in shown.choices]
    folded = [t.casefold() for t in texts]
    as_letters = [reply_letter(t) for t in texts]  # an option "B" reads as position B
    if len(set(folded)) == len(folded) and not any(i is not None and i < len(texts)
                                                   for i in as_letters):  # fmt: skip
        pos = texts.index(p.answer.strip()) if p.answer.strip() in texts else None
    else:
        pos = reply_letter(p.answer_text if p.answer_text is not None else p.raw_output)
        pos = pos if pos is not None and pos < len(texts) else None
    if pos is None:
        return None
    o = shown.meta.get(ORDER_KEY) or list(range(len(texts)))
    return pos, o[pos]


def _r2(v: Any) -> float | None:
    return None if v is None else round(float(v), 2)


def _mean_ci(xs: list[bool], resamples: int, seed: int) -> dict[str, Any]:
    """Percent right over ``xs`` with its percentile-bootstrap 95% interval."""
    import numpy as np

    from cafe.metrics.stats import bootstrap_ci

    arr = np.array([float(x) for x in xs])
    ci = bootstrap_ci(len(arr), lambda idx: 100 * arr[idx].mean(axis=1),
                      resamples=resamples, seed=seed)  # fmt: skip
    return {"acc": percent(float(arr.sum()), len(arr)), "n": len(arr),
            "ci95": [_r2(x) for x in ci] if ci else None}  # fmt: skip


def _vs_original(xs: list[bool], original: list[bool], resamples: int, seed: int) -> dict:
    """The paired difference (``xs`` minus the original order) with its 95% interval."""
    from cafe.metrics.stats import paired_bootstrap

    boot = paired_bootstrap([100.0 * x for x in xs], [100.0 * x for x in original],
                            resamples=resamples, seed=seed)  # fmt: skip
    return {"diff": _r2(boot["diff"]),
            "ci95": [_r2(x) for x in boot["ci95"]] if boot["ci95"] else None}  # fmt: skip


def choices_section(
    samples: Sequence[Sample],
    orderings: Sequence[Mapping[str, Any]],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The original run's metrics.json "choices" section. ``samples``: the original items;
    ``orderings``: per ordering k (0 first: the original), {"spec": identity, "samples": the
    items as shown, "predictions": [...], "run_dir": str}. A unit is an (item, run) pair; an
    item with no prediction in an ordering counts wrong there (as in the accuracy section)."""
    if not orderings or orderings[0]["spec"]["k"] != 0:
        raise ValueError("the orderings must start with ordering 0 (the original order)")
    mc = [s for s in samples if s.error is None and s.choices]
    runs = sorted({p.run_index for o in orderings for p in o["predictions"]}) or [0]
    units = [(s.id, r) for s in sorted(mc, key=lambda s: s.id) for r in runs]
    per: list[dict[tuple[str, int], Prediction]] = [
        {(p.sample_id, p.run_index): p for p in o["predictions"]} for o in orderings
    ]
    shown = [{s.id: s for s in o["samples"]} for o in orderings]
    correct = [[bool(getattr(d.get(u), "correct", False)) for u in units] for d in per]
    picks = [
        [chosen_option(d.get(u), sh.get(u[0])) if u[0] in sh else None for u in units]
        for d, sh in zip(per, shown, strict=True)
    ]
    n = len(units)
    circular = [all(c[i] for c in correct) for i in range(n)]
    consistent = [
        all(pk[i] is not None for pk in picks) and len({pk[i][1] for pk in picks}) == 1
        for i in range(n)
    ]
    n_choices = {s.id: len(s.choices) for s in mc}
    bias_rows = [
        (pk[i][0], n_choices[units[i][0]]) for pk in picks for i in range(n) if pk[i] is not None
    ]
    boot = {"resamples": resamples, "seed": seed}
    by_ordering = []
    for o, c in zip(orderings, correct, strict=True):
        entry = {**dict(o["spec"]), "run_dir": o.get("run_dir"), **_mean_ci(c, **boot)}
        if o["spec"]["k"] != 0:
            entry["vs_original"] = _vs_original(c, correct[0], **boot)
        by_ordering.append(entry)
    spec0 = orderings[-1]["spec"]
    return {
        "orderings": len(orderings),
        "mode": spec0["mode"],
        "seed": spec0["seed"],
        "units": n,
        "unit": "(item, run) pair; an item with no prediction counts wrong",
        "by_ordering": by_ordering,
        "circular": {
            **_mean_ci(circular, **boot),
            "label": "circular accuracy: right under every ordering",
            "vs_original": _vs_original(circular, correct[0], **boot),
        },
        "consistency": {
            **_mean_ci(consistent, **boot),
            "label": "consistency: the same underlying option chosen under every ordering "
            "(right or wrong)",
        },
        "positional_bias": positional_bias(bias_rows),
        "method": f"percent; percentile bootstrap over (item, run) units, {resamples} resamples, "
        f"seed {seed}; vs_original: paired (ordering minus original order)",
    }


def format_choices(section: Mapping[str, Any]) -> str:
    """The console lines of a "choices" section."""

    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.2f}"

    def ci(c: Any) -> str:
        return f" [{f(c[0])}, {f(c[1])}]" if c else ""

    lines = [
        f"choice order: {section['orderings']} orderings ({section['mode']}, seed "
        f"{section['seed']}) over {section['units']} (item, run) units"
    ]
    for o in section["by_ordering"]:
        vs = o.get("vs_original")
        extra = f"  vs original {f(vs['diff'])}{ci(vs['ci95'])}" if vs else "  (original order)"
        lines.append(f"  ordering {o['k']}: acc {f(o['acc'])}{ci(o['ci95'])}{extra}")
    c, k = section["circular"], section["consistency"]
    lines.append(
        f"  circular accuracy (right under every ordering) {f(c['acc'])}{ci(c['ci95'])}  vs "
        f"original {f(c['vs_original']['diff'])}{ci(c['vs_original']['ci95'])}"
    )
    lines.append(f"  consistency (same option under every ordering) {f(k['acc'])}{ci(k['ci95'])}")
    b = section["positional_bias"]
    if b["n"]:
        shares = ", ".join(f"{p} {f(v)}" for p, v in b["share"].items())
        chi = "–" if b["chi2"] is None else f"{b['chi2']:.2f}"
        pv = "–" if b["p"] is None else f"{b['p']:.3g}"
        lines.append(
            f"  positional bias: answers per position (percent) {shares}; chi-square {chi} "
            f"(df {b['df']}, p {pv}) against uniform over {b['n']} answers"
        )
    else:
        lines.append("  positional bias: no answered item (no test)")
    return "\n".join(lines)


def capped_orderings(samples: Sequence[Sample], k: int, mode: str) -> int:
    """K, or the number of different orderings the items can show when K asks for more (rotate:
    the most options of an item; shuffle: its factorial), said on stderr: K = 100000 on items
    of 4 options would plan 99,999 folders where 3 orderings show all there is."""
    import math
    import sys

    n = max((len(s.choices) for s in samples if s.error is None and s.choices), default=0)
    distinct = n if mode == "rotate" else math.factorial(n)
    if 2 <= distinct < k:
        print(f"--permute-choices {k}: the items have at most {n} options, so {mode} shows "
              f"{distinct} different orderings; running {distinct} (the original and "
              f"{distinct - 1} more)", file=sys.stderr)  # fmt: skip
        return distinct
    return k
