"""Counters that accumulate over every invocation on one run folder (calls, cache hits, replies
by status, tokens, cost), with this invocation's figures beside them: after kills and resumes
the folder's totals still say what it cost, and the last figures what the last command did.

Shape (manifest "counters" for the model calls; a judge section's "counters" for its calls):
``{"total": {...}, "this_invocation": {...}, "invocations": n}``. A judge's totals restart when
its spec changes (the judgements they counted were replaced)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def add(total: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """Field-wise sum; nested mappings are summed the same way, other values taken from
    ``more``."""
    out = dict(total)
    for k, v in more.items():
        old = out.get(k)
        if isinstance(v, bool):
            out[k] = v
        elif isinstance(v, (int, float)):
            base = old if isinstance(old, (int, float)) and not isinstance(old, bool) else 0
            s = base + v
            out[k] = round(s, 6) if isinstance(s, float) else s
        elif isinstance(v, Mapping):
            out[k] = add(old if isinstance(old, Mapping) else {}, v)
        else:
            out[k] = v
    return out


def accumulate(previous: Any, now: Mapping[str, Any]) -> dict[str, Any]:
    """The new counters from the previous ones (None or malformed: a first invocation)."""
    prev = previous if isinstance(previous, Mapping) else {}
    total = prev.get("total") if isinstance(prev.get("total"), Mapping) else {}
    n = prev.get("invocations") if isinstance(prev.get("invocations"), int) else 0
    return {"total": add(total, now), "this_invocation": dict(now), "invocations": n + 1}


def by_status(statuses: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        out[s] = out.get(s, 0) + 1
    return out


def judge_counters(previous_section: Any, spec: Mapping[str, Any], now: Mapping[str, Any]) -> Any:
    """A judge section's counters: the previous section's carried on while it was made under
    the same judge spec (``spec``, its ``to_dict()``), else started afresh."""
    same = isinstance(previous_section, Mapping) and previous_section.get("spec") == dict(spec)
    return accumulate(previous_section.get("counters") if same else None, now)  # type: ignore[union-attr]
