"""The sections of metrics.json as typed, versioned records. Each stage owns one section (the
runner "accuracy", the judge "cafe", decay "decay"); RunStore stamps the section's version when
it writes and checks it when it reads, so a folder from another cafe says so instead of being
misread. Section dicts stay the on-disk form (plain JSON); these classes are what code reads.

Version history: every section is at version 1 (folders written before versions existed hold
the same layout and read as version 1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from cafe.store import METRICS

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
    def from_dict(cls: type[S], data: dict[str, Any], where: str = METRICS) -> S:
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
