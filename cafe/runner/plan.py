"""Plan: everything decided before a model loads. Resolve the model and prompt, load and check
the benchmark, build the run spec, pick the folder and compare the spec with the one it holds,
and list the (item, run) pairs still to run.

Resuming a folder (the spec's identity must match whole):
- the same selection: only the missing pairs run (none: no model loads);
- a larger selection (more items or runs): the folder grows to it;
- a smaller one on a finished folder: its results for that subset are read, and nothing in the
  folder is rewritten; on an unfinished folder it is refused (finish the folder first)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cafe.adapters.base import ADAPTERS, Adapter
from cafe.adapters.resolve import ModelNotFound, ResolvedModel, resolve_model
from cafe.benchmarks.base import BENCHMARKS, Benchmark, LoadedBenchmark
from cafe.folder.status import FINISHED
from cafe.manifest import card_dict, checkpoint_fingerprint, environment, without_secrets
from cafe.prompts import PromptTemplate, load_template
from cafe.records import Prediction, Problem, Sample
from cafe.runner.score import is_pending
from cafe.runner.spec import FORMAT, RunError, RunRequest, RunSpec, mismatch_message
from cafe.store import RunStore, foreign_entries

MAX_WARNINGS = 20
#: `-o` keys that set the card's decoding, not an adapter option
GENERATION_OPTIONS = (
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "reasoning_budget",
)  # fmt: skip (reasoning_budget: cafe.robustness.budgets)


def warn(lines: list[str], prefix: str = "warning") -> None:
    """At most MAX_WARNINGS lines on stderr, then a count (the rest is in the manifest)."""
    for line in lines[:MAX_WARNINGS]:
        print(f"{prefix}: {line}", file=sys.stderr)
    if len(lines) > MAX_WARNINGS:
        print(f"{prefix}: … and {len(lines) - MAX_WARNINGS} more (manifest.json)", file=sys.stderr)


def check_samples(
    loaded: LoadedBenchmark, open_items: bool = False, reads_audio: bool = True
) -> tuple[list[Sample], list[Problem]]:
    """Generic sanity every benchmark shares: unique ids, a question, choices, an answer among
    them. A bad item keeps its place as a failed sample (Sample.error); a duplicate id cannot
    (predictions are keyed by id) and is dropped with a Problem. ``open_items``: the benchmark
    has open questions (no choices; ``Benchmark.open_items``), which are not bad input;
    ``reads_audio``: the model hears the clips (a chance baseline does not: no clip is no fault)."""
    seen: set[str] = set()
    samples, problems = [], []
    for s in loaded.samples:
        if s.id in seen:
            problems.append(
                Problem(loaded.source, "duplicate id; later copy skipped", str(s.id), "id")
            )
            continue
        seen.add(s.id)
        problem = None
        if s.error is None:
            if not isinstance(s.question, str) or not s.question.strip():
                problem = Problem(loaded.source, "missing or empty", s.id, "question")
            elif open_items and not s.choices:
                pass  # an open question: answered in free text, scored by its benchmark
            elif not s.choices or not all(isinstance(c, str) for c in s.choices):
                problem = Problem(
                    loaded.source, "must be a non-empty list of strings", s.id, "choices"
                )
            elif s.answer is not None and not s.answer.strip():  # any output would score
                problem = Problem(loaded.source, "is empty", s.id, "answer")
            elif (
                s.answer is not None
                and s.answer.strip() not in {c.strip() for c in s.choices}
                and not s.meta.get("data_warning")  # the loader said so; the item runs
            ):
                problem = Problem(
                    loaded.source, f"answer {s.answer!r} is not among the choices", s.id, "answer"
                )
            elif reads_audio and not s.audio:
                problem = Problem(loaded.source, "no audio file", s.id, "audio")
        if problem is not None:
            problems.append(problem)
            s = replace(s, error=str(problem))
        elif s.error and loaded.source not in s.error:  # the reason must name file and item
            s = replace(s, error=str(Problem(loaded.source, s.error, s.id)))
        samples.append(s)
    return samples, problems


def _slug(text: str) -> str:
    return re.sub(r"[^\w.@+-]+", "_", text).strip("_") or "run"


def default_folder(spec: RunSpec, label: str, card_defaults: dict[str, Any]) -> Path:
    """runs/<model>[-<served model>]-<bench>-<version>[-<hash of other choices>]: runs whose
    identities differ get different folders; the selection (limit, runs) is not in the name, so
    a larger one grows the same folder."""
    parts = [label]
    if spec.served_model and spec.served_model != label:
        parts.append(spec.served_model)
    version = spec.version
    if version.startswith(spec.bench + "-"):  # synth-v3-…: no "synth-synth"
        version = version[len(spec.bench) + 1 :]
    parts += [spec.bench, version]
    variant = spec.variant(card_defaults)
    if variant:
        parts.append(spec.short_hash(variant))
    if spec.control:  # beside the real run's folder: <real>-ctl-<control>
        parts.append(f"ctl-{spec.control['name']}")
    if spec.ids:  # an --ids selection: its own folder
        parts.append(f"ids-{spec.ids['sha256'][:8]}")
    if spec.permutation:  # beside the original order's folder: <real>-perm-<mode><k>of<K>
        from cafe.benchmarks.choice_order import folder_suffix

        parts.append(folder_suffix(spec.permutation))
    return Path("runs") / _slug("-".join(parts))


@dataclass
class RunPlan:
    spec: RunSpec
    request: RunRequest  # what the call asked for (its per-call knobs among it)
    resolved: ResolvedModel
    adapter_cls: type[Adapter]
    adapter_options: dict[str, Any]  # everything passed to the adapter (secrets included)
    bench: Benchmark
    loaded: LoadedBenchmark
    samples: list[Sample]  # the selection, in order
    problems: list[Problem]
    template: PromptTemplate
    store: RunStore
    #: "new" | "resume" (same selection) | "extend" (larger) | "subset" (read-only, smaller)
    mode: str
    old_manifest: dict[str, Any] = field(default_factory=dict)
    done: dict[tuple[str, int], Prediction] = field(default_factory=dict)
    pending: list[tuple[Sample, int]] = field(default_factory=list)

    @property
    def keys(self) -> set[tuple[str, int]]:
        return {(s.id, r) for s in self.samples for r in range(self.spec.runs)}

    def base(self, run_index: int) -> dict[str, Any]:
        """Fields every prediction of this run carries."""
        return {
            "model": self.resolved.card.name,
            "prompt_style": self.template.style,
            "template_hash": self.template.hash,
            "seed": self.spec.seed + run_index,
        }

    def manifest(self) -> dict[str, Any]:
        """manifest.json: the spec (the identity), plus what ran in readable sections."""
        spec, loaded = self.spec, self.loaded
        return {
            "cafe": {"format": FORMAT},
            "spec": spec.to_dict(),
            "model": card_dict(self.resolved.card),
            "checkpoint": {"path": spec.checkpoint, "fingerprint": spec.fingerprint},
            "adapter_options": without_secrets(self.adapter_options),
            "bench": {
                "name": spec.bench,
                "version": spec.version,
                "source": loaded.source,
                "audio_root": getattr(self.bench, "audio_root", None),
                "sha256": spec.data_sha256,
                "n_samples": len(self.samples),
                "n_items": len(loaded.samples),  # the whole benchmark: coverage of a --limit run
                "problems": [str(p) for p in self.problems],
            },
            "prompt": {
                "style": self.template.style,
                "template_hash": self.template.hash,
                "template_source": self.template.source,
                "system": self.template.system,
            },
            "runs": spec.runs,
            "seed": spec.seed,
            "seeds": spec.seeds,
            "limit": spec.limit,
            "generation": dict(spec.generation),
            **environment(),
        }


@dataclass
class Selection:
    """The benchmark loaded and checked, and the items this run takes."""

    bench: Benchmark
    loaded: LoadedBenchmark
    samples: list[Sample]
    problems: list[Problem]
    limit: int | None  # None when the limit takes every item
    pool: list[Sample] = field(default_factory=list)  # every checked item (before the limit)


def select_samples(request: RunRequest, reads_audio: bool = True) -> Selection:
    """Load the benchmark, run the generic checks, take the first ``limit`` items; with
    ``strict`` the first problem stops here. Problems are printed as warnings. ``audio_root``:
    the folder audio paths are relative to and must stay inside (default: the metadata's)."""
    bench, data, limit, audio_root = request.bench, request.data, request.limit, request.audio_root
    try:
        bench_obj: Benchmark = BENCHMARKS.get(bench)()
    except KeyError as e:
        raise RunError(str(e)) from None
    if audio_root is not None:  # audio kept outside the metadata's folder, by the user's choice
        bench_obj.audio_root = str(audio_root)
    bench_obj.progress = request.progress  # a set built on first use: its bar too
    loaded = bench_obj.load(data=data, version=request.version)
    samples, own_problems = check_samples(loaded, bench_obj.open_items, reads_audio)
    problems = [*loaded.problems, *own_problems]
    if limit is not None and limit >= len(samples):
        limit = None  # all of them: the same selection as no limit
    pool = samples
    if limit is not None:
        samples = samples[:limit]
    if request.strict:
        if problems:
            raise RunError(f"--strict: {problems[0]}")
        bad = next((s for s in samples if s.error), None)
        if bad is not None:
            raise RunError(f"--strict: {bad.error}")
    if not any(not s.error for s in pool):  # nothing to run: one error, not a page of warnings
        first = problems[0] if problems else next((s.error for s in pool if s.error), None)
        raise RunError(
            f"{data or bench}: no usable {bench} item"
            + (f" ({len(problems) or len(pool)} problem(s); first: {first})" if first else "")
            + f"; --data takes the {bench} benchmark's metadata file or folder"
        )
    warn([str(p) for p in problems])
    from cafe.runner.clips import missing_clips_line  # once per run (issue 46)

    warn([line] if (line := missing_clips_line(samples, bench, reads_audio)) else [])
    return Selection(bench_obj, loaded, samples, problems, limit, pool)


def build_spec(
    resolved: ResolvedModel,
    adapter_cls: type[Adapter],
    options: dict[str, Any],
    selection: Selection,
    template: PromptTemplate,
    request: RunRequest,
    decoding: dict[str, Any],
) -> RunSpec:
    """The run's identity: the card's options under the -o ones (no secrets, no execution
    options), the checkpoint's fingerprint, the data's hash, the selection, prompt, decoding."""
    card = resolved.card
    execution = getattr(adapter_cls, "execution_options", frozenset())
    generation = {**card.generation, **decoding}
    if request.max_new_tokens is not None:
        generation["max_new_tokens"] = int(request.max_new_tokens)
    return RunSpec(
        model=card.name,
        adapter=card.adapter,
        adapter_options={
            k: v
            for k, v in without_secrets({**card.options, **options}).items()
            if k not in execution
        },
        checkpoint=resolved.checkpoint,
        fingerprint=checkpoint_fingerprint(resolved.checkpoint),
        bench=request.bench,
        version=selection.loaded.version,
        data_sha256=selection.loaded.sha256,
        limit=selection.limit,
        runs=request.runs,
        seed=request.seed,
        prompt_style=template.style,
        template_hash=template.hash,
        generation=generation,
    )


def plan_run(request: RunRequest) -> RunPlan:
    """Everything decided before a model loads: the model, prompt, benchmark and spec resolved
    from ``request``, the folder chosen and compared with what it holds."""
    if request.runs < 1:
        raise RunError("--runs must be at least 1")
    if request.limit is not None and request.limit < 1:
        raise RunError("--limit must be at least 1")
    try:
        resolved = resolve_model(request.model, request.checkpoint, request.cards)
    except ModelNotFound as e:
        raise RunError(str(e)) from None
    card = resolved.card
    adapter_cls = ADAPTERS.get(card.adapter)
    selection = select_samples(request, adapter_cls.reads_audio)
    # the benchmark's own prompt (its official inference's) before the card's; --prompt-style
    # before both
    default_style = selection.bench.default_prompt_style or card.prompt_style
    try:
        template = load_template(request.prompt_style or default_style, request.prompt_template)
    except (FileNotFoundError, ValueError, KeyError) as e:
        raise RunError(str(e)) from None
    adapter_options = dict(request.options or {})
    # -o temperature=0 etc. set the card's decoding; they are not adapter options
    decoding = {k: adapter_options.pop(k) for k in GENERATION_OPTIONS if k in adapter_options}
    spec = build_spec(resolved, adapter_cls, adapter_options, selection, template, request,
                      decoding)  # fmt: skip
    # --ids, a control, a choice ordering: the registered sample transforms (cafe.controls)
    from cafe.controls import transform_samples

    try:
        selection.samples, variant = transform_samples(request, selection.samples, selection.pool)
    except (ValueError, OSError) as e:
        raise RunError(str(e)) from None
    spec = replace(spec, **variant)
    defaults = {
        "options": without_secrets(dict(card.options)),
        "prompt_style": default_style,
        "template_hash": load_template(default_style).hash if not request.prompt_template else None,
        "generation": dict(card.generation),
    }
    run_dir = Path(request.out) if request.out else default_folder(spec, resolved.label, defaults)
    plan = RunPlan(
        spec=spec,
        request=request,
        resolved=resolved,
        adapter_cls=adapter_cls,
        adapter_options=adapter_options,
        bench=selection.bench,
        loaded=selection.loaded,
        samples=selection.samples,
        problems=selection.problems,
        template=template,
        store=RunStore(run_dir),
        mode="new",
    )
    return read_folder(plan)


def read_folder(plan: RunPlan) -> RunPlan:
    """What the folder already holds: the resume mode, the done and the pending (item, run)s.
    The runner reads it again once it holds the folder's writer lock (cafe.locking), so a
    command that waited for another writer runs only what that one left."""
    spec, run_dir = plan.spec, plan.store.root
    plan.mode, plan.old_manifest, plan.done = "new", {}, {}
    if plan.store.has_manifest():
        plan.old_manifest = plan.store.read_manifest()
        plan.mode = _resume_mode(run_dir, plan.old_manifest, spec)
    elif foreign := foreign_entries(run_dir):  # another tool's folder: never rewritten
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if foreign[3:] else "")
        raise RunError(
            f"{run_dir} is not a cafe run folder (it holds {shown} and no manifest.json); cafe "
            "writes only into a new or empty folder or its own run folder: pass --out NEW_FOLDER"
        )
    if plan.mode != "new":
        plan.done = {(p.sample_id, p.run_index): p for p in plan.store.predictions()}
    plan.pending = [
        (s, r)
        for r in range(spec.runs)
        for s in plan.samples
        if is_pending(plan.done.get((s.id, r)), s, plan.request.retry_failed)
    ]
    # a finished folder's model failures stay failures in a subset read (the full command
    # retries them); an unfinished folder has no results yet for part of the subset
    if plan.mode == "subset" and plan.old_manifest.get("status") not in FINISHED:
        old = RunSpec.from_dict(plan.old_manifest["spec"])
        raise RunError(
            f"{run_dir} holds an unfinished run of {old.selection()}; finish it with the same "
            f"selection first, or pass --out NEW_FOLDER for a separate run of {spec.selection()}"
        )
    return plan


def _resume_mode(run_dir: Path, old_manifest: dict[str, Any], spec: RunSpec) -> str:
    fmt = (old_manifest.get("cafe") or {}).get("format", 1)
    if "spec" not in old_manifest or fmt < FORMAT:
        raise RunError(
            f"{run_dir} was written by an older cafe (run folder format {fmt}, no run spec): it "
            "still reads for judge, export and reports but cannot be resumed; pass --out "
            "NEW_FOLDER for a new run"
        )
    try:
        old = RunSpec.from_dict(old_manifest["spec"])
    except (TypeError, ValueError) as e:
        raise RunError(f"{run_dir}/manifest.json: field spec: {e}") from None
    mismatch = mismatch_message(run_dir, old, spec)
    if mismatch:
        raise RunError(mismatch)
    if old.limit == spec.limit and old.runs == spec.runs:
        return "resume"
    if spec.covers(old):
        return "extend"
    if old.covers(spec):
        return "subset"
    raise RunError(
        f"{run_dir} holds {old.selection()}, this call asks for {spec.selection()}: neither "
        "contains the other; ask for both (the larger limit and runs) or pass --out NEW_FOLDER"
    )
