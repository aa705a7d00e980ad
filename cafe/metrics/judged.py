"""The metrics.json "judged_accuracy" section from Verdict records (cafe.judge.answer): the
benchmark's rule scores the option the answer judge named for each (item, run), labelled with
the judge (the paper's † figures, beside the official headline, never instead of it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cafe.records import Prediction, Sample, Verdict


def judged_section(
    samples: Sequence[Sample], predictions: Sequence[Prediction], verdicts: Sequence[Verdict],
    judge: Any, breakdowns: dict[str, Any] | None, runs: int | None, rule: Any,
) -> dict[str, Any]:  # fmt: skip
    """The "judged_accuracy" section: the benchmark's rule on the judge-named choice."""
    from cafe.benchmarks.scoring import accuracy_section

    by_key = {(v.sample_id, v.run_index): v for v in verdicts}
    judged = []
    for p in predictions:
        v = by_key.get((p.sample_id, p.run_index))
        choice = v.choice if v is not None else None
        judged.append(replace(p, answer=choice, answer_text=choice, parse_status="ok"))
    acc = accuracy_section(list(samples), judged, breakdowns, runs=runs, rule=rule)
    return {
        "label": f"judged accuracy: {judge.identity} names the option each output chose, then "
        "the benchmark's rule (the paper's † figures; not the official headline)",
        "judge": {
            "judge": judge.identity,
            "template_hash": judge.template_hash,
            "temperature": 0.0,
            "thinking": judge.thinking,
        },  # fmt: skip
        "spec": judge.spec.to_dict(),
        "total": acc["total"],
        "breakdowns": acc["breakdowns"],
        "runs": acc["runs"],
        "verdicts": judged_statuses(verdicts),
    }


def judged_statuses(verdicts: Sequence[Verdict]) -> dict[str, int]:
    out = dict.fromkeys(("ok", "none", "unparseable", "failed"), 0)
    for v in verdicts:
        out[v.status] = out.get(v.status, 0) + 1
    return out


def format_judged(sec: dict[str, Any]) -> str:
    """What `cafe judge-accuracy` prints of its section."""
    t = sec["total"]
    # over no item with an answer there is no figure (acc None), never 0.00
    shown = "absent (no item with an answer)" if t["acc"] is None else f"{t['acc']:.2f}"
    return (f"{sec['label']}\n  total {shown} ({t['correct']}/{t['total']}); "
            f"verdicts {sec['verdicts']}")  # fmt: skip
