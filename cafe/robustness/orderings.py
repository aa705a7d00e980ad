"""Choice-order robustness: K orderings of every multiple-choice item, and what the model did
under them. Ordering 0 is always the original order (the run without --permute-choices), so
the orderings are paired against it item by item.

Modes: ``rotate`` (cyclic rotations: ordering k moves option i to position (i + k) mod n, so
with K = n every option visits every position, as CircularEval does) and ``shuffle`` (seeded
permutations, drawn per item from the seed, the item id and k). The answer key is the option
TEXT (Sample.answer), so a reordered item keeps it; every rule that maps a letter to an option
does so through the item's (reordered) choices, so the official rule scores the reordered item."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

from cafe.prompts import inline_instruction
from cafe.records import Prediction, Sample

MODES = ("rotate", "shuffle")
#: Sample.meta key holding the displayed order: displayed position j shows original option
#: order[j]
ORDER_KEY = "choice_order"


def identity(k: int, of: int, mode: str, seed: int) -> dict[str, Any]:
    """The ordering's part of a run's identity (RunSpec.permutation)."""
    if mode not in MODES:
        raise ValueError(f"unknown ordering mode {mode!r}; choose from {', '.join(MODES)}")
    if not 0 <= k < of:
        raise ValueError(f"ordering {k} outside 0..{of - 1}")
    return {"k": k, "of": of, "mode": mode, "seed": seed}


def order(n: int, k: int, mode: str, seed: int, sample_id: str) -> list[int]:
    """Displayed position j -> original option index, for an item with ``n`` options."""
    if k == 0 or n < 2:
        return list(range(n))
    if mode == "rotate":
        # option i shown at (i + k) mod n: position j shows option (j - k) mod n
        return [(j - k) % n for j in range(n)]
    digest = hashlib.sha256(f"{seed}:{sample_id}:{k}".encode()).digest()
    out = list(range(n))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(out)
    return out


def permute_sample(s: Sample, k: int, mode: str, seed: int) -> Sample:
    """The item as shown under ordering k: choices reordered, the answer (its text) kept, the
    order in meta[ORDER_KEY]. Failed items and open questions pass through unchanged."""
    if s.error is not None or not s.choices:
        return s
    o = order(len(s.choices), k, mode, seed, s.id)
    choices = [s.choices[i] for i in o]
    meta = {**s.meta, ORDER_KEY: o}
    if isinstance(meta.get("instruction"), str) and o != sorted(o):
        # an instruction that writes the options inline (SAKURA's) shows them in the new order
        # too: the prompt and the official judge read it, not the choices
        meta["instruction"] = inline_instruction(s.question, choices)
    return dataclasses.replace(s, choices=choices, meta=meta)


def permute_samples(samples: Sequence[Sample], spec: Mapping[str, Any]) -> list[Sample]:
    if not any(s.choices for s in samples):
        raise ValueError("--permute-choices needs a multiple-choice benchmark: no item has choices")
    return [permute_sample(s, spec["k"], spec["mode"], spec["seed"]) for s in samples]


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


def _pct(num: float, den: int) -> float | None:
    return None if den == 0 else round(100.0 * num / den, 2)


def positional_bias(rows: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """``rows``: (displayed position chosen, number of options) per answered (item, run,
    ordering). Observed answers per position against a uniform pick among each item's options
    (expected count at position j: the sum of 1/n over answers with more than j options), with
    Pearson's chi-square goodness-of-fit statistic and its p (scipy)."""
    if not rows:
        return {"n": 0, "observed": {}, "expected": {}, "chi2": None, "p": None, "df": None}
    width = max(n for _, n in rows)
    obs = [0.0] * width
    exp = [0.0] * width
    for pos, n in rows:
        obs[pos] += 1
        for j in range(n):
            exp[j] += 1.0 / n
    keep = [j for j in range(width) if exp[j] > 0]
    letters = [chr(ord("A") + j) for j in range(width)]
    out: dict[str, Any] = {
        "n": len(rows),
        "observed": {letters[j]: int(obs[j]) for j in keep},
        "expected": {letters[j]: round(exp[j], 2) for j in keep},
        "share": {letters[j]: _pct(obs[j], len(rows)) for j in keep},
        "df": len(keep) - 1,
        "test": "Pearson chi-square goodness of fit against a uniform pick among each item's "
        "options (scipy.stats.chisquare)",
    }
    if len(keep) < 2:
        return {**out, "chi2": None, "p": None}
    from scipy import stats

    chi2, p = stats.chisquare([obs[j] for j in keep], [exp[j] for j in keep])
    return {**out, "chi2": round(float(chi2), 3), "p": float(p)}


def _mean_ci(xs: list[bool], resamples: int, seed: int) -> dict[str, Any]:
    """Percent right over ``xs`` with its percentile-bootstrap 95% interval."""
    import numpy as np

    from cafe.metrics.stats import bootstrap_ci

    arr = np.array([float(x) for x in xs])
    ci = bootstrap_ci(len(arr), lambda idx: 100 * arr[idx].mean(axis=1),
                      resamples=resamples, seed=seed)  # fmt: skip
    return {"acc": _pct(float(arr.sum()), len(arr)), "n": len(arr),
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


def folder_suffix(spec: Mapping[str, Any]) -> str:
    """The ordering's folder beside the original's: ``<real>-perm-rotate1of4``."""
    return f"perm-{spec['mode']}{spec['k']}of{spec['of']}"
