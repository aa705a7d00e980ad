"""`cafe decay` on the step engine: accuracy and Acc_per by reasoning length, computed from the
folder's records (cafe.metrics.decay holds the maths) and written as the "decay" section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.errors import CafeError, CafeUsageError
from cafe.folder.status import StepStatus, by_counts
from cafe.metrics.decay import DEFAULT_MIN_COUNT, decay_section, format_decay
from cafe.steps.base import Context, Option, Section, Step


class DecayStep(Step):
    """Perception decay of RUN_DIR: per reasoning-length bin the count, mean length,
    reasoning accuracy and Acc_per, with Pearson r and p across bins. Uses the run's judgements
    (run `cafe judge RUN_DIR` first for Acc_per) and writes the "decay" section of
    metrics.json."""

    name = "decay"
    help = "Perception decay curves: accuracy and Acc_per by reasoning length."
    writes = Section("decay")
    prints = staticmethod(format_decay)
    options = (
        Option("bins", int, None, "Equal-width bins (10).", bounds=(1, 10_000),
               show_default=False),
        Option("bin_width", float, None, "Bin width in length units (tokens, or words for a run "
               "without a tokenizer), instead of --bins.",
               bounds=(0, 1e9), open_min=True, show_default=False),
        Option("min_count", int, DEFAULT_MIN_COUNT, "Bins with fewer predictions are sparse: "
               "flagged and left out of the correlations.", bounds=(1, 10**8)),
        Option("merge", bool, False, "Merge sparse bins into their smaller neighbour (bins then "
               "differ in width) instead of keeping them flagged, as the paper's equal-width "
               "bins do.", cli="merge_sparse", flags="--merge-sparse/--flag-sparse"),
        Option("mode", str, "micro", "Per-bin Acc_per as a per-sample mean, not pooled.",
               cli="macro", flags="--macro", switch=("micro", "macro"), show_default=False),
    )  # fmt: skip

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view, spec = ctx.view, ctx.spec
        if spec["bins"] is not None and spec["bin_width"] is not None:
            raise CafeUsageError("give --bins or --bin-width, not both")
        return decay_section(
            view.predictions, view.judgements, bins=spec["bins"], bin_width=spec["bin_width"],
            min_count=spec["min_count"], merge=spec["merge"], mode=spec["mode"],
            counter=view.manifest.get("token_counter"),
        )  # fmt: skip

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        view = ctx.view
        if not view.predictions:
            raise CafeError(f"{view.root}: no predictions.jsonl records; run `cafe run` first")
        # no answered item with a reasoning length: nothing to correlate (decay_section's n)
        n = sum(p.reasoning_tokens is not None and p.error is None for p in view.predictions)
        why = "failed or have no reasoning length"
        return by_counts(len(view.predictions), n, "items", why)
