"""The registry of metrics.json sections: who writes each, which keys read higher-is-better,
and what it is derived from (a record file of the folder or another section).

Every section is stamped, when written, with the digests of its inputs (``inputs``: record
count + content digest per input); ``stale`` compares a stamp with the folder's inputs now. So
when predictions or judgements change (a run extended, resumed with retries, re-judged under
another spec) every section derived from them is found by construction, whoever wrote it
(plugins too): no hand-kept list of sections to clear. A plugin cannot take a built-in name.

The sections cafe reads back typed (accuracy, cafe, decay) are versioned records too
(``Section``): RunStore stamps the version when it writes and checks it when it reads, so a
folder from another cafe says so instead of being misread. Section dicts stay the on-disk form
(plain JSON); these classes are what code reads. Version history: every section is at version 1
(folders written before versions existed hold the same layout and read as version 1)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from cafe.errors import CafeError

#: the key every written section carries: its inputs' digests when it was computed
STAMP = "inputs"
#: the folder's record inputs and what each is itself derived from
RECORD_INPUTS: dict[str, tuple[str, ...]] = {"predictions": (), "judgements": ("predictions",)}
#: a plugin metric reads every record (cafe.folder.view.View) unless it says otherwise
PLUGIN_DERIVES = ("predictions", "judgements")


class SectionNameError(CafeError):
    """A plugin section named like one of cafe's own."""


@dataclass(frozen=True)
class SectionInfo:
    name: str
    owner: str  # the command that writes it
    derives_from: tuple[str, ...]  # record inputs (RECORD_INPUTS) or other sections' names
    higher_is_better: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()
    version: int = 1
    builtin: bool = True

    def direction(self, key: str) -> str | None:
        """ "up" / "down" for a key whose direction is known, else None."""
        if key in self.higher_is_better:
            return "up"
        return "down" if key in self.lower_is_better else None


_SECTIONS: dict[str, SectionInfo] = {}


def register_section(info: SectionInfo) -> SectionInfo:
    """Add a section; a plugin's may be re-registered, a built-in name is refused."""
    old = _SECTIONS.get(info.name)
    if old is not None and old.builtin and old != info:
        raise SectionNameError(
            f"section {info.name!r} is cafe's own (written by `{old.owner}`): register your "
            f"metric under another name"
        )
    unknown = [d for d in info.derives_from if d not in RECORD_INPUTS and d not in _SECTIONS]
    if unknown:
        raise CafeError(f"section {info.name!r}: derives from unknown input(s) {unknown}")
    _SECTIONS[info.name] = info
    return info


def plugin_section(name: str, derives_from: Iterable[str] = PLUGIN_DERIVES) -> SectionInfo:
    """Register (or refresh) a plugin metric's section; refuses a built-in name."""
    return register_section(
        SectionInfo(name, "a plugin metric", tuple(derives_from), builtin=False)
    )


def is_builtin(name: str) -> bool:
    info = _SECTIONS.get(name)
    return info is not None and info.builtin


def section_info(name: str) -> SectionInfo:
    """The registered section, or what an unknown one (a plugin not loaded now) is taken as."""
    return _SECTIONS.get(name) or SectionInfo(
        name, "a plugin metric", PLUGIN_DERIVES, builtin=False
    )


def sections() -> dict[str, SectionInfo]:
    return dict(_SECTIONS)


def record_inputs(name: str) -> set[str]:
    """The record inputs a section depends on, through the sections it derives from."""
    out: set[str] = set()
    todo, seen = list(section_info(name).derives_from), {name}
    while todo:
        d = todo.pop()
        if d in RECORD_INPUTS:
            out.add(d)
            todo.extend(RECORD_INPUTS[d])
        elif d not in seen:
            seen.add(d)
            todo.extend(section_info(d).derives_from)
    return out


def digest(rows: Iterable[Any]) -> dict[str, Any]:
    """An input's stamp: how many records, and a digest of their content."""
    h = hashlib.sha256()
    n = 0
    # ASCII JSON: a lone surrogate (which a reply may carry in) hashes instead of failing
    for row in rows:
        h.update(json.dumps(row, sort_keys=True).encode() + b"\n")
        n += 1
    return {"records": n, "digest": h.hexdigest()[:16]}


def section_digest(value: Any) -> dict[str, Any]:
    body = {k: v for k, v in value.items() if k != STAMP} if isinstance(value, dict) else value
    return digest([body])


def stamp(name: str, metrics: dict[str, Any], inputs: Callable[[str], Any]) -> dict[str, Any]:
    """The ``inputs`` stamp of section ``name`` computed now: ``inputs(record)`` gives a record
    input's digest; a section it derives from is digested from ``metrics``."""
    out: dict[str, Any] = {r: inputs(r) for r in sorted(record_inputs(name))}
    for d in section_info(name).derives_from:
        if d not in RECORD_INPUTS:
            out[f"section:{d}"] = section_digest(metrics.get(d))
    return out


def stale(
    metrics: dict[str, Any], inputs: Callable[[str], Any], changed: Iterable[str] = ()
) -> dict[str, str]:
    """{section: why it no longer describes the folder}: a stamped section whose inputs differ
    now, or an unstamped one (an older cafe's) derived from an input in ``changed``."""
    changed = set(changed)
    out: dict[str, str] = {}
    for name in metrics:
        value = metrics[name]
        if not isinstance(value, dict):
            continue
        was = value.get(STAMP)
        if not isinstance(was, dict):
            hit = sorted(record_inputs(name) & changed)
            if hit:
                out[name] = f"written before cafe stamped its inputs; the {hit[0]} changed since"
            continue
        now = stamp(name, metrics, inputs)
        for key in sorted(set(was) | set(now)):
            if was.get(key) != now.get(key):
                out[name] = _why(key, was.get(key), now.get(key))
                break
    return out


def _why(key: str, was: Any, now: Any) -> str:
    what = key.removeprefix("section:")
    if isinstance(was, dict) and isinstance(now, dict) and key in RECORD_INPUTS:
        if was.get("records") != now.get("records"):
            n_was, n_now = was.get("records"), now.get("records")
            return f"computed on {n_was} {what}; the folder now holds {n_now}"
        return f"computed on other {what} (they changed since: resumed, retried or re-judged)"
    return f"its input {what} changed since it was computed"


# -- typed sections ---------------------------------------------------------------------------
S = TypeVar("S", bound="Section")


class SectionError(ValueError):
    """A metrics.json section this cafe cannot read (newer version, missing fields)."""


@dataclass
class Section:
    NAME: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    #: keys the section holds beyond its typed fields (settings, provenance…), kept as written
    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)
    #: the digests of what it was computed from, stamped by the store (cafe.folder.sections)
    inputs: dict[str, Any] = field(default_factory=dict, kw_only=True)

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any], where: str = "metrics.json") -> S:
        version = int(data.get("version", 1))
        if version > cls.VERSION:
            raise SectionError(
                f"{where}: section {cls.NAME!r} is version {version}, written by a newer cafe "
                f"(this one reads up to {cls.VERSION}): upgrade cafe"
            )
        names = [f.name for f in dataclasses.fields(cls) if f.name != "extra"]  # inputs too
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name != "extra"
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        ]
        missing = [n for n in required if n not in data]
        if missing:
            raise SectionError(
                f"{where}: section {cls.NAME!r} lacks {', '.join(missing)} (an older or "
                "damaged folder: re-run the command that writes it)"
            )
        extra = {k: v for k, v in data.items() if k not in names and k != "version"}
        return cls(**{n: data[n] for n in names if n in data}, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        skip = ("extra", "inputs")
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}
        return {
            "version": self.VERSION,
            **d,
            **self.extra,
            **({"inputs": self.inputs} if self.inputs else {}),
        }


@dataclass
class AccuracySection(Section):
    """Accuracy over every (item, run): cells are {correct, total, acc}; breakdowns map a
    breakdown name to value -> cell; runs holds n, per_run, mean, std."""

    NAME: ClassVar[str] = "accuracy"
    total: dict[str, Any]
    official_denominator: dict[str, Any] = field(default_factory=dict)
    unanswered: int = 0
    failed: int = 0
    parse_rate: float | None = None
    breakdowns: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    unscorable: int = 0

    @property
    def acc(self) -> float | None:
        return self.total.get("acc")


@dataclass
class CafeSection(Section):
    """CAFE perception metrics (percent; None where undefined), their counts, per-run mean and
    std, bootstrap intervals and breakdowns; the judge and its call counts ride in ``extra``."""

    NAME: ClassVar[str] = "cafe"
    mode: str = "micro"
    acc_per: float | None = None
    err_per: float | None = None
    err_use: float | None = None
    err_omit: float | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    judgements: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    ci95: dict[str, Any] = field(default_factory=dict)
    breakdowns: dict[str, Any] = field(default_factory=dict)


@dataclass
class DecaySection(Section):
    """Accuracy and Acc_per by reasoning length: the binning settings, the bins and the
    correlations (in ``extra``: pearson, spearman, logistic)."""

    NAME: ClassVar[str] = "decay"
    settings: dict[str, Any] = field(default_factory=dict)
    n: int = 0
    bins: list[dict[str, Any]] = field(default_factory=list)
    excluded_no_length_or_failed: int = 0


#: section name -> its type; sections of other names (a metric added by a plugin) stay dicts
SECTIONS: dict[str, type[Section]] = {
    c.NAME: c for c in (AccuracySection, CafeSection, DecaySection)
}


def _builtin(name: str, owner: str, derives: tuple[str, ...], up=(), down=()) -> None:
    version = SECTIONS[name].VERSION if name in SECTIONS else 1  # a typed one's: its class's
    register_section(SectionInfo(name, owner, derives, tuple(up), tuple(down), version))


_builtin("accuracy", "cafe run", ("predictions",), up=("acc", "parse_rate"))
_builtin("official", "cafe run / cafe judge-official", ("predictions",), up=("acc",))
_builtin(
    "cafe", "cafe judge", ("judgements",), up=("acc_per",), down=("err_per", "err_use", "err_omit")
)
_builtin("decay", "cafe judge / cafe decay", ("predictions", "judgements"))
_builtin("judged_accuracy", "cafe judge-accuracy", ("predictions",), up=("acc",))
_builtin("rubric", "cafe rubric", ("predictions",), up=("score",))
_builtin("cues", "cafe cues", ("predictions", "judgements"), up=("recall",))
_builtin("listening", "cafe listen", ("predictions",), up=("gap",))


def removed_notes(store: Any, gone: dict[str, str]) -> list[str]:
    """One line per removed section that no step of this run wrote again: why, and which
    command computes it."""
    left = store.read_metrics()
    return [
        f"removed the {name} section of metrics.json: {why}; `{section_info(name).owner}` "
        f"computes it again"
        for name, why in sorted(gone.items())
        if name not in left
    ]
