"""What every reader of metrics.json sees: the sections that still describe the folder's records.
A section's stamp (cafe.folder.sections) is compared with the records now, here and only here, so
predictions changed or emptied behind cafe's back make the report, `cafe report runs/`, the
HTML page and `cafe leaderboard add` say the section is stale instead of showing its figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fresh:
    #: metrics.json without its stale sections
    metrics: dict[str, Any]
    #: section -> why it no longer describes the folder's records
    stale: dict[str, str] = field(default_factory=dict)

    def notes(self, skip: tuple[str, ...] = ()) -> list[str]:
        """One line per stale section (but ``skip``): what it was computed on, and the command
        that redoes it."""
        from cafe.folder.sections import section_info

        return [
            f"{name}: stale, not shown ({why}); `{section_info(name).owner}` recomputes it"
            for name, why in sorted(self.stale.items())
            if name not in skip
        ]


def current_metrics(store: Any) -> Fresh:
    """``store``'s metrics.json split into the sections whose stamped inputs are the folder's
    records now, and those that are stale (cafe.folder.sections.stale: a stamped section whose
    predictions or judgements changed since it was computed)."""
    from cafe.folder.sections import stale

    metrics = store.read_metrics()
    gone = stale(metrics, store.input_digest)
    return Fresh({k: v for k, v in metrics.items() if k not in gone}, gone)
