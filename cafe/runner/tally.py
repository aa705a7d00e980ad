"""The folder's counters kept in step with predictions.jsonl, whatever ended a session.

Generation runs ahead of the writes (batches finish on worker threads while an earlier one is
being written), so figures read from the cache or the adapter at write time count batches not
yet on disk. Instead every prediction carries its own share (``Prediction.call``: a call made,
a cache hit or miss, its tokens and cost) and the counters are the sum over the predictions
written: a batch's counts enter the manifest with the write that records it.

The two files are tied by ``COUNTED``, the length of predictions.jsonl the manifest's counters
cover. The runner appends a batch, then writes the manifest with its counts and the new length;
a manifest write that fails (a full disk, Ctrl-C) takes the batch's lines back out, and lines a
kill left past ``COUNTED`` are counted from their own shares when the folder is next opened."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cafe.counters import accumulate, add
from cafe.records import Completion, Prediction

#: manifest key: the bytes of predictions.jsonl that its counters and usage cover
COUNTED = "predictions_counted"
#: what an API adapter's usage adds to the folder's counters
TOKEN_COUNTERS = ("prompt_tokens", "completion_tokens", "cost_usd")


def call_share(completion: Completion, looked_up: bool) -> dict[str, Any]:
    """One item's share of the counters: a cache hit, or a call (a cache miss when the cache
    was looked up) with the tokens and cost its reply reported (API adapters)."""
    backend = completion.backend
    if backend.get("cached"):
        return {"cache_hits": 1}  # replayed: costs nothing now
    share: dict[str, Any] = {"calls": 1}
    if looked_up:
        share["cache_misses"] = 1
    if "usage" in backend:  # a served model's reply: what it reported using
        usage = backend.get("usage") or {}
        share["prompt_tokens"] = usage.get("prompt_tokens") or 0
        share["completion_tokens"] = usage.get("completion_tokens") or 0
        share["cost_usd"] = backend.get("cost_usd") or 0.0
    return share


def counts_reply(p: Prediction) -> bool:
    """Whether a prediction is a reply the counters count (bad metadata never reached a model)."""
    return p.sections.get("failure") != "input"


@dataclass
class Tally:
    """Summed shares and reply statuses of the predictions a session wrote (cost unrounded:
    rounding each addition would drift over thousands of calls)."""

    shares: dict[str, Any] = field(default_factory=dict)
    replies: dict[str, int] = field(default_factory=dict)  # by parse status

    def plus(self, predictions: list[Prediction]) -> Tally:
        """A new tally with ``predictions`` added (this one unchanged: a batch that fails to
        commit is not counted)."""
        shares, replies = dict(self.shares), dict(self.replies)
        for p in predictions:
            if not counts_reply(p):
                continue
            replies[p.parse_status] = replies.get(p.parse_status, 0) + 1
            for k, v in p.call.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    shares[k] = shares.get(k, 0) + v
        return Tally(shares, replies)

    def counters(self, api: bool) -> dict[str, Any]:
        """This session's figures in the manifest's counters shape (tokens and cost where the
        adapter is an API one)."""
        s = self.shares
        mine: dict[str, Any] = {
            "calls": s.get("calls", 0),
            "cache_hits": s.get("cache_hits", 0),
            "cache_misses": s.get("cache_misses", 0),
            "replies": dict(self.replies),
        }
        if api:
            mine.update({k: s.get(k, 0) for k in TOKEN_COUNTERS})
        return mine

    def usage(self, adapter_usage: dict[str, Any]) -> dict[str, Any]:
        """The manifest's usage for this session: calls, cache hits, tokens and cost from the
        predictions written; the client's retry and wait figures as the adapter has them."""
        s = self.shares
        return {
            **adapter_usage,
            "calls": s.get("calls", 0),
            "cached": s.get("cache_hits", 0),
            **{k: s.get(k, 0) for k in TOKEN_COUNTERS},
        }


def record(manifest: dict[str, Any], before: dict[str, Any], adapter: Any, tally: Tally) -> None:
    """``tally`` (this session's written predictions) over ``before`` (the manifest's usage
    and counters when the session began) into ``manifest`` (not yet written)."""
    s = tally.shares
    manifest["cache"] = {"hits": s.get("cache_hits", 0), "misses": s.get("cache_misses", 0)}
    session = getattr(adapter, "usage", None)
    api = isinstance(session, dict)
    if api:
        manifest["usage"] = add_usage(before.get("usage") or {}, tally.usage(session))
    manifest["counters"] = accumulate(before.get("counters"), tally.counters(api))


def add_usage(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Field-wise sum of two usage dicts (calls, tokens, cost)."""
    out = dict(total)
    for k, v in more.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = round(out.get(k, 0) + v, 6)
    return out


def recover_uncounted(manifest: dict[str, Any], lines: list[Prediction], end: int) -> None:
    """Fold predictions a killed session wrote past ``COUNTED`` (``lines``, each with its own
    share) into the manifest's counters and usage, as that session's; ``end``: the length of
    predictions.jsonl they run to."""
    tally = Tally().plus(lines)
    if tally.replies:
        old = manifest.get("counters")
        api = any(k in tally.shares for k in TOKEN_COUNTERS)
        mine = tally.counters(api)
        if isinstance(old, dict) and isinstance(old.get("total"), dict):
            manifest["counters"] = {
                **old,
                "total": add(old["total"], mine),
                "this_invocation": add(old.get("this_invocation") or {}, mine),
            }
        else:
            manifest["counters"] = accumulate(None, mine)
        if api or "usage" in manifest:
            manifest["usage"] = add_usage(manifest.get("usage") or {}, tally.usage({}))
    manifest[COUNTED] = end
