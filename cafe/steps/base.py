"""What a step is (DESIGN.md "cafe/steps/"): an analysis after the run, declared as data plus
five hooks. A Step names its options (resolved into a frozen spec: its API keywords and
command-line flags), the section it writes (``Section``), the records its calls keep
(``Records``), and gives setup / plan / call / status / section (the variant runs a section
compares with are cafe.steps.variants'); cafe.steps.engine does the rest the same way for every
step. State made for one invocation (a judge) is returned by ``setup`` and handed back in the
``Context``; a step keeps nothing on ``self`` between hooks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from cafe.counters import by_status
from cafe.errors import CafeUsageError
from cafe.execution import CallCache, Selection
from cafe.folder.status import StepStatus, by_counts
from cafe.folder.view import View
from cafe.records import Record


@dataclass(frozen=True)
class Option:
    """One option of a step: ``name`` is its API keyword, ``--name-with-dashes`` its flag; the
    rest says how its generated command spells and checks it (cafe.steps.cli.step_command)."""

    name: str
    type: type
    default: Any
    help: str = ""
    cli: str | None = None  # the command's parameter that sets it, if named otherwise
    flags: str | None = None  # its flag(s) if not ``flag``: "--macro", "--merge/--flag-sparse"
    bounds: tuple[Any, Any] | None = None  # (least, most) a value may be, checked by its flag
    open_min: bool = False  # the least itself refused (a width must be more than 0)
    switch: tuple[Any, Any] | None = None  # an on/off flag standing for these values (off, on)
    show_default: bool = True
    kind: str | tuple[str, ...] | None = None  # "file" / "path" (must exist), or the choices
    required: bool = False
    needs: str | None = None  # the option a value other than its default needs (its model)
    names: str | None = None  # "module:REGISTRY" whose names its value must be, checked first

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def value(self, given: Any) -> Any:  # from its flag's
        return self.switch[bool(given)] if self.switch is not None else given


#: calls in flight, declared once: the engine's (--concurrency) and a judge server's
#: (--judge-concurrency, unless its Flags say ``kw["default"]``); same in command and API
ENGINE_CONCURRENCY, JUDGE_CONCURRENCY = 8, 16


@dataclass(frozen=True)
class Flags:
    """A group of a command's flags declared once in cafe.steps.cli (how the calls are made,
    not part of the step's spec), placed in a step's ``layout``; ``names`` are its parameters'
    names and ``kw`` its rewordings, as each command has always spelled them."""

    group: str  # "judge_server", "cache", "batch", "thinking", "json", "progress", "engine"
    names: dict[str, str] = field(default_factory=dict)
    kw: dict[str, Any] = field(default_factory=dict)


def concurrency_default(step: Any) -> int:
    """The calls in flight a step's command and API function default to."""
    for g in step.layout or ():
        if isinstance(g, Flags) and g.group == "judge_server":
            return int(g.kw.get("default", JUDGE_CONCURRENCY))
    return ENGINE_CONCURRENCY


@dataclass
class StepRecord(Record):
    """One (item, run)'s result of a step that makes calls: ok (``value`` holds it), invalid (a
    reply that was no answer) or failed (retried on the next invocation)."""

    sample_id: str
    run_index: int
    status: str
    value: Any = None
    reason: str | None = None
    call: dict[str, Any] = field(default_factory=dict)  # its share of the section's counters


def statuses(records: Sequence[Any]) -> dict[str, int]:
    return by_status([r.status for r in records])


@dataclass(frozen=True)
class Section:
    """The metrics.json section a step writes. A plugin's facts (what it derives from, its keys'
    directions) are registered from here; cafe's own are declared once in cafe.folder.sections,
    which the store reads before any step loads."""

    name: str
    derives_from: tuple[str, ...] = ("predictions",)
    higher_is_better: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()
    outcome: bool = True  # False: a section whose shape predates outcomes (the "cafe" one)
    needs_samples: bool = False  # samples.jsonl missing: its one-line error first


@dataclass(frozen=True)
class Records:
    """What a step that makes calls keeps: ``<file>.jsonl`` (``<file>``'s judge records named by
    ``Setup.identity``), its record class, what the call cache holds ("record": each item's
    record whole under the step's spec, in steps.sqlite; "calls": each model call its judge
    makes under the judge's spec, in judge.sqlite, keyed as always), and how its resume and
    counters speak of them."""

    file: str
    cls: type[Any] = StepRecord
    caches: str = "record"
    noun: str = "calls"  # what its calls are called in a note
    spec_name: str = "spec"  # what resume's note calls the spec
    redone: str = "made again"  # what becomes of another spec's records
    #: the counters' names: the records made, and their statuses (``replies``: records -> dict)
    counted: tuple[str, str] = ("done", "records")
    replies: Callable[[Sequence[Any]], dict[str, int]] = statuses
    in_section: bool = False  # no file: results in the section only, the cache replays them
    current: str | None = None  # once usable, also the run's current file of this name
    reads: tuple[str, ...] = ()  # JSONL files of its own read into the view (View.files)
    #: calls left in a batch: the section held back (False: written, those items failed for
    #: now, as the CAFE judge always has; the same command again collects them)
    holds: bool = True


@dataclass(frozen=True)
class Calls:
    """How a step's calls are made, never part of its spec: the engine's (cache, calls in
    flight, progress, the first ``limit`` (item, run)s) and its caller's (servers, key variable,
    thinking, batch delivery, prices, dry run; ``client``: further options its judge takes)."""

    cache: Any = None
    concurrency: int | None = None  # None: the step's default (concurrency_default)
    progress: bool = True
    limit: int | None = None
    endpoints: tuple[str, ...] = ()
    api_key_env: str | None = None
    thinking: bool = False
    thinking_budget: int | None = None
    batch: bool = False
    batch_options: dict[str, Any] | None = None
    prices: Any = None
    dry_run: bool = False
    client: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] | None = None  # how its variant runs are made: run_variants' keywords

    @classmethod
    def split(cls, given: dict[str, Any], options: Sequence[Option] = ()
              ) -> tuple[Calls, dict[str, Any]]:  # fmt: skip
        """(the Calls among ``given`` keywords, the rest: the step's options, which win a
        name both have: judge-accuracy's thinking is part of its spec)."""
        names = {f.name for f in fields(cls)} - {o.name for o in options}
        calls = {k: v for k, v in given.items() if k in names}
        calls["endpoints"] = tuple(calls.get("endpoints") or ())
        return cls(**calls), {k: v for k, v in given.items() if k not in names}

    def judge_options(self) -> dict[str, Any]:
        """What a judge's client is built with besides its kind and model."""
        out = dict(self.client)
        if self.api_key_env:
            out["api_key_env"] = self.api_key_env
        if self.thinking:
            out.update(thinking=True, thinking_budget=self.thinking_budget)
        return out


@dataclass
class Invocation:
    """One invocation of a step as the engine ran it (``Context.made``)."""

    counts: dict[str, Any] = field(default_factory=dict)  # calls, cache hits, done, by status
    planned: list[Any] = field(default_factory=list)  # the records its plan made without a call
    selection: Selection = field(default_factory=lambda: Selection([]))
    fresh: list[Any] = field(default_factory=list)  # the selection's: called, decided, shared
    done_before: int = 0  # (item, run)s done before it
    wall_s: float = 0.0  # the calls' wall time

    @property
    def asked(self) -> list[Any]:
        """The records it made for its calls (those its plan decided without one left out)."""
        decided = {id(r) for r in self.selection.decided}
        return [r for r in [*self.planned, *self.fresh] if id(r) not in decided]


@dataclass(frozen=True)
class Context:
    """What the engine hands each hook (hooks read it, never write it)."""

    view: View
    spec: dict[str, Any]
    calls: Calls
    cache: CallCache
    plan: Any = None  # the CallPlan: batch transport and cost ledger
    state: Any = None  # what ``setup`` made
    made: Invocation = field(default_factory=Invocation)
    costs: dict[str, Any] | None = None
    variants: dict[str, View] = field(default_factory=dict)  # {name: its run, read}


@dataclass
class Setup:
    """What ``setup`` made: the frozen spec (cache keys and resume derive from it), what plan /
    call / section use (``state``: the judge; its ``failed(item, why)`` and ``aclose()`` are used
    when it has them), the identity naming its records file, how resume reads a stored spec
    (``normalize``) and which records from before specs it keeps (``keep``); ``calls``: False
    when this invocation makes no calls (an option chose a path without them)."""

    spec: dict[str, Any]
    state: Any = None
    identity: str | None = None
    normalize: Callable[[Any], Any] | None = None
    keep: Callable[[Any], bool] | None = None
    calls: bool = True


@dataclass
class Output:
    """A section with what is written beside it: other sections from the same records, and JSONL
    files of its own ({name: rows}, each one transaction)."""

    section: dict[str, Any]
    more: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def spec_of(step: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The frozen spec of ``options``: every declared option resolved (defaults filled, types
    checked), the step's name and version. Cache keys and resume derive from it whole."""
    unknown = sorted(set(options) - {o.name for o in step.options})
    if unknown:
        raise CafeUsageError(f"cafe {step.name}: unknown option(s) {', '.join(unknown)}")
    out: dict[str, Any] = {"step": step.name, "version": step.version}
    for o in step.options:
        v = options.get(o.name, o.default)
        if v is not None and not isinstance(v, o.type):
            try:
                v = o.type(v)
            except (TypeError, ValueError):
                raise CafeUsageError(
                    f"cafe {step.name}: {o.name}={v!r} is not a {o.type.__name__}"
                ) from None
        out[o.name] = v
    return out


def calls_of(ctx: Context, sent: int, client: Any, **now: Any) -> dict[str, Any]:
    """A section's account of this invocation's calls: sent, cache hits, what it made now
    (``now``), their delivery, server trouble (429s, 5xx, retries) and cost."""
    from cafe.clients.base import call_stats_of

    cost = {"cost": ctx.costs} if ctx.costs is not None else {}
    return {"sent": sent, "cache_hits": ctx.cache.hits, **now, "mode": ctx.plan.mode,
            **call_stats_of(client), **cost}  # fmt: skip


class Step:
    """Subclass, declare, give ``section`` (and ``call`` when it declares ``records``)."""

    name: ClassVar[str] = ""  # the command (`cafe NAME`) and cafe.api.run_step's name
    help: ClassVar[str] = ""
    writes: ClassVar[Section] = Section("")
    options: ClassVar[tuple[Option, ...]] = ()
    #: its command's parameters in --help order: option names and Flags groups (None: the
    #: options, then the engine's flags)
    layout: ClassVar[tuple[str | Flags, ...] | None] = None
    positional: ClassVar[tuple[str, ...]] = ()  # its API function's arguments after run_dir
    version: ClassVar[int] = 1  # part of the spec: a new version redoes the records
    records: ClassVar[Records | None] = None  # None: no calls
    #: the runs it needs beside this one, from ctx (cafe.steps.variants.Variant): the engine
    #: makes them once, after setup, and hands them read in ``ctx.variants``
    variants: ClassVar[Callable[[Context], list[Any]] | None] = None
    prints: ClassVar[Callable[[dict[str, Any]], str] | None] = None  # its command's text

    def setup(self, ctx: Context) -> Setup:
        """Check the folder (one line when it cannot give the step its inputs) and build what
        the calls need -> Setup (default: the options' spec, nothing built)."""
        return Setup(ctx.spec)

    def plan(self, ctx: Context) -> list[Any] | Selection:
        """The (item, run)s the step makes a call for (the engine drops those already done, and
        shares a Selection's copies); an (item, run) settled without a call is its record here
        (a missing sample's failed record), written before the calls."""
        return ctx.view.items()

    def call(self, ctx: Context, item: Any) -> Any:  # or async def
        raise NotImplementedError(f"step {self.name!r} declares records but no call")

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        """How the step ended, by counts (default: its usable records of those it made)."""
        ok = sum(r.status == "ok" for r in records)
        return by_counts(len(records), ok, "replies", "unusable")

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any] | Output:
        raise NotImplementedError
