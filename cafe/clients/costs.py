"""What judge calls cost: a price table (cafe/clients/prices.yaml, overridable by a user file), a
ledger that totals every call's token usage and price by client and delivery mode (direct, batch,
or estimated by a dry run), and two client wrappers that feed it: ``MeteredClient`` (direct calls)
and ``DryRunClient`` (counts what would be sent, sends nothing).

A dry run estimates prompt tokens as characters / 4 (plus audio at ``audio_tokens_per_s``) and
completion tokens as ``expected_output_tokens`` (with an upper bound at ``max_tokens``): an
estimate to decide by, not a bill. Real calls are priced from the usage the service reports."""

from __future__ import annotations

import fnmatch
import os
import threading
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cafe.clients.base import ChatClient, ChatReply
from cafe.clients.common import audio_bytes_on_disk, parts_of

PRICES_ENV = "CAFE_PRICES"
#: 16 kHz mono 16-bit WAV bytes per second, to turn clip sizes into seconds for estimates
#: the output bound a dry run prices for a call that sends no budget (GPT-4o's output limit)
UNBUDGETED_OUTPUT_TOKENS = 16384
_WAV_BYTES_PER_S = 32_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    match: str
    input: float
    output: float
    audio_input: float | None = None
    batch: float = 1.0  # multiplier on the batch endpoints
    audio_tokens_per_s: float = 32.0  # for dry-run estimates of audio prompts

    def cost(self, usage: dict[str, Any], batch: bool = False) -> float:
        prompt = usage.get("prompt_tokens") or 0
        audio = usage.get("audio_prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        audio_rate = self.input if self.audio_input is None else self.audio_input
        usd = ((prompt - audio) * self.input + audio * audio_rate + completion * self.output) / 1e6
        return usd * (self.batch if batch else 1.0)


class PriceTable:
    """Ordered price entries; ``lookup(kind, model)`` returns the first whose pattern matches."""

    def __init__(self, entries: list[Price], sources: list[str]):
        self.entries = entries
        self.sources = sources

    @classmethod
    def load(cls, user_file: str | Path | None = None) -> PriceTable:
        """The packaged table, with ``user_file`` (or $CAFE_PRICES) entries in front."""
        from cafe.records import load_yaml, read_yaml

        entries: list[Price] = []
        sources: list[str] = []
        user = user_file or os.environ.get(PRICES_ENV)
        if user:
            entries += _entries(read_yaml(user), str(user))
            sources.append(str(user))
        text = resources.files("cafe.clients").joinpath("prices.yaml").read_text("utf-8")
        entries += _entries(load_yaml(text), "cafe/clients/prices.yaml")
        sources.append("cafe/clients/prices.yaml")
        return cls(entries, sources)

    def lookup(self, kind: str, model: str) -> Price | None:
        name = f"{kind}:{model}"
        return next((p for p in self.entries if fnmatch.fnmatchcase(name, p.match)), None)


def _entries(data: Any, source: str) -> list[Price]:
    rows = (data or {}).get("models") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{source}: expected a 'models:' list of price entries")
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(Price(**row))
        except TypeError as e:
            raise ValueError(f"{source}: models[{i}]: {e}") from None
    return out


@dataclass
class Tally:
    """Totals for one (client, mode)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    audio_prompt_tokens: int = 0
    cost_usd: float | None = 0.0  # None when the model has no price entry
    max_cost_usd: float | None = None  # dry runs: the bound if every reply used max_tokens

    def add(self, usage: dict[str, Any], cost: float | None) -> None:
        self.calls += 1
        self.prompt_tokens += usage.get("prompt_tokens") or 0
        self.completion_tokens += usage.get("completion_tokens") or 0
        self.audio_prompt_tokens += usage.get("audio_prompt_tokens") or 0
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost


@dataclass
class Ledger:
    """Token usage and price of every call, by client identity and mode ("direct", "batch",
    "estimate-direct", "estimate-batch"). Thread-safe; ``summary()`` is what manifests hold."""

    prices: PriceTable = field(default_factory=PriceTable.load)
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    unpriced: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def record(
        self, kind: str, model: str, identity: str, mode: str, usage: dict[str, Any]
    ) -> None:
        price = self.prices.lookup(kind, model)
        cost = price.cost(usage, batch=mode.endswith("batch")) if price else None
        with self._lock:
            if price is None:
                self.unpriced.add(f"{kind}:{model}")
            self.tallies.setdefault((identity, mode), Tally()).add(usage, cost)

    def estimate(
        self,
        kind: str,
        model: str,
        identity: str,
        prompt_tokens: int,
        output_tokens: int,
        max_tokens: int,
    ) -> None:
        """One would-be call, priced both ways (direct and batch) for a dry run."""
        price = self.prices.lookup(kind, model)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens}
        bound = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens}
        with self._lock:
            if price is None:
                self.unpriced.add(f"{kind}:{model}")
            for mode, batch in (("estimate-direct", False), ("estimate-batch", True)):
                t = self.tallies.setdefault((identity, mode), Tally())
                t.add(usage, price.cost(usage, batch) if price else None)
                if price is not None:
                    t.max_cost_usd = (t.max_cost_usd or 0.0) + price.cost(bound, batch)

    def total(self, mode: str) -> Tally:
        out = Tally()
        for (_, m), t in self.tallies.items():
            if m == mode:
                out.calls += t.calls
                out.prompt_tokens += t.prompt_tokens
                out.completion_tokens += t.completion_tokens
                out.audio_prompt_tokens += t.audio_prompt_tokens
                out.cost_usd = (
                    None
                    if t.cost_usd is None or out.cost_usd is None
                    else out.cost_usd + t.cost_usd
                )
                if t.max_cost_usd is not None:
                    out.max_cost_usd = (out.max_cost_usd or 0.0) + t.max_cost_usd
        return out

    def summary(self) -> dict[str, Any]:
        by: dict[str, dict[str, Any]] = {}
        for (identity, mode), t in sorted(self.tallies.items()):
            by.setdefault(identity, {})[mode] = _rounded(asdict(t))
        spent = [t.cost_usd for (_, m), t in self.tallies.items() if m in ("direct", "batch")]
        return {
            "by_client": by,
            "total_cost_usd": None if None in spent else round(sum(spent), 6),  # type: ignore
            "unpriced": sorted(self.unpriced),
            "price_tables": self.prices.sources,
        }


def _rounded(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in d.items()}


def merge_summaries(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Add one invocation's ledger to the totals a run folder already holds (money spent adds
    up over resumed runs). Estimates are not spending: the newest replaces the old."""
    if not old:
        return new
    by = {k: dict(v) for k, v in old.get("by_client", {}).items()}
    for identity, modes in new.get("by_client", {}).items():
        mine = by.setdefault(identity, {})
        for mode, t in modes.items():
            if mode.startswith("estimate") or mode not in mine:
                mine[mode] = t
                continue
            was = mine[mode]
            summed = {k: was.get(k) for k in t}
            for k, v in t.items():
                a = was.get(k)
                summed[k] = None if a is None or v is None else round(a + v, 6)
            mine[mode] = summed
    spent = [
        t.get("cost_usd")
        for modes in by.values()
        for m, t in modes.items()
        if m in ("direct", "batch")
    ]
    return {
        "by_client": by,
        "total_cost_usd": None if None in spent else round(sum(spent), 6),  # type: ignore
        "unpriced": sorted(set(old.get("unpriced", [])) | set(new.get("unpriced", []))),
        "price_tables": new.get("price_tables", old.get("price_tables")),
    }


class MeteredClient(ChatClient):
    """A client whose every answered call is written to a ledger (same identity, same calls)."""

    def __init__(
        self, inner: ChatClient, ledger: Ledger, kind: str, model: str, mode: str = "direct"
    ):
        self.inner, self.ledger, self.kind, self.model, self.mode = inner, ledger, kind, model, mode
        self.identity = inner.identity

    async def achat(self, messages: list[dict[str, Any]], **kw: Any) -> ChatReply:
        reply = await self.inner.achat(messages, **kw)
        if reply.error is None:
            self.ledger.record(self.kind, self.model, self.identity, self.mode, reply.usage or {})
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


DRY_RUN_ERROR = "dry run: not sent"


class DryRunClient(ChatClient):
    """Counts and prices the calls a command would send, and sends none: every call returns the
    error ``DRY_RUN_ERROR`` (so judges stop at their first uncached call per item)."""

    def __init__(
        self,
        identity: str,
        ledger: Ledger,
        kind: str,
        model: str,
        expected_output_tokens: int = 300,
    ):
        self.identity, self.ledger, self.kind, self.model = identity, ledger, kind, model
        self.expected_output_tokens = expected_output_tokens
        self.calls = 0

    async def achat(
        self, messages: list[dict[str, Any]], *, max_tokens: int | None = 1024, **kw: Any
    ) -> ChatReply:
        if max_tokens is None:  # no budget sent: the bound is the model's own output limit
            max_tokens = UNBUDGETED_OUTPUT_TOKENS
        self.calls += 1
        price = self.ledger.prices.lookup(self.kind, self.model)
        per_s = price.audio_tokens_per_s if price else 32.0
        text = sum(len(p.get("text", "")) for m in messages for p in parts_of(m))
        audio_s = audio_bytes_on_disk(messages) / _WAV_BYTES_PER_S
        prompt = -(-text // 4) + round(audio_s * per_s)
        out = min(max_tokens, self.expected_output_tokens)
        self.ledger.estimate(self.kind, self.model, self.identity, prompt, out, max_tokens)
        return ChatReply(text=None, error=DRY_RUN_ERROR)
