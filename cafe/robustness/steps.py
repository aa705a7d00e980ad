"""The robustness protocols on run folders: the variant runs each needs (cafe.steps.variants
runs them) and its section, a step over the original run's folder whose maths is in the pure
modules (orderings, necessity, budgets). Their sections derive from what an unregistered one
does (PLUGIN_DERIVES): not in the built-in table yet, a later command that has not imported this
module reads their stamp the same way and keeps them (a port to the step table fixes it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.benchmarks.choice_order import folder_suffix, identity
from cafe.folder.sections import PLUGIN_DERIVES
from cafe.metrics.listening import item_accuracy
from cafe.records import Sample
from cafe.robustness import budgets as B
from cafe.robustness.necessity import necessity_section
from cafe.robustness.orderings import capped_orderings, choices_section
from cafe.steps import step_function
from cafe.steps.base import Context, Option, Section
from cafe.steps.variants import Variant, VariantStep, run_variants
from cafe.store import RunStore, write_json_atomic


def ordering_variants(samples: Sequence[Sample], k: int, mode: str, seed: int) -> list[Variant]:
    """Orderings 1..K-1 (ordering 0 is the run), each ``<real>-perm-<mode><k>of<K>``."""
    if k < 2:
        raise ValueError("--permute-choices needs at least 2 orderings (the original is one)")
    k = capped_orderings(samples, k, mode)
    idents = [identity(i, k, mode, seed) for i in range(1, k)]
    return [Variant(folder_suffix(x), folder_suffix(x), {"permutation": x}) for x in idents]


class ChoicesStep(VariantStep):
    name, writes = "choices", Section("choices", PLUGIN_DERIVES, needs_samples=True)
    help = "Choice-order robustness of a run: circular accuracy, consistency, positional bias."
    options = (Option("k", int, 2, "Orderings (the original is one)."),
               Option("mode", str, "rotate", "rotate or shuffle.", kind=("rotate", "shuffle")),
               Option("seed", int, 0, "Seed of shuffle orderings."))  # fmt: skip
    positional = ("k",)
    variants = staticmethod(lambda ctx: ordering_variants(
        ctx.view.samples, ctx.spec["k"], ctx.spec["mode"], ctx.spec["seed"]))  # fmt: skip

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        runs = [ctx.view, *ctx.variants.values()]  # ordering 0 is the run
        idents = [v.manifest["spec"]["permutation"] for v in runs[1:]]
        first = idents[0] if idents else {"of": 1, "mode": "rotate", "seed": 0}
        data = [{"spec": i, "samples": v.samples, "predictions": v.predictions,
                 "run_dir": str(v.root.resolve())}
                for i, v in zip([{**first, "k": 0}, *idents], runs, strict=True)]  # fmt: skip
        return choices_section(ctx.view.samples, data)


#: orderings 1..k-1 of the run in ``run_dir``, then its "choices" section; ``runs``:
#: run_variants' (run_options, execution options)
run_orderings = step_function(ChoicesStep, "run_orderings")


def necessity_variants(captions: str | Path | None) -> list[Variant]:
    """Caption-only (``captions``: a `cafe caption` file, None: the benchmark's), text-only and
    silence, each ``<real>-ctl-NAME``."""
    return [Variant(n, f"ctl-{n}", {"control": n, "control_captions": captions})
            for n in ("caption", "text-only", "silence")]  # fmt: skip


class NecessityStep(VariantStep):
    name, writes = "necessity", Section("necessity", PLUGIN_DERIVES, needs_samples=True)
    help = "Audio necessity per item: real, caption-only, text-only and silence on the same items."
    options = (Option("captions", str, None, "Captions for caption-only (None: the benchmark's)."),)
    variants = staticmethod(lambda ctx: necessity_variants(ctx.spec["captions"]))

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        runs = {"real": view, **ctx.variants}
        acc = {c: item_accuracy(view.samples, v.predictions) for c, v in runs.items()}
        cap = ctx.variants["caption"]
        caption_ok = {s.id for s in cap.samples if s.error is None}
        conditions = {c: {"run_dir": str(v.root.resolve())} for c, v in ctx.variants.items()}
        source = (cap.manifest.get("spec", {}).get("control") or {}).get("captions")
        conditions["caption"]["source"] = str(source)
        return necessity_section(view.samples, acc, caption_ok, conditions)


#: caption-only, text-only and silence runs of the run in ``run_dir`` (a finished one is
#: reused); ``runs``: run_variants' (run_options, model_call, execution options)
run_necessity = step_function(NecessityStep, "run_necessity")


def budget_variants(budgets: Sequence[int], method: str) -> list[Variant]:
    """One run per budget, ``OUT/budget-N``, the budget in its generation identity."""
    return [Variant(str(n), f"budget-{int(n)}", {"options": B.budget_identity(n, method)
                    ["generation"]}, inside=True) for n in budgets]  # fmt: skip


def run_sweep(model: str, bench: str, budgets: Sequence[int], *, out: str | Path,
              options: dict[str, Any] | None = None, cards: list[str] | None = None,
              **run_kwargs: Any) -> dict[str, Any]:  # fmt: skip
    """One run per budget (``out``/budget-N), then the sweep table in ``out``/sweep.json|md and
    its figure; returns the section. ``run_kwargs``: RunRequest fields (data, limit, judge…)."""
    from cafe.adapters.base import ADAPTERS
    from cafe.adapters.resolve import resolve_model
    from cafe.robustness.figures import sweep_figure
    from cafe.runner.spec import RunError
    from cafe.safe_files import write_file

    card = resolve_model(model, run_kwargs.get("checkpoint"), cards).card
    method = B.budget_method(ADAPTERS.get(card.adapter), card.name)

    def usable(v: Variant, res: Any) -> None:  # a point of nothing: no sweep of it
        if res.status == "failed" or res.most_failed:
            why = "; ".join(res.failure_lines[:2]) or "see its manifest"
            raise RunError(f"budget {v.name}: most items failed in {res.run_dir} ({why})")

    base = {"model": model, "bench": bench, "options": options or {}, "cards": cards,
            "judge": None, **run_kwargs}  # fmt: skip
    folders = run_variants(out, budget_variants(budgets, method), run_options=base, after=usable)
    points = []
    for n, d in zip(budgets, folders.values(), strict=True):
        store = RunStore(d)
        samples, preds = [s for s in store.samples() if s.error is None], store.predictions()
        acc = item_accuracy(samples, preds)
        points.append({**B.budget_identity(n, method), "run_dir": str(d),
                       "metrics": store.read_metrics(),
                       "acc_ci95": B.accuracy_ci([acc[s.id] for s in samples]),
                       "reasoning_tokens": B.mean_reasoning_tokens(preds)})  # fmt: skip
    section = {**B.sweep_section(points), "model": card.name, "bench": bench}
    write_json_atomic(Path(out) / "sweep.json", section)
    write_file(Path(out) / "sweep.md", B.format_sweep(section) + "\n")
    return {**section, "figure": [str(p) for p in sweep_figure(section, Path(out))]}
