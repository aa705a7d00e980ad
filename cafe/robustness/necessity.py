"""Audio necessity per item: does answering it need the audio? The same items run four ways
(the real audio; caption-only: no audio, a caption of the clip given as text; text-only: the
prompt alone; silence), and each item gets one label:

- ``answerable from text``: right with no audio at all (text-only or silence);
- ``recoverable from a caption``: not that, but right from the caption alone;
- ``needs the audio``: neither, and right with the real audio;
- ``never right``: right under no condition.

The items that need the audio are the last two (nothing without the clip answers them); the
accuracy on them, with its bootstrap interval, is the score that only listening earns. An item
is "right" under a condition when most of its runs are. The caption is the benchmark's reference
caption (Sample.caption) or a captioner's (``cafe caption`` file), named in the run's identity;
the items as caption-only shows them are cafe.controls.caption_only_samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cafe.records import Sample

LABELS = ("needs the audio", "recoverable from a caption", "answerable from text", "never right")
NEEDED = ("needs the audio", "never right")  # nothing without the clip answers these
CONDITIONS = ("real", "caption", "text-only", "silence")


def verdict(real: bool, caption: bool | None, text_only: bool, silence: bool) -> str:
    """One item's label from whether it was right under each condition (``caption`` None: no
    caption for the item, so it cannot be recovered from one)."""
    if text_only or silence:
        return "answerable from text"
    if caption:
        return "recoverable from a caption"
    return "needs the audio" if real else "never right"


def _right(acc: Mapping[str, float], sid: str) -> bool:
    return acc.get(sid, 0.0) > 50.0  # most of its runs right


def necessity_section(
    samples: Sequence[Sample],
    item_acc: Mapping[str, Mapping[str, float]],
    caption_ok: set[str],
    conditions: Mapping[str, Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``item_acc``: condition -> item -> percent right over runs (cafe.metrics.listening
    item_accuracy); ``caption_ok``: items that had a caption; ``conditions``: what each ran as
    (folders, caption source). Returns the real run's metrics.json "necessity" section."""
    import numpy as np

    from cafe.metrics.stats import bootstrap_ci

    ids = sorted(s.id for s in samples if s.error is None)
    items = {}
    for i in ids:
        cap = _right(item_acc["caption"], i) if i in caption_ok else None
        items[i] = verdict(_right(item_acc["real"], i), cap, _right(item_acc["text-only"], i),
                           _right(item_acc["silence"], i))  # fmt: skip
    counts = {lab: sum(v == lab for v in items.values()) for lab in LABELS}
    needed = [i for i in ids if items[i] in NEEDED]
    arr = np.array([item_acc["real"].get(i, 0.0) for i in needed])
    ci = bootstrap_ci(len(arr), lambda idx: arr[idx].mean(axis=1), resamples=resamples, seed=seed)
    acc = {c: (round(float(np.mean([item_acc[c].get(i, 0.0) for i in ids])), 2) if ids else None)
           for c in CONDITIONS}  # fmt: skip
    return {
        "items": len(ids),
        "counts": counts,
        "share": {k: (round(100.0 * v / len(ids), 2) if ids else None) for k, v in counts.items()},
        "no_caption": len([i for i in ids if i not in caption_ok]),
        "audio_needed": {
            "n": len(needed),
            "acc": round(float(arr.mean()), 2) if len(arr) else None,
            "ci95": [round(ci[0], 2), round(ci[1], 2)] if ci else None,
            "label": "accuracy with the real audio on the items nothing without the clip "
            "answers (needs the audio + never right); percent, percentile bootstrap over items",
        },
        "accuracy": acc,
        "conditions": dict(conditions),
        "rule": "right = most runs right; answerable from text (text-only or silence right) > "
        "recoverable from a caption > needs the audio (real right) > never right",
        "labels": items,
    }


def item_list(section: Mapping[str, Any], labels: Sequence[str] = ("needs the audio",)) -> str:
    """The ids with any of ``labels``, one a line (what `cafe run --ids FILE` reads)."""
    bad = [lab for lab in labels if lab not in LABELS]
    if bad:
        raise ValueError(f"unknown label(s) {bad}; choose from {', '.join(LABELS)}")
    ids = [i for i, lab in section["labels"].items() if lab in labels]
    return "".join(f"{i}\n" for i in ids)


def format_necessity(section: Mapping[str, Any]) -> str:
    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.2f}"

    lines = [f"audio necessity over {section['items']} items (right = most runs right)"]
    for lab in LABELS:
        lines.append(f"  {lab:<27} {section['counts'][lab]:>5}  ({f(section['share'][lab])}%)")
    n = section["audio_needed"]
    ci = n["ci95"]
    lines.append(
        f"  accuracy on the {n['n']} items only the audio answers (needs the audio + never "
        f"right): {f(n['acc'])}" + (f" [{f(ci[0])}, {f(ci[1])}]" if ci else "")
    )
    acc = section["accuracy"]
    lines.append("  accuracy per condition: " + ", ".join(f"{c} {f(acc[c])}" for c in CONDITIONS))
    cap = (section["conditions"].get("caption") or {}).get("source")
    if cap:
        lines.append(f"  captions: {cap}" + (f"; {section['no_caption']} items had none"
                                             if section["no_caption"] else ""))  # fmt: skip
    return "\n".join(lines)
