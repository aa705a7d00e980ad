"""The one adapter shape for every model behind a chat API (OpenAI-compatible servers, GPT-4o
audio, Gemini): requests go out concurrently through a shared chat client (adaptive limiter,
retries, endpoint sharding), each reply becomes a Completion carrying token usage and cost.

Options (card ``options`` or ``-o KEY=VALUE``): ``model`` (API model name; default the card's
checkpoint), ``endpoint``/``endpoints`` (base URL or list; default the protocol's environment
variable), ``concurrency`` (calls in flight per endpoint), ``timeout_s``, ``max_attempts``,
``base_delay``, ``max_delay``, ``price`` ({"input_per_mtok": $, "output_per_mtok": $}),
``tokenizer`` (how reasoning length is counted: each protocol's own counter by default, see
``default_counter``; "words", "tiktoken:<encoding>" or a local tokenizer "hf:<id>" instead) and
the client's own extras. Keys come from the environment only and never enter options."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from typing import Any, ClassVar

from cafe.adapters.base import Adapter, ModelCard
from cafe.adapters.token_counts import TokenCounter, resolve_counter, word_counter
from cafe.records import Completion, Request

#: options the adapter consumes itself; the chat client's own keywords go to the client
_ADAPTER_KEYS = {"model", "endpoint", "endpoints", "price", "max_new_tokens", "batch_size"}
_ADAPTER_KEYS |= {"tokenizer", "replicas"}
#: options that change what the model replies (part of the identity, hence of cache keys)
_SHAPING = ("extra_body", "config", "drop_params", "api_version", "max_new_tokens")
#: Completion.backend["failure"] of a call the server's circuit breaker stopped
UNREACHABLE = "unreachable"
#: generation keys with the same meaning everywhere; the rest only where a server takes them
_COMMON = {"temperature", "top_p"}


class ChatAPIAdapter(Adapter):
    client_kind: ClassVar[str]
    engine: ClassVar[str]
    #: generation keys beyond temperature/top_p/max_new_tokens this protocol accepts
    passthrough: ClassVar[frozenset[str]] = frozenset()
    #: client option defaults (a card's options override them)
    client_defaults: ClassVar[dict[str, Any]] = {}
    #: how generation "reasoning_budget" reaches the provider (cafe.robustness.budgets); None:
    #: this protocol has no budget field, and a budget is refused
    budget_method: ClassVar[str | None] = None

    def budget_fields(self, budget: int) -> dict[str, Any]:
        """The request fields that set a reasoning budget of ``budget`` tokens."""
        raise ValueError(f"adapter {type(self).__name__} cannot set a reasoning budget")

    # generate() calls in flight, all sharing one client and limiter: 16 x 32 keeps 512 calls
    # queued like 8 x 64 did, but each finished batch's scoring and writes come in smaller
    # pieces between the event loop's turns (perf/api_concurrency.py --cafe-run: 280-286 -> 302-310
    # items/s of a 320 bound, alternated runs)
    default_batch_size = 32
    default_concurrency = 16

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        super().__init__(card, checkpoint, **options)
        from cafe.clients import make_client
        from cafe.clients.common import shared_loop

        self.model = str(self.options.get("model") or self.checkpoint or card.name)
        eps = self.options.get("endpoints") or self.options.get("endpoint")
        self.endpoints = [eps] if isinstance(eps, str) else list(eps or [])
        self.price = dict(self.options.get("price") or {})
        if self.options.get("batch_size"):
            self.default_batch_size = int(self.options["batch_size"])
        client_opts = {
            **self.client_defaults,
            **{k: v for k, v in self.options.items() if k not in _ADAPTER_KEYS},
        }
        # a server that stops answering is named with the option that set it
        client_opts.setdefault("server_option", "--endpoint")
        _check_options(card, self.client_kind, client_opts)
        _check_bounds(card, self.options)
        self.client = make_client(
            self.client_kind, self.model, self.endpoints or None, **client_opts
        )
        self._loop = shared_loop()
        self._totals = usage_totals([])  # kept as calls finish: read after every batch
        self._usage_lock = threading.Lock()
        self._counter: TokenCounter | None = None
        self._counter_lock = threading.Lock()
        self._served: dict[str, Any] | None = None

    # -- reasoning length ----------------------------------------------------------------------
    def default_counter(self) -> TokenCounter:
        """The protocol's own token counter (subclasses); the word fallback where none exists."""
        return word_counter()

    def counter(self) -> TokenCounter:
        """Chosen once, on first use (a served model's server is up by then)."""
        with self._counter_lock:
            if self._counter is None:
                self._counter = resolve_counter(self.options.get("tokenizer"), self.default_counter)
            return self._counter

    @property  # type: ignore[override]
    def token_counter(self) -> str:
        return self.counter().name

    def count_tokens(self, text: str) -> int | None:  # type: ignore[override]
        return self.counter().count(text)

    def _fallback(self, why: str) -> TokenCounter:
        from cafe.reporting import warn

        warn(f"model {self.card.name!r}: {why}; reasoning lengths are counted in words "
              "(set -o tokenizer=hf:<the model's tokenizer> to count tokens)")  # fmt: skip
        return word_counter()

    # -- contract ----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """The served model and the options that change its replies; not where it is served or
        how fast (endpoints, concurrency, retries), so sharding keeps cache keys."""
        shaping = {k: self.options[k] for k in _SHAPING if self.options.get(k) is not None}
        return {
            "adapter": self.card.adapter,
            "checkpoint": self.model,
            "model": self.card.name,
            **({"options": shaping} if shaping else {}),
        }

    def served_identity(self) -> dict[str, Any]:
        """What each endpoint reports about the model it serves (GET /models, where the
        protocol has it, and what the endpoint file naming it records: `cafe serve`'s
        checkpoint identity) and the endpoints themselves, without credentials: two servers (or
        one restarted with other weights) answering to one name never share cache entries.
        One rule whichever way the servers are named: ``-o replicas=true`` or endpoints from
        `cafe serve` (@FILE, ray:ADDRESS) declare them copies of one model, and what they report
        must agree (ReplicaMismatch); their URLs are left out (moving or resharding keeps the
        cache) only where every one reports its weights (WEIGHTS_FIELDS), not just a name.
        Asked once."""
        if self._served is None:
            from cafe.clients.common import split_userinfo
            from cafe.cluster.endpoints import check_same_model, is_replica_spec, recorded

            bare = [split_userinfo(e.url)[0] for e in getattr(self.client, "endpoints", [])]
            # endpoints `cafe serve` listed (@FILE, ray:ADDRESS) are declared copies too
            replicas = self.options.get("replicas") in (True, "true", "yes", 1) or any(
                is_replica_spec(str(e)) for e in self.endpoints
            )
            info = getattr(self.client, "amodel_info", None)
            files = recorded([str(e) for e in self.endpoints])
            reports = self._loop.run(info()) if info is not None else [None] * len(bare)
            merged = [_merged(r, files.get(url)) for r, url in zip(reports, bare, strict=True)]
            if replicas:  # copies of one model must say so, or the cache would mix them
                check_same_model(merged, bare)
            reported = None
            if info is not None or files:  # each distinct report once, in order
                seen = {json.dumps(r, sort_keys=True): r for r in merged}
                reported = [seen[k] for k in sorted(seen)]
            urls = sorted(set(bare))
            weights = bool(merged) and all(
                r is not None and any(r.get(k) for k in WEIGHTS_FIELDS) for r in merged
            )
            keep_urls = not (replicas and weights)
            self._served = {"reported": reported, **({"endpoints": urls} if keep_urls else {})}
            if reported == [None]:
                self._say_no_identity(urls)
        return self._served

    def _say_no_identity(self, urls: list[str]) -> None:
        """Once per run: a server whose GET /models names no model gives its cache entries
        nothing to tell its weights apart by."""
        from cafe.reporting import warn

        where = ", ".join(urls) or "the server"
        warn(f"model {self.card.name!r}: {where} reports no model on GET /models: no identity "
             "to key on, so its cached answers are keyed by these endpoint URLs and the model "
             "name only; a server restarted at one of them with other weights would replay "
             "them: give the new weights their own -o model=NAME, serve them with "
             "`cafe serve` (its endpoint file records the checkpoint), or run with "
             "--no-cache")  # fmt: skip

    @property
    def usage(self) -> dict[str, Any]:
        """Totals over every call this adapter made (for the run manifest)."""
        with self._usage_lock:
            totals = {**self._totals, "cost_usd": round(self._totals["cost_usd"], 6)}
        from cafe.clients.base import call_stats_of

        return {**totals, **call_stats_of(self.client)}  # and 429s, 5xx, retries, waits

    def generate(self, requests: list[Request]) -> list[Completion]:
        return self._loop.run(self.agenerate(requests))

    async def agenerate(self, requests: list[Request]) -> list[Completion]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    # -- one request -------------------------------------------------------------------------
    def sampling(self, generation: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
        """(temperature, max tokens, extra fields): greedy unless the card samples. A card that
        samples (``do_sample: true``) without naming a temperature sends none: the server's or
        provider's default, i.e. the model's published generation settings."""
        g = dict(generation)
        if g.get("do_sample") is True and g.get("temperature") is None:
            temperature: float | None = None
        else:
            temperature = float(g.get("temperature") or 0.0) if g.get("do_sample", True) else 0.0
        max_tokens = int(g.get("max_new_tokens", g.get("max_tokens", 1024)))
        if self.options.get("max_new_tokens") is not None:  # an explicit -o cap wins
            max_tokens = int(self.options["max_new_tokens"])
        extra = {k: g[k] for k in g if k in (_COMMON - {"temperature"}) | self.passthrough}
        if g.get("reasoning_budget") is not None:  # thinking counts in the output's tokens
            extra.update(self.budget_fields(int(g["reasoning_budget"])))
            max_tokens += int(g["reasoning_budget"])
        return temperature, max_tokens, extra

    async def _one(self, request: Request) -> Completion:
        from cafe.clients.breaker import ServerUnreachable

        temperature, max_tokens, extra = self.sampling(request.generation)
        try:
            reply = await self.client.achat(
                with_audio_paths(request), temperature=temperature, max_tokens=max_tokens,
                seed=request.seed, **extra,
            )  # fmt: skip
        except ServerUnreachable as e:  # the runner stops on it, keeping the batch's replies
            return Completion(
                sample_id=request.sample_id, run_index=request.run_index, text=None,
                error=str(e), backend={"failure": UNREACHABLE},
            )  # fmt: skip
        backend: dict[str, Any] = {
            "engine": self.engine,
            "model": self.model,
            "endpoint": reply.endpoint,
            "attempts": reply.attempts,
            "finish_reason": reply.finish_reason,
            "usage": reply.usage,
        }
        cost = cost_usd(reply.usage, self.price)
        if cost is not None:
            backend["cost_usd"] = cost
        with self._usage_lock:
            add_to_totals(self._totals, backend)
        return Completion(
            sample_id=request.sample_id,
            run_index=request.run_index,
            text=reply.text,
            output_tokens=reply.usage.get("completion_tokens"),
            latency_s=reply.latency_s,
            backend=backend,
            error=reply.error,
        )

    def close(self) -> None:
        try:
            self._loop.run(self.client.aclose())
        except Exception:  # closing must never fail a finished run
            pass


def _check_options(card: ModelCard, kind: str, client_opts: dict[str, Any]) -> None:
    """Unknown options fail at load with the list of known ones, not deep inside a call."""
    import inspect

    from cafe.clients import CLIENTS

    params = inspect.signature(CLIENTS.get(kind).__init__).parameters
    known = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(client_opts) - known)
    if unknown:
        raise ValueError(
            f"model {card.name!r} ({card.adapter}): unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known | _ADAPTER_KEYS))}"
        )
    # a value of the wrong type (-o concurrency=abc, -o extra_body=[1,2]) fails here too
    import typing

    from cafe.records import kind_of, type_name, type_ok

    try:
        hints = typing.get_type_hints(CLIENTS.get(kind).__init__)
    except (NameError, TypeError):  # an annotation only a type checker resolves: no check
        return
    for name, value in client_opts.items():
        if name in hints and not type_ok(value, hints[name]):
            raise ValueError(
                f"model {card.name!r} ({card.adapter}): option {name}: expected "
                f"{type_name(hints[name])}, found {kind_of(value)} (-o {name}=VALUE)"
            )


#: (lowest, highest, whether the lowest itself is refused) of the numeric options: -o
#: timeout_s=-1 would fail every item after its retries, concurrency=10**9 exhaust the machine
_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "timeout_s": (0, 86_400, True), "base_delay": (0, 3_600, False),
    "max_delay": (0, 86_400, False), "concurrency": (1, 100_000, False),
    "max_attempts": (1, 100, False), "recover_after": (1, 10**6, False),
    "break_after": (0, 10**6, False), "batch_size": (1, 100_000, False),
    "max_new_tokens": (1, 10**7, False),
}  # fmt: skip


def _check_bounds(card: ModelCard, options: dict[str, Any]) -> None:
    """A numeric option out of its range fails at load, naming the range."""
    import math

    for name, (lo, hi, open_lo) in _BOUNDS.items():
        v = options.get(name)
        if v is None or isinstance(v, bool) or not isinstance(v, int | float):
            continue  # absent, or a wrong type _check_options names
        low_ok = v > lo if open_lo else v >= lo
        if not (math.isfinite(v) and low_ok and v <= hi):
            side = f"above {lo:g}" if open_lo else f"from {lo:g}"
            raise ValueError(
                f"model {card.name!r} ({card.adapter}): option {name}: {v!r} is out of range; "
                f"give a value {side} to {hi:g} (-o {name}=VALUE)"
            )


def with_audio_paths(request: Request) -> list[dict[str, Any]]:
    """The request's messages with every audio part carrying its path: parts without one take
    ``request.audio`` in order, and audio no message mentions goes first in the last user turn."""
    paths = iter(request.audio)
    used = 0
    out = []
    for m in request.messages:
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for p in content:
                if p.get("type") == "audio":
                    used += 1
                    if "path" not in p:
                        p = {**p, "path": next(paths)}
                parts.append(p)
            m = {**m, "content": parts}
        out.append(m)
    if used == 0 and request.audio:
        for i in range(len(out) - 1, -1, -1):
            if out[i].get("role") == "user":
                content = out[i].get("content")
                text = [{"type": "text", "text": content}] if isinstance(content, str) else content
                audio = [{"type": "audio", "path": p} for p in request.audio]
                out[i] = {**out[i], "content": [*audio, *(text or [])]}
                break
    return out


def cost_usd(usage: dict[str, Any], price: dict[str, Any]) -> float | None:
    """Cost of one call from the card's price table, USD per million tokens: ``input_per_mtok``,
    ``output_per_mtok`` and, where audio input is priced apart, ``audio_input_per_mtok`` (applied
    to the audio share of the prompt the server reports)."""
    if not price or not usage:
        return None
    p_in = float(price.get("input_per_mtok", 0.0))
    p_audio = float(price.get("audio_input_per_mtok", p_in))
    p_out = float(price.get("output_per_mtok", 0.0))
    tokens_in = usage.get("prompt_tokens") or 0
    audio_in = min(tokens_in, usage.get("audio_prompt_tokens") or 0)
    tokens_out = usage.get("completion_tokens") or 0
    return round(((tokens_in - audio_in) * p_in + audio_in * p_audio + tokens_out * p_out) / 1e6, 8)


def usage_totals(backends: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals for a run manifest from Completion.backend dicts (cached replies cost nothing now
    and are counted apart)."""
    tot: dict[str, Any] = {
        "calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
    }  # fmt: skip
    for b in backends:
        add_to_totals(tot, b)
    tot["cost_usd"] = round(tot["cost_usd"], 6)
    return tot


def add_to_totals(tot: dict[str, Any], b: dict[str, Any]) -> None:
    """One call's Completion.backend added to usage_totals' dict, in place (cost unrounded:
    rounding each addition would drift over thousands of calls)."""
    if b.get("cached"):
        tot["cached"] += 1
        return
    usage = b.get("usage") or {}
    tot["calls"] += 1
    tot["prompt_tokens"] += usage.get("prompt_tokens") or 0
    tot["completion_tokens"] += usage.get("completion_tokens") or 0
    tot["cost_usd"] += b.get("cost_usd") or 0.0


#: fields of a served model's report that name its weights, not only the name it answers to
#: (vLLM's root and parent; the checkpoint identity `cafe serve` records in its endpoint file)
WEIGHTS_FIELDS = ("root", "parent", "checkpoint")


def _merged(report: dict[str, Any] | None, said: dict[str, str] | None) -> dict[str, Any] | None:
    """What one endpoint reports (GET /models) and what its endpoint file records, as one."""
    if report is None and not said:
        return None
    return {**(report or {}), **(said or {})}
