"""Variant runs: the runs a step needs beside a run (listening controls, choice orderings,
necessity's caption-only / text-only / silence, a sweep's budgets), each an ordinary run through
the runner with a few RunRequest fields changed, in a folder of its own (``<real>-<suffix>``
beside the real run's; a sweep's inside its folder). A finished one is reused by the runner's
resume, so nothing is called twice. Each protocol says what it needs as a list of Variants;
``run_variants`` is the one place that runs them."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.store import RunStore


@dataclass(frozen=True)
class Variant:
    name: str  # what the step calls it (a control, an ordering, a budget)
    suffix: str  # its folder: <real>-<suffix> (``inside``: <folder>/<suffix>)
    #: the RunRequest fields it changes (control, permutation, control_captions, judge…);
    #: ``options`` are merged over the run's own (a budget's generation setting)
    changes: Mapping[str, Any] = field(default_factory=dict)
    inside: bool = False

    def folder(self, origin: str | Path) -> Path:
        origin = Path(origin)
        if not self.inside:
            return origin.with_name(f"{origin.name}-{self.suffix}")
        from cafe.safe_files import safe_dir  # made here; a link planted there is refused

        return safe_dir(origin / self.suffix)


def rerun_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """RunRequest fields that rebuild a folder's spec, from its manifest (format 2: "spec")."""
    spec = manifest.get("spec")
    if not spec:
        raise ValueError(
            "the run folder has no run spec (written by an older cafe): run the controls with "
            "`cafe run … --controls LIST` and the real run's options instead"
        )
    from cafe.prompts import load_template

    try:
        packaged = load_template(spec["prompt_style"]).hash
    except (KeyError, FileNotFoundError, ValueError):
        packaged = None
    own = spec["template_hash"] != packaged  # a template of the user's: its text, kept
    gen = spec.get("generation") or {}
    return {
        "model": spec["model"],
        "bench": spec["bench"],
        "checkpoint": spec.get("checkpoint"),
        "data": (manifest.get("bench") or {}).get("source"),
        "version": spec["version"],
        "runs": spec["runs"],
        "limit": spec.get("limit"),
        "seed": spec["seed"],
        "prompt_style": spec["prompt_style"],
        "prompt_template": (manifest.get("prompt") or {}).get("template_source") if own else None,
        "max_new_tokens": gen.get("max_new_tokens"),
        "options": dict(spec.get("adapter_options") or {}),
    }


@contextmanager
def rerun(origin: Path, run_options: Mapping[str, Any] | None) -> Iterator[dict[str, Any]]:
    """RunRequest fields that rebuild ``origin``'s spec (``run_options``, else its manifest),
    its --ids selection included: the ids it ran, in a file of their own for as long as the
    runs take (the same set, so the same identity hash), removed afterwards."""
    store = RunStore(origin)
    manifest = store.read_manifest() if run_options is None or store.has_manifest() else {}
    opts = dict(run_options or rerun_options(manifest))
    if opts.get("ids") or not (manifest.get("spec") or {}).get("ids"):
        yield opts
        return
    with tempfile.TemporaryDirectory(prefix="cafe-ids-") as tmp:
        path = Path(tmp) / "ids.txt"
        path.write_text("".join(f"{s.id}\n" for s in store.samples()), encoding="utf-8")
        yield {**opts, "ids": str(path)}


def run_variants(
    origin: str | Path,
    variants: Sequence[Variant],
    *,
    run_options: Mapping[str, Any] | None = None,
    model_call: Mapping[str, Any] | None = None,
    after: Callable[[Variant, Any], None] | None = None,
    **execution: Any,
) -> dict[str, Path]:
    """Run each variant of the run in ``origin`` once -> {variant name: its folder}. The spec is
    ``run_options`` (RunRequest fields), else the run's manifest's; ``model_call``: what the
    folder does not keep about reaching its model (cards, checkpoint, ``options`` such as
    endpoints and the key's variable), over the run's own; ``execution``: fields that change no
    prediction (batch_size, concurrency, progress, cache, strict, cards). A control links back
    to the real run; judging is off unless the variant says. ``after(variant, RunResult)``:
    called after each run (a sweep stops at a point that produced nothing)."""
    from cafe.runner.main import run
    from cafe.runner.spec import RunRequest

    origin = Path(origin)
    folders: dict[str, Path] = {}
    with rerun(origin, run_options) as opts:
        opts.pop("out", None)
        call = dict(model_call or {})
        opts["options"] = {**(opts.get("options") or {}), **(call.pop("options", None) or {})}
        opts.update({k: v for k, v in call.items() if v})
        for v in variants:
            changes = dict(v.changes)
            options = {**opts["options"], **(changes.pop("options", None) or {})}
            link = {"control_of": str(origin)} if changes.get("control") else {}
            fields = {"judge": "none", **opts, **link, **changes, "options": options}
            result = run(RunRequest(**fields, out=v.folder(origin), **execution))
            if after is not None:
                after(v, result)
            folders[v.name] = Path(result.run_dir)
    return folders
