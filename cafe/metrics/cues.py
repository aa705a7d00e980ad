"""Cue recall (MMAR v2 ``cue``: the audio cues an item's answer needs): the share of an item's
cues that the model's reasoning mentions, by an offline matcher and by the CAFE judge given the
cue list as its required events, and how far the cues agree with the required events the CAFE
judge picks from a caption on its own.

The offline matcher (documented rule, no model):
- text is lowercased and split into ``\\w+`` words; stop words ("the", "of", "a", "sound"…) are
  dropped and a light suffix strip maps "barks"/"barking"/"barked" to "bark";
- a cue counts as mentioned when enough of its content words appear in the reasoning: all of
  them for cues of one or two content words, at least two thirds (rounded up) for longer ones
  (quoted speech and long descriptions are paraphrased, not repeated);
- a cue whose words are all stop words is matched on all its words; a cue in a script without
  spaces between words (Chinese, Japanese) is matched as a substring of the reasoning.
It over-counts a reasoning that only denies a cue ("no bell") and misses synonyms: it is the
cheap floor, the judge is the reading. Both are reported, with their agreement."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from cafe.metrics.agreement import JACCARD_MIN, normalise
from cafe.metrics.cafe import fmt
from cafe.records import Judgement, Prediction, Sample

_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
STOP = frozenset(
    "a an the of and or to in on at by for with from is are was were be been it its this that "
    "these those as into than then there their his her he she they them we you i me my our "
    "your sound sounds audio clip some any".split()
)
_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    for suf in _SUFFIXES:
        if len(word) > len(suf) + 2 and word.endswith(suf):
            return word[: -len(suf)]
    return word


def content_words(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    kept = [stem(w) for w in words if w not in STOP]
    return kept or [stem(w) for w in words]


def cue_mentioned(cue: str, reasoning: str, words: set[str] | None = None) -> bool:
    """Whether ``reasoning`` mentions ``cue`` under the offline rule above."""
    if _CJK.search(cue):
        squash = re.sub(r"\s+", "", cue.lower())
        return bool(squash) and squash in re.sub(r"\s+", "", reasoning.lower())
    need = content_words(cue)
    if not need:
        return False
    have = words if words is not None else set(content_words(reasoning))
    hits = sum(w in have for w in need)
    return hits == len(need) if len(need) <= 2 else hits >= math.ceil(2 * len(need) / 3)


def cues_of(sample: Sample) -> list[str]:
    cues = sample.meta.get("cue") or []
    return [str(c) for c in cues if str(c).strip()] if isinstance(cues, list) else [str(cues)]


def reasoning_of(p: Prediction) -> str:
    """The model's reasoning (MMAR's ``thinking_prediction``): the thinking part, the text
    after "Reasoning:", else the whole output."""
    sec = p.sections or {}
    return sec.get("think") or sec.get("reasoning") or p.raw_output or ""


def offline_hits(sample: Sample, p: Prediction) -> list[bool]:
    """Per cue of the item: mentioned in the prediction's reasoning (failed prediction: none)."""
    text = reasoning_of(p) if p.error is None else ""
    words = set(content_words(text))
    return [cue_mentioned(c, text, words) for c in cues_of(sample)]


def _close(a: str, b: str) -> bool:
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return True
    sa, sb = set(na.split()), set(nb.split())
    return bool(sa | sb) and len(sa & sb) / len(sa | sb) >= JACCARD_MIN


def judge_hits(sample: Sample, j: Judgement) -> list[bool]:
    """Per cue: the cue judge listed it (or a close name: agreement.normalise + Jaccard) among
    the matched events."""
    return [any(_close(c, m) for m in j.matched_events) for c in cues_of(sample)]


def overlap(cues: Sequence[str], events: Sequence[str]) -> int:
    """Greedy one-to-one pairs of close names between cues and events."""
    free = list(events)
    n = 0
    for c in cues:
        hit = next((e for e in free if _close(c, e)), None)
        if hit is not None:
            free.remove(hit)
            n += 1
    return n


def _recall_block(
    hits: dict[tuple[str, int], list[bool]],
    by_id: dict[str, Sample],
    breakdowns: dict[str, Callable[[Sample], Any]] | None,
) -> dict[str, Any]:
    """Micro (pooled cues) and macro (mean per (item, run)) recall in percent, by breakdown."""

    def cell(keys: list[tuple[str, int]]) -> dict[str, Any]:
        rows = [hits[k] for k in keys if hits[k]]
        pooled = [h for r in rows for h in r]
        return {
            "recall": round(100.0 * sum(pooled) / len(pooled), 2) if pooled else None,
            "recall_macro": round(100.0 * sum(sum(r) / len(r) for r in rows) / len(rows), 2)
            if rows
            else None,
            "cues": len(pooled),
            "items": len(rows),
        }

    keys = list(hits)
    out = cell(keys)
    out["no_cues"] = sum(1 for k in keys if not hits[k])
    groups: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for k in keys:
        s = by_id.get(k[0])
        for name, func in (breakdowns or {}).items():
            v = func(s) if s else None
            for x in v if isinstance(v, list) else [v]:
                groups[name]["none" if x is None else str(x)].append(k)
    out["breakdowns"] = {
        name: {v: cell(ks) for v, ks in sorted(vals.items())} for name, vals in groups.items()
    }
    return out


def per_item_recall(hits: dict[tuple[str, int], list[bool]]) -> dict[str, float]:
    """Item -> share of its cues mentioned, averaged over its runs (items without cues left out)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for (sid, _), h in hits.items():
        if h:
            acc[sid].append(sum(h) / len(h))
    return {sid: sum(v) / len(v) for sid, v in acc.items()}


def cues_section(
    samples: Sequence[Sample],
    predictions: Sequence[Prediction],
    breakdowns: dict[str, Callable[[Sample], Any]] | None = None,
    cue_judgements: Sequence[Judgement] | None = None,
    judge: dict[str, Any] | None = None,
    cafe_judgements: Sequence[Judgement] | None = None,
) -> dict[str, Any]:
    """The metrics.json "cues" section: offline recall, judge recall (with ``cue_judgements``),
    their agreement per cue, and cues vs the CAFE judge's required events (``cafe_judgements``)."""
    by_id = {s.id: s for s in samples}
    offline = {
        (p.sample_id, p.run_index): offline_hits(by_id[p.sample_id], p)
        for p in predictions
        if p.sample_id in by_id
    }
    section: dict[str, Any] = {
        "offline": {
            **_recall_block(offline, by_id, breakdowns),
            "rule": "content words (stop words out, light suffix strip); all of 1-2, two "
            "thirds of longer cues; substring for CJK (cafe.metrics.cues)",
        }
    }
    if cue_judgements is not None:
        ok = {(j.sample_id, j.run_index): j for j in cue_judgements if j.status == "ok"}
        judged = {k: judge_hits(by_id[k[0]], j) for k, j in ok.items() if k[0] in by_id}
        status = {"ok": 0, "invalid": 0, "failed": 0}
        for j in cue_judgements:
            status[j.status] = status.get(j.status, 0) + 1
        both = [(a, b) for k in judged for a, b in zip(offline.get(k, []), judged[k], strict=False)]
        agree = sum(a == b for a, b in both)
        from cafe.metrics.agreement import cohen_kappa

        section["judge"] = {
            **_recall_block(judged, by_id, breakdowns),
            "judge": judge,
            "judgements": {**status, "total": len(cue_judgements)},
        }
        section["offline_vs_judge"] = {
            "cues": len(both),
            "agreement": round(100.0 * agree / len(both), 2) if both else None,
            "kappa": cohen_kappa([str(a) for a, _ in both], [str(b) for _, b in both]),
        }
    if cafe_judgements:
        section["cues_vs_required_events"] = required_agreement(by_id, cafe_judgements)
    return section


def required_agreement(by_id: dict[str, Sample], judgements: Sequence[Judgement]) -> dict:
    """Do the MMAR cues and the CAFE judge's own ``required_events`` name the same things?
    Pooled precision (share of required events that are cues), recall (share of cues among the
    required events) and F1 over (item, run)s judged ok whose item has cues."""
    n_pair = n_cue = n_req = items = 0
    for j in judgements:
        s = by_id.get(j.sample_id)
        if j.status != "ok" or s is None or not cues_of(s):
            continue
        cues = cues_of(s)
        items += 1
        n_pair += overlap(cues, j.required_events)
        n_cue += len(cues)
        n_req += len(j.required_events)
    p = n_pair / n_req if n_req else None
    r = n_pair / n_cue if n_cue else None
    f1 = 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)
    return {
        "items": items,
        "pairs": n_pair,
        "cues": n_cue,
        "required_events": n_req,
        "precision": None if p is None else round(100 * p, 2),
        "recall": None if r is None else round(100 * r, 2),
        "f1": None if f1 is None else round(100 * f1, 2),
        "match": "names equal after normalising, or word Jaccard >= 0.5 (as judge-agreement)",
    }


def format_cues(section: dict[str, Any]) -> str:
    lines = []
    for who in ("offline", "judge"):
        b = section.get(who)
        if not b:
            continue
        name = "offline matcher" if who == "offline" else f"judge {b['judge']['judge']}"
        lines.append(
            f"cue recall ({name}): {fmt(b['recall'])} pooled over {b['cues']} cues, "
            f"{fmt(b['recall_macro'])} mean per item, {b['items']} (item, run)s; "
            f"{b['no_cues']} without cues"
        )
    if ag := section.get("offline_vs_judge"):
        lines.append(
            f"offline vs judge per cue: agreement {fmt(ag['agreement'])}, kappa {ag['kappa']}"
        )
    if rq := section.get("cues_vs_required_events"):
        lines.append(
            f"cues vs the CAFE judge's required events ({rq['items']} (item, run)s): precision "
            f"{fmt(rq['precision'])}, recall {fmt(rq['recall'])}, F1 {fmt(rq['f1'])}"
        )
    return "\n".join(lines)
