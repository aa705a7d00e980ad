"""What a step is (DESIGN.md "cafe/steps/"): an analysis after the run, declared as data. A Step
names its options (resolved into a frozen spec: its API keywords and command-line flags), its
records file, its metrics.json section and what that section derives from, and gives
plan / call / section; cafe.steps.engine runs every step the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cafe.errors import CafeUsageError
from cafe.execution import Selection
from cafe.folder.status import StepStatus, by_counts
from cafe.folder.view import View
from cafe.records import Prediction, Record, Sample


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

    def value(self, given: Any) -> Any:
        """The option's value from its flag's."""
        return self.switch[bool(given)] if self.switch is not None else given


#: calls in flight, declared once: the engine's (--concurrency) and a judge server's
#: (--judge-concurrency, unless its Flags say ``kw["default"]``); the command and the API
#: function of a step take the same (``concurrency_default``)
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


Item = tuple[Sample, Prediction]


@dataclass
class Invocation:
    """One invocation of a step as the engine ran it (``Step.this_invocation``): its counts
    (calls, cache hits, done, records by status), the records its plan made without a call,
    its selection, the records of the selection (called, decided, shared), the (item, run)s
    done before it and the calls' wall time."""

    counts: dict[str, Any] = field(default_factory=dict)
    planned: list[Any] = field(default_factory=list)
    selection: Selection = field(default_factory=lambda: Selection([]))
    fresh: list[Any] = field(default_factory=list)
    done_before: int = 0
    wall_s: float = 0.0


class Step:
    """Subclass, set the class attributes, give ``section`` (and ``call`` when ``records``)."""

    name: ClassVar[str] = ""  # the command (`cafe NAME`) and cafe.api.run_step's name
    help: ClassVar[str] = ""
    section_name: ClassVar[str] = ""  # the metrics.json section it writes
    records: ClassVar[str | None] = None  # its records file <records>.jsonl; None: no calls
    #: a plugin's section facts: what it derives from, its keys' directions (cafe's own steps'
    #: are declared once in cafe.folder.sections, which the store reads before any step loads)
    derives_from: ClassVar[tuple[str, ...]] = ("predictions",)
    higher_is_better: ClassVar[tuple[str, ...]] = ()
    lower_is_better: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    #: its command's parameters in --help order: option names and Flags groups (None: the
    #: options, then the engine's flags)
    layout: ClassVar[tuple[str | Flags, ...] | None] = None
    version: ClassVar[int] = 1  # part of the spec: a new version redoes the records
    record_cls: ClassVar[type[Any]] = StepRecord  # its records (sample_id, run_index, status)
    #: what the engine's call cache (``call_cache``) holds for the step: "record", each item's
    #: record whole under the step's spec (in steps.sqlite); "calls", each model call its
    #: ``call`` makes through ``self.call_cache`` under its judge's spec (several per item:
    #: raters, retries; in judge.sqlite, keyed as always, so existing caches keep hitting)
    caches: ClassVar[str] = "record"
    #: the engine's call cache (cafe.execution.CallCache), set by the engine before ``bind``
    call_cache: Any = None
    #: True: calls without a records file; their results live in the section only (the call
    #: cache replays them on the next invocation)
    records_in_section: ClassVar[bool] = False
    needs_samples: ClassVar[bool] = False  # samples.jsonl missing: its one-line error first
    noun: ClassVar[str] = "calls"  # what its calls are called in a note
    reads: ClassVar[tuple[str, ...]] = ()  # JSONL files of its own it reads (View.files)
    #: a cafe.clients.calls.CallPlan (batch transport, cost ledger): the engine bounds the
    #: items in flight by it and adds its ledger to the manifest's costs (``self.costs``)
    call_plan: Any = None
    costs: Any = None
    #: a dry run: the engine plans and makes the calls through the call plan (which sends
    #: nothing and counts), takes no lock, writes nothing and returns ``dry_report``
    dry_run: bool = False
    outcome_in_section: ClassVar[bool] = True  # False: a section whose shape predates outcomes
    #: resume (cafe.execution.resume, which the engine runs on its records file): what its
    #: note calls the spec and what becomes of another spec's records
    spec_name: ClassVar[str] = "spec"
    redone: ClassVar[str] = "made again"
    #: a records file from before specs (none stored beside it): the records it may keep
    #: (a method ``legacy_ok(record) -> bool``); None: none, each is made again
    legacy_ok: Callable[[Any], bool] | None = None

    def who(self) -> str:
        """The step as its one-line errors name it."""
        return f"cafe {self.name}"

    def bind(self, view: View) -> None:
        """Take what the calls need from the folder (its root: batch state) before the spec."""

    def files(self, view: View, records: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
        """JSONL files of its own to write with the section (each one transaction), {name: rows}."""
        return {}

    def normalize_spec(self, stored: Any) -> Any:
        """A stored spec as this step compares it with its own (None: damaged or foreign,
        another spec's)."""
        return stored

    def pending(self) -> int:
        """Calls left in a batch (or cancelled there): no results, so the section is returned
        and not written (the same command again collects them)."""
        return 0

    def select(self, todo: list[Any]) -> Selection:
        """Which of the items left to do are called (default: every one); the others are
        decided without a call or share another's call (cafe.execution.Selection)."""
        return Selection(todo)

    def commit(self, store: Any, records: Sequence[Any]) -> None:
        """What the step writes once it is usable, before its section (under the lock)."""

    def more_sections(self, view: View, records: Sequence[Any]) -> dict[str, dict[str, Any]]:
        """Sections written with its own, from the same records ({name: section})."""
        return {}

    def written(self, store: Any) -> None:
        """After its sections are written (under the lock): what derives from them."""

    def dry_report(self, counts: dict[str, Any]) -> dict[str, Any]:
        """A dry run's report from the engine's counts (planned, done_before, calls)."""
        return dict(counts)

    def records_file(self, spec: dict[str, Any]) -> str | None:
        """Its records file under this spec (None: a step that makes no calls)."""
        return f"{self.records}.jsonl" if self.records else None

    def key(self, item: Any) -> tuple[str, int]:
        return item[1].sample_id, item[1].run_index

    def failed(self, item: Any, why: str) -> Any:
        """The record of an item whose call raised (asked again next time)."""
        sid, run = self.key(item)
        return StepRecord(sid, run, "failed", reason=why)

    #: what this invocation made and counted (``Invocation``), set by the engine after the calls
    this_invocation: Invocation = Invocation()

    async def aclose(self) -> None:
        """Release what the calls used (a client), whatever happened."""

    def counters(self, counts: dict[str, Any]) -> dict[str, Any]:
        """What the section's counters add up for this invocation (default: the engine's)."""
        return counts

    def disk_counters(self, records: Sequence[Any]) -> dict[str, Any]:
        """The counters' totals as the records on disk under this spec sum them (their
        ``call`` shares), in ``counters``' keys."""
        from cafe.counters import by_status, share_totals

        return {**share_totals(records), "done": len(records),
                "records": by_status([r.status for r in records])}  # fmt: skip

    def spec(self, **options: Any) -> dict[str, Any]:
        """The frozen spec: every option resolved (defaults filled, types checked), the step's
        name and version. Cache keys and resume derive from it whole."""
        known = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise CafeUsageError(f"cafe {self.name}: unknown option(s) {', '.join(unknown)}")
        out: dict[str, Any] = {"step": self.name, "version": self.version}
        for o in self.options:
            v = options.get(o.name, o.default)
            if v is not None and not isinstance(v, o.type):
                try:
                    v = o.type(v)
                except (TypeError, ValueError):
                    raise CafeUsageError(
                        f"cafe {self.name}: {o.name}={v!r} is not a {o.type.__name__}"
                    ) from None
            out[o.name] = v
        return out

    def check(self, view: View) -> None:
        """Raise (one line) before any call when the folder cannot give this step its inputs."""

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        """The (item, run)s the step makes a call for (the engine drops those already done);
        an (item, run) it settles without a call is its record here (a ``record_cls``: a
        missing sample's failed record), written before the calls."""
        return view.items()

    def call_inputs(self, item: Item, spec: dict[str, Any]) -> dict[str, Any]:
        """What decides one call's reply besides the spec: its cache key's inputs."""
        s, p = item
        return {"question": s.question, "choices": s.choices, "output": p.raw_output}

    def call(self, item: Item, spec: dict[str, Any]) -> StepRecord:  # or async def
        raise NotImplementedError(f"step {self.name!r} declares records but no call")

    def section(
        self, view: View, records: Sequence[StepRecord], spec: dict[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def status(self, view: View, records: Sequence[StepRecord]) -> StepStatus:
        """How the step ended, by counts (default: its usable records of those it made)."""
        ok = sum(r.status == "ok" for r in records)
        return by_counts(len(records), ok, "replies", "unusable")

    def format(self, section: dict[str, Any]) -> str:
        """What `cafe NAME` prints (default: the status line)."""
        st = section.get("outcome") or {}
        return f"{self.name}: {st.get('status')} ({st.get('usable')} of {st.get('total')} usable)"
