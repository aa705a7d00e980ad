"""The one caller (issue 42): how every model call after the run is made. A judge, the
captioner, the GRPO reward judge and the data pipeline's LLM stages say *what* to ask (messages,
what the answer depends on, how to read it); the caller owns *how*: the client, the cache key
(``cafe.execution.call_key``: the keys judges have always written), counts, reply health, the
cost ledger and pending batches (a CallPlan), the dry-run report and one call shared by identical
prompts in flight (docs/extending.md shows it in use). Works without a run folder and on a
foreign event loop (TRL's): the bound on calls in flight is per loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cafe.cache import Cache, make_key, text_entry
from cafe.clients import make_client
from cafe.clients.breaker import ServerUnreachable
from cafe.clients.calls import call_plan
from cafe.clients.common import Limiter, context_too_small
from cafe.clients.thinking import judge_max_tokens
from cafe.counters import count_share
from cafe.execution import call_key

#: (value, None) for a usable reply, (None, one-line reason) for one that is no answer
Parser = Callable[[str | None], tuple[Any, str | None]]
#: replies a new caller watches: all of them unusable (and none usable) stops the command
FIRST_BATCH_MIN = 16


@dataclass(frozen=True)
class CallerSpec:
    """How the calls are made (never part of a cache key: that is the caller's ``identity``);
    ``options``: further client options (timeout_s, max_attempts…)."""

    kind: str  # openai-compatible | openai | gemini (cafe.clients.CLIENTS)
    model: str
    endpoints: tuple[str, ...] = ()
    concurrency: int = 16
    key_env: str | None = None  # the environment variable holding the key (None: the kind's)
    thinking: bool | None = False  # None: the client's own default (the data stages')
    thinking_budget: int | None = None
    batch: bool = False
    prices: str | None = None
    dry_run: bool = False
    batch_options: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    server_option: str | None = "--judge-endpoint"  # the flag naming its servers, for errors
    role: str = "judge"  # how its one-line errors name it (judge, captioner, reward judge…)


@dataclass
class Answer:
    """One ask's outcome: ``value`` (parsed) and ``text`` when usable; else ``reason`` (no
    answer: ``text`` kept) or ``error`` (the call failed: asked again next time)."""

    value: Any = None
    text: str | None = None
    reason: str | None = None
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.reason is None and self.error is None


#: an identity that adds nothing: the key is ``make_key(**depends_on)`` (the data stages' keys,
#: which name their model inside what the answer depends on)
PLAIN_KEY = SimpleNamespace(call_key=make_key)


class UnusableReplies(ServerUnreachable):
    """The caller's first batch of replies was all unusable: the command stops (what it
    finished is kept) with the cause in one line instead of running the whole folder."""

    def __init__(self, who: str, cause: str, note: str | None = None):
        Exception.__init__(self, f"{who}: {cause}" + (f"; stopped: {note}" if note else ""))
        self.who, self.reason, self.failures = who, cause, 0
        self.url = self.option = self.seconds = None

    def stopped(self, note: str) -> UnusableReplies:
        return UnusableReplies(self.who, self.reason, note)


class Caller:
    """One judge's (or stage's) calls. ``identity`` keys its answers (a JudgeSpec, anything
    with ``call_key(**depends_on)``, or a step's dict spec); ``state_root``: where --batch keeps
    its state (a run folder, or "<file stem>."); ``plan``: a CallPlan shared within a command."""

    def __init__(
        self, spec: CallerSpec, *, identity: Any, cache: Any = None,
        state_root: str | Path | None = None, client: Any = None, plan: Any = None,
        watch: bool = True,
    ) -> None:  # fmt: skip
        self.spec, self.identity = spec, identity
        self.cache = cache if cache is not None else Cache(None)
        if plan is None and (spec.batch or spec.dry_run or spec.prices):
            plan = call_plan(state_root, batch=spec.batch, dry_run=spec.dry_run, prices=spec.prices,
                             batch_options=dict(spec.batch_options or {}))  # fmt: skip
        self.calls = 0  # requests sent (cache misses)
        self.usable = 0  # usable replies: one, and the judge works
        self.first: list[str] = []  # the first batch's causes, while no reply was usable
        self.watch = watch and not spec.dry_run
        # a batch collects every call waiting: its bound lifted
        self._limit = Limiter(plan.item_concurrency(spec.concurrency) if plan else spec.concurrency)
        self._asking: dict[str, asyncio.Future[Any]] = {}
        self._held: list[tuple[str, Any]] = []  # unusable replies, while none was usable
        # built now: no server or no key fails once, before any item
        self.client = client if client is not None else client_for(spec, plan)

    def max_tokens(self, answer_tokens: int) -> int:
        """A reply's token budget: the answer's, plus the thinking budget when it may think."""
        return judge_max_tokens(answer_tokens, bool(self.spec.thinking), self.spec.thinking_budget)

    async def ask(
        self, messages: Sequence[Mapping[str, Any]], depends_on: Mapping[str, Any],
        parse: Parser, *, temperature: float | None = 0.0, max_tokens: int | None = None,
        keep: str = "text", valid: Callable[[Any], bool] | None = None, final: bool = False,
        tries: int = 1, **extra: Any,
    ) -> Answer:  # fmt: skip
        """The answer to ``messages``: from the cache (``identity`` + ``depends_on``), from the
        same ask in flight, or asked now (up to ``tries`` times until usable). Only a usable
        reply is replayed: ``keep="text"`` stores ``{"text": reply}`` (the judges' entries),
        ``keep="value"`` the parsed value, read again only when ``valid`` accepts it."""
        key = call_key(self.identity, depends_on)
        # a damaged or misshapen entry is a miss: asked again, replaced
        hit = self.cache.get(key, text_entry if keep == "text" else valid)
        if hit is not None:
            if keep != "text":
                return Answer(value=hit, cached=True)
            value, reason = parse(hit["text"])
            return Answer(value=value, text=hit["text"], reason=reason, cached=True)
        running = self._asking.get(key)
        if running is not None:  # an identical prompt in flight: one call, shared
            shared = await asyncio.shield(running)
            if shared.error is None:  # a failed call is no answer: this ask makes its own
                return shared
        # asked here, on this ask's own task; the others asking the same wait on ``shared``
        # (a cancelled or failed ask leaves them an error: each then makes its own call)
        shared = asyncio.get_running_loop().create_future()
        self._asking[key] = shared
        got = Answer(error="the shared ask did not finish")
        try:
            for _ in range(max(1, tries)):
                got = await self._call(key, messages, parse, temperature, max_tokens, keep,
                                       final, extra)  # fmt: skip
                if got.ok:
                    break
        finally:
            if self._asking.get(key) is shared:
                del self._asking[key]
            shared.set_result(got)
        return got

    async def ask_retrying(
        self, retries: int, request: Callable[[int, str | None], tuple[Any, Mapping[str, Any]]],
        parse: Parser, *, catch: bool = False, **kw: Any,
    ) -> tuple[Answer, list[str]]:  # fmt: skip
        """Ask ``request(attempt, last reason) -> (messages, depends_on)`` at most ``retries``
        more times until usable (a retry's prompt says what was wrong: the same prompt at
        temperature 0 gives the same reply) -> the last answer and every reply's text.
        ``catch``: an exception (not a dead server) is the answer's error, this item's only."""
        got, raws = Answer(error="not asked"), []
        for attempt in range(retries + 1):
            messages, depends_on = request(attempt, got.reason)
            try:
                got = await self.ask(messages, depends_on, parse, **kw)
            except Exception as e:  # a client bug or transport error (a dead server: raised)
                if not catch or isinstance(e, ServerUnreachable):
                    raise
                return Answer(error=f"{type(e).__name__}: {e}"), raws
            if got.error is not None:
                break
            raws.append(got.text or "")
            if got.ok:
                break
        return got, raws

    async def _call(
        self, key: str, messages: Any, parse: Parser, temperature: float | None,
        max_tokens: int | None, keep: str, final: bool, extra: dict[str, Any],
    ) -> Answer:  # fmt: skip
        count_share("calls")
        async with self._limit:
            self.calls += 1
            reply = await self.client.achat(list(messages), temperature=temperature,
                                            max_tokens=max_tokens, **extra)  # fmt: skip
        if reply.error or reply.text is None:
            self._watch(context_too_small(reply.error))
            return Answer(error=reply.error or "no text")
        text = reply.final if final else reply.text
        value, reason = parse(text)
        if reason is None:
            self.usable += 1
            self.watch = False  # one usable reply: the judge works
        # an unusable reply is cached only once the judge is seen to work (a judge that never
        # worked is never replayed: issue 45): its own answer at temperature 0, replayed as it is
        if reason is None or (keep == "text" and text):
            self._held.append((key, {"text": text} if keep == "text" else value))
        if self.usable:
            held, self._held = self._held, []
            for k, entry in held:
                self.cache.put(k, entry)
        if reason is not None:
            self._watch(f"format not followed: {reason}")
            return Answer(text=reply.text, reason=reason)
        return Answer(value=value, text=text)

    def _watch(self, cause: str | None) -> None:
        """Stop the command when the first batch of replies is all unusable (a failure that
        is not the context's is the breaker's business, not counted here)."""
        if not self.watch or cause is None:
            return
        self.first.append(cause)
        if len(self.first) >= max(FIRST_BATCH_MIN, min(self.spec.concurrency, 32)):
            self.watch = False
            cause = max(set(self.first), key=self.first.count)
            raise UnusableReplies(
                f"{self.spec.role} {self.spec.kind}:{self.spec.model}",
                f"its first {len(self.first)} replies are all unusable: {cause}",
            )

    async def aclose(self) -> None:
        if self.client is not None and hasattr(self.client, "aclose"):
            await self.client.aclose()


class Asks:
    """What a judge (or stage) that asks through ``self.caller`` shows of it: its client (call
    statistics), the calls it sent (cache misses); and its ``aclose``."""

    caller: Caller

    @property
    def client(self) -> Any:
        return self.caller.client

    @property
    def calls(self) -> int:
        return self.caller.calls

    async def aclose(self) -> None:
        await self.caller.aclose()


def client_for(spec: CallerSpec, plan: Any = None) -> Any:
    """The chat client a caller spec names (through ``plan``: batch, dry run, ledger)."""
    named = {"thinking": spec.thinking, "server_option": spec.server_option}  # None: the client's
    options = {
        "concurrency": spec.concurrency,
        **{k: v for k, v in named.items() if v is not None},
        **spec.options,
        **({"api_key_env": spec.key_env} if spec.key_env else {}),
    }
    return make_client(spec.kind, spec.model, endpoints=list(spec.endpoints) or None,
                       calls=plan, **options)  # fmt: skip
