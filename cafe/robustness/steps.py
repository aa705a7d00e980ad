"""The glue that runs the robustness protocols on run folders, on today's step engine: each
protocol's extra runs are ordinary `cafe run`s (their own folders, their own identity), and its
section is a Step over the original run's folder whose maths is in the pure modules
(orderings, necessity, budgets). Port these classes to the new Step API as they are."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cafe.folder.status import StepStatus, by_counts
from cafe.steps.base import Context, Section, Step, View
from cafe.store import RunStore

#: what an unregistered section is taken to derive from (cafe.folder.sections.PLUGIN_DERIVES):
#: these sections are not in the built-in table yet, so a later command that has not imported
#: this module reads their stamp the same way and keeps them (a port to the step table fixes it)
DERIVES = ("predictions", "judgements")


def _answered(view: View) -> StepStatus:
    answered = sum(p.error is None for p in view.predictions)
    return by_counts(len(view.predictions), answered, "items", "failed")


@contextmanager
def rerun(real: Path, run_options: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """run() arguments that rebuild ``real``'s spec (cafe.listen.rerun_options), its --ids
    selection included: the ids it ran, in a file of their own for as long as the reruns take
    (the same set, so the same identity hash), removed afterwards."""
    from cafe.listen import rerun_options

    store = RunStore(real)
    manifest = store.read_manifest()
    opts = dict(run_options or rerun_options(manifest))
    if not (manifest.get("spec") or {}).get("ids") or opts.get("ids"):
        yield opts
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cafe-ids-") as tmp:
        path = Path(tmp) / "ids.txt"
        path.write_text("".join(f"{s.id}\n" for s in store.samples()), encoding="utf-8")
        yield {**opts, "ids": str(path)}


def sibling(real_dir: str | Path, suffix: str) -> Path:
    """A folder beside the run's: ``<real>-<suffix>`` (as listening controls are)."""
    real = Path(real_dir)
    return real.with_name(f"{real.name}-{suffix}")


# ----------------------------------------------------------------------------- choice order


class ChoicesStep(Step):
    name = "choices"
    help = "Choice-order robustness of a run: circular accuracy, consistency, positional bias."
    writes = Section("choices", DERIVES, needs_samples=True)

    def __init__(self, orderings: Sequence[tuple[dict[str, Any], str | Path]] = ()) -> None:
        self.orderings = list(orderings)  # (identity, folder) per ordering k >= 1

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        return _answered(ctx.view)

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        from cafe.robustness.orderings import choices_section

        first = self.orderings[0][0] if self.orderings else {"of": 1, "mode": "rotate", "seed": 0}
        data = [{"spec": {**first, "k": 0}, "samples": view.samples,
                 "predictions": view.predictions, "run_dir": str(view.root.resolve())}]  # fmt: skip
        for ident, d in self.orderings:
            store = RunStore(d)
            data.append({"spec": ident, "samples": store.samples(),
                         "predictions": store.predictions(),
                         "run_dir": str(Path(d).resolve())})  # fmt: skip
        return choices_section(view.samples, data)


def run_orderings(
    real_dir: str | Path,
    k: int,
    *,
    mode: str = "rotate",
    seed: int = 0,
    run_options: dict[str, Any] | None = None,
    **execution: Any,
) -> dict[str, Any]:
    """Orderings 1..k-1 of the run in ``real_dir`` (ordering 0 is that run), each its own run
    folder ``<real>-perm-<mode><k>of<K>``, then the real run's "choices" section; returns it."""
    from cafe.robustness.orderings import capped_orderings, folder_suffix, identity
    from cafe.runner.main import run_with
    from cafe.steps.engine import run_step

    if k < 2:
        raise ValueError("--permute-choices needs at least 2 orderings (the original is one)")
    real = Path(real_dir)
    done = []
    k = capped_orderings(RunStore(real).samples(), k, mode)
    with rerun(real, run_options) as opts:
        model, bench = opts.pop("model"), opts.pop("bench")
        opts.pop("out", None)
        for i in range(1, k):
            ident = identity(i, k, mode, seed)
            out = sibling(real, folder_suffix(ident))
            run_with(model, bench, **opts, out=out, permutation=ident, judge="none", **execution)
            done.append((ident, out))
    return run_step(ChoicesStep(done), real).section


# --------------------------------------------------------------------------- budget sweep


def run_sweep(
    model: str,
    bench: str,
    budgets: Sequence[int],
    *,
    out: str | Path,
    options: dict[str, Any] | None = None,
    cards: list[str] | None = None,
    **run_kwargs: Any,
) -> dict[str, Any]:
    """One run per budget (``out``/budget-N, the budget in its generation identity), then the
    sweep table in ``out``/sweep.json and its figure; returns the section."""
    from cafe.adapters.base import ADAPTERS
    from cafe.adapters.resolve import resolve_model
    from cafe.metrics.listening import item_accuracy
    from cafe.robustness import budgets as B
    from cafe.runner.main import run_with
    from cafe.runner.spec import RunError
    from cafe.store import write_json_atomic

    card = resolve_model(model, run_kwargs.get("checkpoint"), cards).card
    method = B.budget_method(ADAPTERS.get(card.adapter), card.name)
    points = []
    for n in budgets:
        ident = B.budget_identity(n, method)
        res = run_with(model, bench, out=B.budget_folder(out, n), cards=cards,
                  options={**(options or {}), **ident["generation"]}, **run_kwargs)  # fmt: skip
        if res.status == "failed" or res.most_failed:  # a point of nothing: no sweep of it
            why = "; ".join(res.failure_lines[:2]) or "see its manifest"
            raise RunError(f"budget {n}: most items failed in {res.run_dir} ({why})")
        store = RunStore(res.run_dir)
        samples = [s for s in store.samples() if s.error is None]
        preds = store.predictions()
        acc = item_accuracy(samples, preds)
        points.append({**ident, "run_dir": str(res.run_dir), "metrics": store.read_metrics(),
                       "acc_ci95": B.accuracy_ci([acc[s.id] for s in samples]),
                       "reasoning_tokens": B.mean_reasoning_tokens(preds)})  # fmt: skip
    section = B.sweep_section(points)
    section.update(model=card.name, bench=bench)
    root = Path(out)
    from cafe.safe_files import write_file

    write_json_atomic(root / "sweep.json", section)
    write_file(root / "sweep.md", B.format_sweep(section) + "\n")
    from cafe.robustness.figures import sweep_figure

    section["figure"] = [str(p) for p in sweep_figure(section, root)]
    return section


# ----------------------------------------------------------------------------- necessity


class NecessityStep(Step):
    name = "necessity"
    help = "Audio necessity per item: real, caption-only, text-only and silence on the same items."
    writes = Section("necessity", DERIVES, needs_samples=True)

    def __init__(self, folders: dict[str, str | Path], caption_source: str) -> None:
        self.folders = dict(folders)  # condition -> run folder (real: this one)
        self.caption_source = caption_source

    def status(self, ctx: Context, records: Sequence[Any]) -> StepStatus:
        return _answered(ctx.view)

    def section(self, ctx: Context, records: Sequence[Any]) -> dict[str, Any]:
        view = ctx.view
        from cafe.metrics.listening import item_accuracy
        from cafe.robustness.necessity import necessity_section

        acc = {"real": item_accuracy(view.samples, view.predictions)}
        for cond, d in self.folders.items():
            acc[cond] = item_accuracy(view.samples, RunStore(d).predictions())
        cap_samples = RunStore(self.folders["caption"]).samples()
        caption_ok = {s.id for s in cap_samples if s.error is None}
        conditions = {c: {"run_dir": str(Path(d).resolve())} for c, d in self.folders.items()}
        conditions["caption"]["source"] = self.caption_source
        return necessity_section(view.samples, acc, caption_ok, conditions)


def run_necessity(
    real_dir: str | Path,
    *,
    captions: str | Path | None = None,
    run_options: dict[str, Any] | None = None,
    model_call: dict[str, Any] | None = None,
    **execution: Any,
) -> dict[str, Any]:
    """Caption-only, text-only and silence runs of the run in ``real_dir`` (each its own folder
    ``<real>-ctl-NAME``; a finished one is reused, no call made), then its "necessity"
    section; returns it. ``model_call``: what the run's folder does not keep about reaching its
    model (``cards``, ``checkpoint``, ``options`` such as endpoints and the key's variable, as
    `cafe run` takes them), over the run's own."""
    from cafe.listen import control_dir
    from cafe.runner.main import run_with
    from cafe.steps.engine import run_step

    real = Path(real_dir)
    folders: dict[str, Path] = {}
    source = ""
    with rerun(real, run_options) as opts:
        model, bench = opts.pop("model"), opts.pop("bench")
        opts.pop("out", None)
        given = dict(model_call or {})
        opts["options"] = {**(opts.get("options") or {}), **(given.pop("options", None) or {})}
        opts.update({k: v for k, v in given.items() if v})
        for name in ("caption", "text-only", "silence"):
            out = control_dir(real, name)
            res = run_with(model, bench, **opts, out=out, control=name, control_of=str(real),
                           control_captions=captions if name == "caption" else None,
                           judge="none", **execution)  # fmt: skip
            folders[name] = res.run_dir
            if name == "caption":
                source = str((res.manifest.get("spec", {}).get("control") or {}).get("captions"))
    return run_step(NecessityStep(folders, source), real).section
