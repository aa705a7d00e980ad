"""How a run and each step end, by counts: complete (every item usable), partial (some),
failed (none: every item failed, every reply unusable, nothing to correlate) or stopped (the
session ended before its work did). A step that ends failed raises NothingUsable: the command
line exits non-zero with its one line, and no view prints a figure over zero items."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from cafe.errors import CafeError

Status = Literal["complete", "partial", "failed", "stopped"]
#: statuses of a run that reached its end (a subset of it may be read)
FINISHED = ("complete", "partial", "failed")


class NothingUsable(CafeError):
    """A step that produced nothing usable; its message is the one line saying why."""


@dataclass(frozen=True)
class StepStatus:
    status: Status
    total: int  # items the step was to produce
    usable: int  # items with a usable result
    reason: str | None = None  # why it is not complete, in one line

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def line(self) -> str:
        return f"{self.status}: {self.usable} of {self.total} usable" + (
            f" ({self.reason})" if self.reason else ""
        )


def by_counts(total: int, usable: int, what: str = "items", why: str = "failed") -> StepStatus:
    """complete / partial / failed from how many of ``total`` ``what`` are usable."""
    if total == 0:
        return StepStatus("failed", 0, 0, f"no {what} to work on")
    if usable == 0:
        return StepStatus("failed", total, 0, f"all {total} {what} {why}")
    if usable < total:
        return StepStatus("partial", total, usable, f"{total - usable} of {total} {what} {why}")
    return StepStatus("complete", total, usable)


def require_usable(step: str, status: StepStatus, where: str = "") -> StepStatus:
    """Raise NothingUsable (one line naming the step, the folder and why) when it failed."""
    if status.status == "failed":
        at = f" on {where}" if where else ""
        raise NothingUsable(
            f"{step}{at} produced nothing usable: {status.reason}; its section was not written"
        )
    return status


def run_failed(manifest: dict[str, Any]) -> bool:
    """A run folder whose predictions are none of them usable (views show no figure of it)."""
    return manifest.get("status") == "failed"
