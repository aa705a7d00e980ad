"""Variant runs: the runs a step needs beside a run (listening controls, choice orderings,
necessity's caption-only / text-only / silence, a sweep's budgets), each an ordinary run with a
few RunRequest fields changed, in a folder of its own (a finished one reused by the runner's
resume). A step declares them (``Step.variants``); ``run_variants`` is the one place that runs
them."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.folder.status import StepStatus, by_counts
from cafe.folder.view import View, read_view
from cafe.runner.spec import RunRequest, rerun_options
from cafe.safe_files import safe_dir, write_file
from cafe.steps.base import Context, Step
from cafe.store import RunStore


@dataclass(frozen=True)
class Variant:
    name: str  # what its step calls it (a control, an ordering, a budget)
    suffix: str  # its folder: <real>-<suffix> (``inside``: <folder>/<suffix>)
    #: the RunRequest fields it changes (control, permutation, control_captions, judge…);
    #: ``options`` are merged over the run's own (a budget's generation setting)
    changes: Mapping[str, Any] = field(default_factory=dict)
    inside: bool = False
    files: Mapping[str, str] = field(default_factory=dict)  # {name: text} its run reads

    def folder(self, origin: str | Path) -> Path:
        origin = Path(origin)
        if not self.inside:
            return origin.with_name(f"{origin.name}-{self.suffix}")
        return safe_dir(origin / self.suffix)  # made here; a link planted there is refused


class VariantStep(Step):
    """A section of the run from its variant runs (``ctx.variants``)."""

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        preds = ctx.view.predictions  # a comparison needs the run's answers: none, nothing
        return by_counts(len(preds), sum(p.error is None for p in preds), "items", "failed")


def run_variants(
    origin: str | Path,
    variants: Sequence[Variant],
    *,
    run_options: Mapping[str, Any] | None = None,
    model_call: Mapping[str, Any] | None = None,
    after: Callable[[Variant, Any], None] | None = None,
    **execution: Any,
) -> dict[str, Path]:
    """Run each variant of the run in ``origin`` once -> {variant name: its folder}. Its spec:
    ``run_options`` (RunRequest fields), else the run's manifest (its --ids items too);
    ``model_call``: what the folder does not keep about reaching its model (cards, checkpoint,
    ``options`` such as endpoints), over the run's own; ``execution``: fields that change no
    prediction (batch_size, concurrency, progress, cache, strict, cards). A control links back
    to the run; judging is off unless the variant says. ``after(variant, RunResult)``: after
    each run."""
    from cafe.runner.main import run

    origin, folders, store = Path(origin), {}, RunStore(origin)
    manifest = store.read_manifest() if run_options is None or store.has_manifest() else {}
    call, base = dict(model_call or {}), run_options or rerun_options(manifest)
    opts = {**base, **{k: v for k, v in call.items() if v}}
    opts["options"] = {**(base.get("options") or {}), **(call.get("options") or {})}
    with tempfile.TemporaryDirectory(prefix="cafe-ids-") as tmp:
        if not opts.get("ids") and (manifest.get("spec") or {}).get("ids"):
            # the --ids items it ran, in a file while the runs take (same set: same identity)
            opts["ids"] = Path(tmp) / "ids.txt"
            opts["ids"].write_text("".join(f"{s.id}\n" for s in store.samples()), "utf-8")
        for v in variants:
            changes = dict(v.changes)
            options = {**opts["options"], **(changes.pop("options", None) or {})}
            link = {"control_of": str(origin)} if changes.get("control") else {}
            fields = {"judge": "none", **opts, **link, **changes, "options": options}
            for name, text in v.files.items():  # in its folder before it runs (a link refused)
                write_file(v.folder(origin) / name, text)
            result = run(RunRequest(**{**fields, "out": v.folder(origin)}, **execution))
            if after is not None:
                after(v, result)
            folders[v.name] = Path(result.run_dir)
    return folders


def variant_views(origin: Path, variants: Sequence[Variant], runs: dict[str, Any] | None
                  ) -> dict[str, View]:  # fmt: skip
    """The engine's: the variants of the run in ``origin`` made (a finished one reused) as
    ``runs`` (run_variants' keywords, Calls.runs) says -> {name: its run, read}."""
    made = run_variants(origin, variants, **(runs or {}))
    return {name: read_view(folder) for name, folder in made.items()}
