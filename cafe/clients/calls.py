"""How a command's chat calls are delivered: ``CallPlan`` says direct, batch or dry run, and
carries the cost ledger. ``make_client(..., calls=plan)`` returns the matching client with the
same identity (so cache keys do not change), which is how every judge that builds its client
through ``make_client`` gets batching, metering and dry runs without code of its own.

In batch mode a caller should lift its own bound on calls in flight (``item_concurrency``): a
batch collects the calls that are waiting, and a semaphore of 16 would make batches of 16.
``format_dry_run`` and ``cost_lines``: the account of a command's calls as it prints it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.clients.base import ChatClient

MODES = ("direct", "batch", "dry-run")
#: calls in flight a caller allows in batch mode: all of them (each waits on the batch)
BATCH_CONCURRENCY = 1_000_000
#: the direct client a batch client falls back on, when the caller's bound was lifted
DIRECT_FALLBACK_CONCURRENCY = 16


@dataclass
class CallPlan:
    mode: str = "direct"
    ledger: Any = None  # cafe.clients.costs.Ledger
    batch: Any = None  # cafe.clients.batch.BatchSpec, for mode "batch"
    expected_output_tokens: int = 300  # dry-run estimate of a reply's length
    clients: list[ChatClient] = field(default_factory=list)  # built so far (for reports)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"call mode {self.mode!r}: use one of {', '.join(MODES)}")
        if self.mode == "batch" and self.batch is None:
            raise ValueError("batch mode needs a BatchSpec (where to keep the batch state)")

    def dry_report(self, items: int, already_done: int, cache_hits: int,
                   selection: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """A dry run's report: the calls it would make, their tokens and estimated cost, direct
        and batch (rounded to 4 decimals; None: unpriced)."""
        d, b = self.ledger.total("estimate-direct"), self.ledger.total("estimate-batch")

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 4)

        return {
            "items_to_judge": items, "already_judged": already_done, "calls": d.calls,
            "cache_hits": cache_hits, "prompt_tokens_est": d.prompt_tokens,
            "completion_tokens_est": d.completion_tokens,
            "cost_usd_direct_est": r(d.cost_usd), "cost_usd_batch_est": r(b.cost_usd),
            "cost_usd_direct_max": r(d.max_cost_usd), "cost_usd_batch_max": r(b.max_cost_usd),
            "unpriced": sorted(self.ledger.unpriced),
            "expected_output_tokens": self.expected_output_tokens,
            **({"selective": selection} if selection else {}),
        }  # fmt: skip

    def item_concurrency(self, requested: int) -> int:
        return BATCH_CONCURRENCY if self.mode == "batch" else requested

    def client_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A caller that passes its lifted bound on to the client as well (one ``concurrency``
        for both) gets the direct client (fallbacks only) at a sane size."""
        if options.get("concurrency", 0) >= BATCH_CONCURRENCY:
            return {**options, "concurrency": DIRECT_FALLBACK_CONCURRENCY}
        return options

    def build(self, kind: str, model: str, direct: Callable[[], ChatClient]) -> ChatClient:
        """The client for ``kind``/``model``; ``direct()`` builds the plain one."""
        from cafe.clients.costs import DryRunClient, MeteredClient

        if self.mode == "dry-run":
            try:  # the real identity when it can be had offline (no key needed for it)
                identity = direct().identity
            except (ValueError, ImportError):
                identity = f"{kind}:{model}"
            client: ChatClient = DryRunClient(
                identity, self.ledger, kind, model, self.expected_output_tokens
            )
        else:
            client = direct()
            if self.ledger is not None:
                client = MeteredClient(client, self.ledger, kind, model)
            if self.mode == "batch":
                from cafe.clients.batch import BATCH_BACKENDS, BatchClient

                plain = client.inner if isinstance(client, MeteredClient) else client
                backend = BATCH_BACKENDS.get(kind)(plain, self.batch)
                client = BatchClient(
                    client, backend, self.batch, kind=kind, model=model, ledger=self.ledger
                )
        self.clients.append(client)
        return client

    def batch_stats(self) -> dict[str, Any]:
        """Counts of every batch client built under this plan (submitted, resubmitted…)."""
        return {c.identity: c.describe() for c in self.clients if hasattr(c, "cancel_all")}


def format_dry_run(d: dict[str, Any]) -> str:
    """A dry run's report (``CallPlan.dry_report``) as the judging commands print it."""

    def usd(v: float | None) -> str:
        return "unknown (no price: add it with --prices FILE)" if v is None else f"${v:,.4f}"

    lines = [
        f"dry run: nothing sent. {d['items_to_judge']} (item, run)s to judge "
        f"({d['already_judged']} already judged)",
        f"  calls to send  {d['calls']:>8}   (first attempts; invalid replies may add retries)",
        f"  cache hits     {d['cache_hits']:>8}   (free)",
        f"  tokens (est.)  {d['prompt_tokens_est']:>8} in, {d['completion_tokens_est']} out "
        f"(~{d['expected_output_tokens']} per reply)",
        f"  cost direct    {usd(d['cost_usd_direct_est'])}"
        f"  (at most {usd(d['cost_usd_direct_max'])})",
        f"  cost --batch   {usd(d['cost_usd_batch_est'])}"
        f"  (at most {usd(d['cost_usd_batch_max'])})",
    ]
    sel = d.get("selective")
    if sel:
        lines.append(
            f"  selective: {sel['shared_same_prompt']} share another run's prompt, "
            f"{sel['decided_without_call']} decided without a call"
        )
    return "\n".join(lines)


def cost_lines(calls: dict[str, Any], selective: dict[str, Any] | None = None) -> list[str]:
    """A command's batch counts, spend, server trouble (429s, 5xx, retries, waits) and
    selective saving, as lines to print (on stdout; beside --json, on stderr)."""
    from cafe.clients.ratelimit import format_call_stats

    lines = []
    trouble = format_call_stats(calls)
    if trouble:
        lines.append(trouble)
    cost = calls.get("cost") or {}
    for identity, st in (cost.get("batches") or {}).items():
        counts = ", ".join(f"{k} {v}" for k, v in st.items() if k not in ("protocol", "state_dir"))
        lines.append(f"batch ({st['protocol']}, {identity}): {counts}")
    if cost.get("by_client"):
        total = cost.get("total_cost_usd")
        lines.append(
            f"judge cost this run: {'unknown' if total is None else f'${total:,.4f}'} "
            f"({calls.get('cache_hits', 0)} cache hits)"
        )
    if selective:
        lines.append(
            f"selective: {selective['items_without_own_call']} of {selective['items']} judged "
            f"without a call of their own (~{selective['calls_saved_est']} calls saved)"
        )
    return lines


def call_plan(
    state_root: str | Path | None, *, batch: bool = False, dry_run: bool = False,
    prices: str | Path | None = None, batch_options: dict[str, Any] | None = None,
) -> CallPlan:  # fmt: skip
    """The CallPlan (direct, --batch with its state in ``state_root/batches``, or --dry-run)
    with a cost ledger priced from cafe/clients/prices.yaml (or ``prices``)."""
    from cafe.clients.batch import BatchSpec
    from cafe.clients.costs import Ledger, PriceTable
    from cafe.store import BATCH_DIR

    # a dry run of a batch: priced both ways, nothing sent
    mode = "dry-run" if dry_run else "batch" if batch else "direct"
    spec = None
    if batch:
        if state_root is None:
            raise ValueError("--batch keeps its state in a folder: none was given")
        # a folder gets batches/ inside it; a path ending in "." (a file's stem): "<stem>.batches"
        root = str(state_root)
        folder = Path(root + BATCH_DIR) if root.endswith(".") else Path(root) / BATCH_DIR
        spec = BatchSpec(folder, **(batch_options or {}))
    return CallPlan(mode=mode, ledger=Ledger(PriceTable.load(prices)), batch=spec)
