"""What every VoiceBench evaluator makes of a subset's rows (scorers.py, ifeval.py): its figure,
and the error naming a row the official script stops on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class RowError(ValueError):
    """A row the official evaluator stops on (its script raises): kept out and named."""


@dataclass
class Figure:
    """One subset's official figure and what it is, as metrics.json holds it."""

    subset: str
    evaluator: str
    value: float | None  # the official figure (None: absent, ``why`` says why)
    rows: int
    extra: dict[str, Any] = field(default_factory=dict)
    why: str | None = None
    kept_out: list[str] = field(default_factory=list)  # rows the official script stops on

    def to_dict(self) -> dict[str, Any]:
        out = {"subset": self.subset, "evaluator": self.evaluator, "value": self.value,
               "rows": self.rows, **self.extra}  # fmt: skip
        if self.why:
            out["absent_reason"] = self.why
        if self.kept_out:
            out["kept_out"] = self.kept_out
        return out
