"""Metrics over run folders: accuracy, CAFE perception, decay, attention, statistics, and the
hook for your own: a function of the run folder's records that returns a dict, registered
under the metrics.json section it writes (not one of cafe's own: SectionNameError). The section
is stamped with the digests of what it read; give the function a ``derives_from`` attribute
(default: predictions and judgements) and a change of those removes it (cafe.folder.sections).
`cafe judge` and `cafe report` recompute every registered metric; other packages register
through the ``cafe.metrics`` entry-point group.

    from cafe.folder.view import View
    from cafe.metrics import METRICS

    @METRICS.register("answer_length")
    def answer_length(run: View) -> dict:
        lengths = [len(p.raw_output or "") for p in run.predictions]
        return {"mean_chars": sum(lengths) / max(1, len(lengths))}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cafe.folder.sections import (
    PLUGIN_DERIVES,
    SectionNameError,
    is_builtin,
    plugin_section,
    section_info,
    sections,
)
from cafe.registry import Registry

if TYPE_CHECKING:  # the read model (cafe.folder.view) reads the store: typing only here
    from cafe.folder.view import View

#: sections cafe's own steps write (cafe.folder.sections); a metric cannot take their names
BUILTIN_SECTIONS = frozenset(n for n, i in sections().items() if i.builtin)


MetricFn = Callable[["View"], dict[str, Any]]


class MetricRegistry(Registry[MetricFn]):
    """Refuses a metric named like a built-in section, when it is registered (a decorator) or
    first loaded (an entry point): it would overwrite cafe's own figure."""

    def check(self, name: str, obj: object) -> None:
        if is_builtin(name):
            raise SectionNameError(
                f"metric {name!r}: the metrics.json section {name!r} is cafe's own (written by "
                f"`{section_info(name).owner}`); register your metric under another name"
            )
        super().check(name, obj)


METRICS: MetricRegistry = MetricRegistry(
    "metric",
    entry_point_group="cafe.metrics",
    base=Callable,  # type: ignore[arg-type]
)


def metric_sections(records: View) -> dict[str, dict[str, Any]]:
    """Every registered metric on the records -> {section: value}. A metric that fails or
    returns no dict gives {"error": "..."} and the others still run."""
    out: dict[str, dict[str, Any]] = {}
    for name in METRICS.names():
        fn = METRICS.get(name)  # a built-in section's name is refused here (MetricRegistry)
        plugin_section(name, getattr(fn, "derives_from", PLUGIN_DERIVES))
        try:
            value = fn(records)
            if not isinstance(value, dict):
                raise TypeError(f"returned {type(value).__name__}, not a dict")
        except Exception as e:  # one broken metric must not lose the others
            value = {"error": f"{type(e).__name__}: {e}"}
        out[name] = value
    return out


__all__ = ["BUILTIN_SECTIONS", "METRICS", "metric_sections"]
