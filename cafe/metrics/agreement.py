"""How far two judges agree on one run (`cafe judge-agreement`: cafe.judge.agreement).

Events are aligned per (item, run): names are normalised (lowercase words; time spans,
underscores and filler words such as "the", "sound" dropped), equal names pair first, then the
remaining ones pair greedily by word overlap (Jaccard >= 0.5); an event only one judge lists gets
the label ``absent`` from the other.
Reported: Cohen's kappa over all aligned events (six labels), one-vs-rest kappa per category, raw
agreement, and the CAFE metric deltas B - A on the (item, run)s both judged ok."""

from __future__ import annotations

import re
from collections.abc import Sequence

from cafe.metrics.cafe import CATEGORIES, FIELDS, METRICS, cafe_metrics
from cafe.records import Judgement

ABSENT = "absent"
JACCARD_MIN = 0.5
_SPAN = re.compile(r"\[[^\]]*\]|\([^)]*\d[^)]*\)")
#: words that name no event ("the dog sound" and "dog" are the same event)
_STOP = frozenset("a an the of sound sounds is are some one audio clip".split())


def normalise(name: str) -> str:
    words = re.findall(r"[a-z]+", _SPAN.sub(" ", name.lower().replace("_", " ")))
    return " ".join(w for w in words if w not in _STOP) or " ".join(words)


def _labelled(j: Judgement) -> list[tuple[str, str]]:
    """(normalised event name, category) for every event the judgement classified."""
    return [(normalise(e), cat) for cat in CATEGORIES for e in getattr(j, FIELDS[cat]) or []]


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(a.split()), set(b.split())
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def align(a: Judgement, b: Judgement) -> list[tuple[str, str]]:
    """(label by A, label by B) for each event either judge classified."""
    left, right = _labelled(a), _labelled(b)
    pairs: list[tuple[str, str]] = []
    free = list(range(len(right)))
    pending = []
    for name, cat in left:  # exact names first
        hit = next((k for k in free if right[k][0] == name), None)
        if hit is None:
            pending.append((name, cat))
        else:
            free.remove(hit)
            pairs.append((cat, right[hit][1]))
    for name, cat in pending:  # then the closest word overlap
        best = max(free, key=lambda k: _jaccard(name, right[k][0]), default=None)
        if best is not None and _jaccard(name, right[best][0]) >= JACCARD_MIN:
            free.remove(best)
            pairs.append((cat, right[best][1]))
        else:
            pairs.append((cat, ABSENT))
    pairs.extend((ABSENT, right[k][1]) for k in free)
    return pairs


def cohen_kappa(x: Sequence[str], y: Sequence[str]) -> float | None:
    """(p_o - p_e) / (1 - p_e); None when undefined (no items, or both raters constant)."""
    n = len(x)
    if n == 0:
        return None
    labels = set(x) | set(y)
    po = sum(a == b for a, b in zip(x, y, strict=True)) / n
    pe = sum((list(x).count(c) / n) * (list(y).count(c) / n) for c in labels)
    if pe == 1.0:
        return None
    return (po - pe) / (1.0 - pe)


def agreement(a: Sequence[Judgement], b: Sequence[Judgement], mode: str = "micro") -> dict:
    ka = {(j.sample_id, j.run_index): j for j in a if j.status == "ok"}
    kb = {(j.sample_id, j.run_index): j for j in b if j.status == "ok"}
    common = sorted(set(ka) & set(kb))
    pairs = [p for k in common for p in align(ka[k], kb[k])]
    xa, xb = [p[0] for p in pairs], [p[1] for p in pairs]
    per_cat = {
        c: cohen_kappa([v == c for v in xa], [v == c for v in xb])  # type: ignore[misc]
        for c in CATEGORIES
    }
    ma = cafe_metrics([ka[k] for k in common], mode)
    mb = cafe_metrics([kb[k] for k in common], mode)
    deltas = {
        m: (mb[m] - ma[m]) if ma[m] is not None and mb[m] is not None else None for m in METRICS
    }
    raw = (sum(p == q for p, q in pairs) / len(pairs)) if pairs else None
    return {"items_compared": len(common), "only_a": len(set(ka) - set(kb)),
            "only_b": len(set(kb) - set(ka)), "events_aligned": len(pairs), "raw_agreement": raw,
            "kappa": cohen_kappa(xa, xb), "kappa_per_category": per_cat,
            "metrics_a": {m: ma[m] for m in METRICS}, "metrics_b": {m: mb[m] for m in METRICS},
            "delta_b_minus_a": deltas, "mode": mode}  # fmt: skip
