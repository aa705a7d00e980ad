"""Counters that accumulate over every invocation on one run folder (calls, cache hits, replies
by status, tokens, cost), with this invocation's figures beside them: after kills and resumes
the folder's totals still say what it cost, and the last figures what the last command did.

Shape (manifest "counters" for the model calls; a judge section's "counters" for its calls):
``{"total": {...}, "this_invocation": {...}, "invocations": n}``. A judge's totals restart when
its spec changes (the judgements they counted were replaced)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

#: the share of the counters the call in progress (one item's, in its own task) has made so
#: far: the clients and caches it goes through add to it (``count_share``)
_SHARE: ContextVar[dict[str, Any] | None] = ContextVar("cafe_call_share", default=None)


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


def count_share(key: str, n: int | float = 1) -> None:
    """Add ``n`` to ``key`` of the share of the item being called (none: nothing to do)."""
    share = _SHARE.get()
    if share is not None:
        share[key] = share.get(key, 0) + n


async def with_share(call: Callable[[Any], Awaitable[Any]], item: Any) -> Any:
    """``call(item)``'s record, carrying in its ``call`` field what the call added to the
    counters (calls sent, cache hits), so the counters can be summed from the records on disk."""
    token = _SHARE.set({})
    try:
        rec = await call(item)
        share = dict(_SHARE.get() or {})
    finally:
        _SHARE.reset(token)
    if hasattr(rec, "call") and isinstance(rec.call, dict):
        rec.call = share
    return rec


def on_disk_counters(previous_section: Any, spec: Mapping[str, Any], now: Mapping[str, Any],
                     on_disk: Mapping[str, Any]) -> dict[str, Any]:  # fmt: skip
    """A section's counters whose totals are those of the records on disk (``on_disk``, every
    key of ``now`` they know) whatever ended the sessions that wrote them; the rest (a cost
    from a ledger) carried on from the previous section's while its spec stands."""
    out = judge_counters(previous_section, spec, now)
    out["total"] = {**out["total"], **on_disk}
    return out


def share_totals(records: Any) -> dict[str, Any]:
    """The sum of the records' shares (``call``: calls, cache hits), zeros where none."""
    total: dict[str, Any] = {"calls": 0, "cache_hits": 0}
    for r in records:
        total = add(total, getattr(r, "call", None) or {})
    return total
