"""Selective judging (``select_items``): an (item, run) whose judge prompt equals another's
(runs that decoded alike) is judged once and the judgement shared (a cafe.execution.Selection);
a judge may also decide items without a call (``needs_call(item) -> False`` plus
``decide(item)``, e.g. where the official rule already decides); ``saving`` prices it. How
calls are delivered (direct, --batch, --dry-run, the ledger) is cafe.caller.call_plan's; their
printed account, cafe.clients.calls' (format_dry_run, cost_lines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.execution import Selection
from cafe.judge.base import Judge, JudgeItem
from cafe.records import Judgement


def select_items(judge: Judge, items: Sequence[JudgeItem | Judgement], selective: bool
                 ) -> Selection:  # fmt: skip
    if not selective:
        return Selection(list(items))
    sel = Selection([])
    first: dict[str, tuple[str, int]] = {}  # a prompt -> the (item, run) that asks it
    needs = getattr(judge, "needs_call", None)
    prompt_for = getattr(judge, "prompt_for", None)
    for it in items:
        if isinstance(it, Judgement):  # settled already (a missing sample's): kept as it is
            sel.todo.append(it)
            continue
        key = (it.prediction.sample_id, it.prediction.run_index)
        if needs is not None and not needs(it):
            sel.decided.append(judge.decide(it))  # type: ignore[attr-defined]
            continue
        usable = it.prediction.raw_output is not None and not it.prediction.error
        prompt = prompt_for(it) if prompt_for is not None and usable else None
        if prompt is not None and first.setdefault(prompt, key) != key:
            sel.copies[key] = first[prompt]  # another run asks the same: it shares that one
            continue
        sel.todo.append(it)
    return sel


def saving(sel: Selection, plan: Any, calls_sent: int, judged_now: int) -> dict[str, Any]:
    """Calls (and their estimated price) selective judging did not make: the mean per judged
    item, times the items that needed none."""
    skipped = len(sel.copies) + len(sel.decided)
    per_item_calls = calls_sent / judged_now if judged_now else 0.0
    spent = plan.ledger.summary()["total_cost_usd"] if plan.ledger is not None else None
    per_item_cost = spent / judged_now if spent is not None and judged_now else None
    return {
        "items_without_own_call": skipped,
        "calls_saved_est": round(per_item_calls * skipped, 1),
        "cost_saved_usd_est": None if per_item_cost is None else round(per_item_cost * skipped, 6),
    }
