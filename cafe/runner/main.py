"""`run()`: plan -> execute -> score -> judge, into a resumable run folder (DESIGN.md "the one
data flow"). Each stage is its own module in this package; this one only sequences them and
keeps the folder's manifest in step.

Resume: an (item, run) is done once its prediction line is on disk; a SIGKILL loses at most the
batches in flight, and the same command picks up exactly the missing ones (transient model
failures are retried, unreadable audio once its file changed, adapter errors with
--retry-failed, bad metadata never: cafe.failures). A finished run re-run loads no model."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.adapters.base import is_greedy
from cafe.adapters.resolve import ModelLoadError, check_loadable, load_adapter
from cafe.adapters.token_counts import length_unit
from cafe.audio import audio_state, check_audio
from cafe.execution import execute, run_sync
from cafe.failures import RunLog, most_failed
from cafe.folder.sections import removed_notes
from cafe.folder.status import by_counts
from cafe.locking import folder_lock
from cafe.manifest import now, without_secrets
from cafe.prompts import build_request
from cafe.records import InputError, Prediction, Problem, Request, Sample
from cafe.runner.execute import CachedAdapter, open_cache
from cafe.runner.plan import MAX_WARNINGS, RunPlan, plan_run, read_folder, warn
from cafe.runner.score import failed_prediction, score_completion
from cafe.runner.spec import DEFAULT_BENCH, DEFAULT_MODEL, RunError, RunRequest
from cafe.runner.tally import COUNTED, Tally, call_share, record, recover_uncounted
from cafe.store import PREDICTIONS, remove_stale_temporaries


@dataclass
class RunResult:
    run_dir: Path
    metrics: dict[str, Any]
    manifest: dict[str, Any] = field(default_factory=dict)
    new_predictions: int = 0  # predictions written by this call
    model_loaded: bool = False  # whether this call constructed the adapter
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure_lines: list[str] = field(default_factory=list)  # distinct reasons with counts
    most_failed: bool = False  # more than half of the (item, run)s failed: the CLI exits 1
    judge_failed: bool = False  # the judge did not run, or most judgements failed
    status: str = "complete"  # complete / partial / failed by counts (cafe.folder.status)


def run(request: RunRequest) -> RunResult:
    """Run ``request.model`` on ``request.bench`` into a run folder and return its metrics.
    Re-running the same request resumes (the fields: cafe.runner.spec.RunRequest).

    Raises RunError for what the user must fix (a folder holding another run, an unknown model,
    a model that cannot load) and on the first bad input with ``strict``."""
    plan = plan_run(request)
    if plan.mode == "subset":
        return _read_subset(plan)  # a reader: no lock, nothing written
    if any(not s.error for s, _ in plan.pending):  # the model will load: fail before the folder
        try:
            check_loadable(plan.resolved)
        except ModelLoadError as e:
            raise RunError(str(e)) from e
    fresh = not plan.store.root.exists()  # before the lock file makes the folder
    with folder_lock(plan.store.root, "cafe run"):
        remove_stale_temporaries(plan.store.root)  # a killed writer's, as the one writer
        read_folder(plan)  # again, as the one writer: what another writer left is done
        if plan.mode == "subset":
            return _read_subset(plan)
        manifest = _open_folder(plan, _control_link(request))
        try:
            return _run_open_folder(plan, manifest, fresh)
        except BaseException as e:  # a full disk, a refused checkpoint, Ctrl-C: never "running"
            _mark_stopped(plan, manifest, e)
            raise


def run_with(model: str = DEFAULT_MODEL, bench: str = DEFAULT_BENCH, /, **fields: Any) -> RunResult:
    """``cafe.api.run``: RunRequest's fields as keywords (an unknown one is a TypeError)."""
    return run(RunRequest(model, bench, **fields))


def _control_link(request: RunRequest) -> dict[str, Any] | None:
    """The manifest's "control" entry of a listening control run: its real run linked."""
    if not request.control:
        return None
    real = str(Path(request.control_of).resolve()) if request.control_of else None
    return {"name": request.control, "seed": request.control_seed, "real_run": real}


def _mark_stopped(plan: RunPlan, manifest: dict[str, Any], e: BaseException) -> None:
    """Record in the manifest that the session stopped (best effort: on a full disk even this
    write may fail, and the error that stopped the run is the one to report)."""
    if (
        manifest.get("status") in ("failed", "interrupted", "stopped")
        or not plan.store.root.is_dir()
    ):
        return  # said already (Ctrl-C, a dead server), or a failed load took the folder away
    from cafe.redaction import scrub_text

    interrupted = isinstance(e, KeyboardInterrupt)
    manifest["status"] = "interrupted" if interrupted else "failed"
    manifest["error"] = scrub_text(str(e).splitlines()[0] if str(e) else type(e).__name__)
    manifest["updated"] = now()
    try:
        plan.store.write_manifest(manifest)
    except Exception:  # noqa: BLE001 - the original error is raised, not this one
        pass


def _run_open_folder(plan: RunPlan, manifest: dict[str, Any], fresh: bool) -> RunResult:
    """``fresh``: this call made the folder (a failed load removes it again when empty)."""
    result = RunResult(run_dir=plan.store.root, metrics={}, problems=plan.problems)
    if plan.request.progress and plan.pending and len(plan.pending) < len(plan.keys):
        done = len(plan.keys) - len(plan.pending)
        print(f"resuming {plan.store.root}: {done} of {len(plan.keys)} (item, run) pairs done, "
              f"{len(plan.pending)} to run", file=sys.stderr)  # fmt: skip
    try:
        with plan.store.writer(PREDICTIONS) as writer:
            bad = [(s, r) for s, r in plan.pending if s.error]
            writer.write_many(
                failed_prediction(s.id, r, plan.base(r), s.error or "", "input") for s, r in bad
            )
            result.new_predictions += len(bad)
            todo = [(s, r) for s, r in plan.pending if not s.error]
            if todo:
                result.new_predictions += _generate(plan, todo, manifest, writer)
                result.model_loaded = True
    except KeyboardInterrupt:  # Ctrl-C: what is on disk stays; say so and how to go on
        raise _interrupted(plan, manifest) from None
    except _LoadFailed:
        if fresh and not result.new_predictions:  # a folder this call made, holding nothing
            import shutil

            shutil.rmtree(plan.store.root, ignore_errors=True)
        raise
    _finish(plan, manifest, result)
    return result


def _open_folder(plan: RunPlan, control: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create or reopen the folder: the manifest (marked running until the end; what an
    earlier session learnt about the adapter and its usage carried over; a listening control
    linked to its real run) and samples.jsonl."""
    store = plan.store.create()
    manifest = plan.manifest()
    old = plan.old_manifest
    manifest["created"] = old.get("created", now())
    manifest["updated"] = now()
    for k in ("adapter", "token_counter", "length_unit", "usage", "counters", COUNTED):
        if k in old:
            manifest[k] = old[k]
    _count_what_a_kill_left(plan, manifest)
    if control:
        manifest["control"] = control
    # samples first: a write that fails here (a full disk) leaves the manifest as it was, not
    # marked running
    if plan.mode in ("new", "extend") or not store.has_samples():
        store.write_samples(plan.samples)
    manifest["status"] = "running"
    store.write_manifest(manifest)
    return manifest


def _count_what_a_kill_left(plan: RunPlan, manifest: dict[str, Any]) -> None:
    """Predictions a session wrote past the length the manifest's counters cover (it was killed
    between the two writes) join the counters, each with its own share (cafe.runner.tally)."""
    size = plan.store.predictions_size()
    counted = manifest.get(COUNTED)
    if type(counted) is not int or not 0 <= counted <= size:  # from before the mark, or cut
        manifest[COUNTED] = size
    elif counted < size:
        lines, end = plan.store.predictions_after(counted)
        recover_uncounted(manifest, lines, end)


def _finish(plan: RunPlan, manifest: dict[str, Any], result: RunResult) -> None:
    """The accuracy section over the folder's whole selection, the judge (the benchmark's
    default unless told), and the manifest's status by counts."""
    store = plan.store
    # every section whose inputs changed goes (cafe.folder.sections): no hand-kept list
    gone = store.invalidate(changed=("predictions",) if result.new_predictions else ())
    final = store.predictions() if result.new_predictions else list(plan.done.values())
    keys = plan.keys  # built once: the property makes a new set on every access
    predictions = [p for p in final if (p.sample_id, p.run_index) in keys]
    store.update_metrics("accuracy", _accuracy(plan, predictions))
    # the benchmark's official figure, where accuracy's is not it; one that `cafe judge-official`
    # wrote stands until the predictions change
    official = plan.bench.official_section(plan.samples, predictions, plan.spec.runs)
    if official is not None and "official" not in store.read_metrics():
        store.update_metrics("official", official)
    manifest.pop("error", None)
    failed = [p for p in predictions if p.parse_status == "failed"]
    status = by_counts(len(predictions), len(predictions) - len(failed), "items")
    manifest["status"] = result.status = status.status  # complete / partial / failed by counts
    manifest["counts"] = {"predictions": len(predictions), "failed": len(failed)}
    manifest.pop("status_reason", None)
    if status.reason:
        manifest["status_reason"] = status.reason
    manifest["updated"] = now()
    result.failure_lines = failure_summary(failed, len(predictions), store.root)
    result.most_failed = bool(predictions) and most_failed(len(failed), len(predictions))

    judge, judge_options = plan.request.judge, dict(plan.request.judge_options or {})
    judge_name = judge if judge is not None else plan.bench.default_judge
    if status.status == "failed":  # nothing to judge: every item failed
        judge_name = None
    if judge_name and judge_name != "none":
        manifest["judge"] = {"name": judge_name, **without_secrets(judge_options)}
        store.write_manifest(manifest)
        judge_notes = _judge(store.root, judge_name, judge_options, plan.request.progress)
        result.notes.extend(judge_notes)
        result.judge_failed = any(n.startswith("error:") for n in judge_notes)
    result.notes.extend(removed_notes(store, gone))
    if not plan.bench.has_answers(plan.spec.version):
        result.notes.append(
            f"{plan.spec.bench} {plan.spec.version} has no answers: accuracy cannot be computed "
            f"here; `cafe export {store.root}` writes the file its leaderboard scores"
        )
    store.write_manifest(manifest)
    result.manifest = manifest
    result.metrics = store.read_metrics()


def _accuracy(plan: RunPlan, predictions: list[Prediction]) -> dict[str, Any]:
    from cafe.benchmarks.scoring import bench_accuracy

    return bench_accuracy(plan.bench, plan.samples, predictions, plan.spec.runs)


def _read_subset(plan: RunPlan) -> RunResult:
    """A smaller selection on a finished folder: its results for that subset, computed in
    memory; nothing in the folder changes (it keeps describing the whole run)."""
    keys = plan.keys
    predictions = [p for p in plan.done.values() if (p.sample_id, p.run_index) in keys]
    old = plan.old_manifest
    note = (
        f"{plan.store.root} holds {_selection(old)}; reporting its results for "
        f"{plan.spec.selection()} without changing the folder (pass --out NEW_FOLDER for a "
        "separate run)"
    )
    return RunResult(
        run_dir=plan.store.root,
        metrics={"accuracy": _accuracy(plan, predictions)},
        manifest=old,
        problems=plan.problems,
        notes=[note],
    )


def _selection(manifest: dict[str, Any]) -> str:
    from cafe.runner.spec import RunSpec

    return RunSpec.from_dict(manifest["spec"]).selection()


class _Work:
    """One batch of (item, run) pairs -> Predictions, run on a worker thread: the audio check
    (a bad clip fails its item, or stops the run with --strict), the request, the cached
    adapter call and the scoring."""

    def __init__(self, plan: RunPlan, adapter: Any, target: CachedAdapter):
        self.plan, self.adapter, self.target = plan, adapter, target
        self.strict = plan.request.strict

    def __call__(self, items: list[tuple[Sample, int]]) -> list[Prediction]:
        try:
            return self._predict(items)
        except InputError:  # --strict: the executor's fatal stop
            raise
        except Exception as e:  # cafe's own fault on this batch (``failed``): its traceback
            if self.target.log is not None:
                self.target.log.exception("a batch of `cafe run` raised", e)
            raise

    def _predict(self, items: list[tuple[Sample, int]]) -> list[Prediction]:
        plan = self.plan
        out: dict[tuple[str, int], Prediction] = {}
        ready: list[tuple[Sample, Request]] = []
        for sample, r in items:
            try:
                for path in sample.audio if self.adapter.reads_audio else ():
                    check_audio(path, sample_id=sample.id)
            except InputError as e:
                if self.strict:
                    raise
                pred = failed_prediction(sample.id, r, plan.base(r), str(e), "audio")
                pred.sections["audio_state"] = audio_state(sample.audio)  # retried once changed
                out[(sample.id, r)] = pred
                continue
            request = build_request(
                sample, plan.template.style, r, plan.spec.seed + r,
                dict(plan.spec.generation), plan.template,
            )  # fmt: skip
            ready.append((sample, request))
        if ready:
            completions = self.target.generate([req for _, req in ready])
            looked_up = self.target.cache.path is not None
            for (sample, req), completion in zip(ready, completions, strict=True):
                pred = score_completion(
                    sample,
                    completion,
                    plan.base(req.run_index),
                    self.adapter.count_tokens,
                    plan.bench.is_correct,
                    plan.bench.choice_is_correct,
                )
                pred.call = call_share(completion, looked_up)  # its share of the counters
                out[(sample.id, req.run_index)] = pred
        return [out[(s.id, r)] for s, r in items]

    def failed(self, item: tuple[Sample, int], why: str) -> Prediction:
        """The prediction of an item whose batch raised in cafe's own code (the adapter's
        exceptions are its per-item errors already): not retried until --retry-failed."""
        sample, r = item
        log = self.target.log
        where = f" (traceback in {log.path})" if log is not None else ""
        return failed_prediction(sample.id, r, self.plan.base(r), f"internal error: {why}{where}",
                                 "adapter")  # fmt: skip


class _Commit:
    """The predictions file as the executor writes it: each finished batch handed whole to
    the run's commit (``_write_batch``, under the manifest's counters)."""

    def __init__(self, commit: Any) -> None:
        self.write_many = commit


def _load(plan: RunPlan, manifest: dict[str, Any]) -> Any:
    """The adapter; one that cannot load marks the manifest failed (never left "running")."""
    try:
        return load_adapter(plan.resolved, plan.adapter_options)
    except ModelLoadError as e:
        manifest["status"] = "failed"
        manifest["error"] = str(e)
        manifest["updated"] = now()
        plan.store.write_manifest(manifest)
        raise _LoadFailed(str(e)) from e


def _say_failures(preds: list[Prediction], failures: int) -> int:
    """Say why an item failed as it happens, not only on disk (the first MAX_WARNINGS) ->
    the failures so far."""
    for p in preds:
        if p.parse_status == "failed" and p.error:
            failures += 1
            if failures <= MAX_WARNINGS:
                from tqdm import tqdm

                named = f"sample {p.sample_id}" in p.error
                said = p.error if named else f"sample {p.sample_id}: {p.error}"
                tqdm.write(f"error: {said}", file=sys.stderr)
    return failures


def _say_replaced(preds: list[Prediction], replaced: int) -> int:
    """Say, once a run, that a model's output held characters no file cafe reads may hold (a
    random-weight model emits NULs): they are written as U+FFFD -> the outputs so far."""
    from cafe.jsontext import unreadable_text

    odd = [p for p in preds if isinstance(p.raw_output, str) and unreadable_text(p.raw_output)]
    if odd and not replaced:
        from tqdm import tqdm  # above the progress bar, as the failure lines are

        tqdm.write(f"warning: sample {odd[0].sample_id}: the model's output holds NUL or "
                   "lone-surrogate characters; written as U+FFFD in predictions.jsonl (said "
                   "once a run)", file=sys.stderr)  # fmt: skip
    return replaced + len(odd)


def _say_served_change(plan: RunPlan, served: dict[str, Any]) -> None:
    """One line when the folder's server now reports another model than it did (other weights
    behind the same name): the folder then holds predictions of both."""
    old = plan.old_manifest.get("served_model")
    if not isinstance(old, dict) or old.get("reported") == served.get("reported"):
        return
    warn([f"{plan.store.root}: the server now reports model {served.get('reported')}, the "
          f"folder recorded {old.get('reported')}: other weights behind the same name "
          "(pass --out NEW_FOLDER for a separate run of them)"])  # fmt: skip


def _probe(plan: RunPlan, adapter: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the adapter and its server say before any call, into ``manifest``: its identity,
    its token counter (an API adapter probes its server's tokenizer: a dead server stops the run
    here) and, for a served model, what the server reports about it. Returns the call cache's
    identity (a served model's report keys the cache too)."""
    from cafe.clients.breaker import ServerUnreachable

    manifest["adapter"] = without_secrets(adapter.identity())
    try:
        manifest["token_counter"] = adapter.token_counter
    except ServerUnreachable as e:
        manifest.update(status="stopped", error=str(e), updated=now())
        plan.store.write_manifest(manifest)
        raise RunError(
            f"{e}; stopped before any call: {len(plan.done)} predictions kept in "
            f"{plan.store.root}; once the server answers, run the same command again"
        ) from None
    identity = plan.spec.call_identity()
    served = adapter.served_identity()
    if served is not None:
        identity["served"] = served
        manifest["served_model"] = served
        _say_served_change(plan, served)
    # tokens of the model's tokenizer, or words where it has none (the fallback)
    manifest["length_unit"] = length_unit(adapter.token_counter)
    return identity


def _generate(
    plan: RunPlan, todo: list[tuple[Sample, int]], manifest: dict[str, Any], writer: Any
) -> int:
    """Load the model, run ``todo`` through the execute stage, write each batch durably."""

    generation = plan.spec.generation
    if plan.spec.runs > 1 and is_greedy(generation):  # temperature 0 is greedy even if sampling
        warn([f"--runs {plan.spec.runs} with greedy decoding: runs will be identical"])
    adapter = _load(plan, manifest)
    store = plan.store
    request = plan.request
    calls = open_cache(request.cache)
    written = failures = replaced = 0
    tally = Tally()  # the shares of the predictions this session wrote
    before = {k: manifest.get(k) for k in ("usage", "counters")}  # the earlier sessions' figures

    def count() -> None:
        """This session's written figures into the manifest, over the earlier sessions' ones."""
        record(manifest, before, adapter, tally)

    def on_done(preds: list[Prediction]) -> None:
        nonlocal written, failures, replaced, tally
        # calls a dead server's breaker stopped stay pending (the next run makes them); the
        # rest of the batch is kept, then the run stops
        dead = [p for p in preds if p.sections.get("failure") == "unreachable"]
        preds = [p for p in preds if p.sections.get("failure") != "unreachable"]
        # the batch and its counts in one step: a stop, Ctrl-C or kill leaves counters that
        # cover exactly the predictions on disk, however far generation ran ahead
        tally = _write_batch(store, writer, manifest, before, adapter, tally, preds)
        written += len(preds)
        if dead:
            raise _ServerGone(dead[0].error or "the model server gave no reply")
        failures = _say_failures(preds, failures)
        replaced = _say_replaced(preds, replaced)

    try:
        identity = _probe(plan, adapter, manifest)
        count()  # this session counted from its start: lines a kill leaves are its own
        store.write_manifest(manifest)
        log = RunLog(store.root)  # adapter exceptions: each distinct traceback once
        paid_by = f"{store.root.resolve()}@{manifest.get('created')}"  # this folder's calls
        target = CachedAdapter(adapter, calls, identity, log, folder=paid_by)
        work = _Work(plan, adapter, target)
        try:  # the one executor: each batch committed whole as it finishes (_Commit)
            run_sync(execute(
                todo, work, work.failed, _Commit(on_done), fatal=(InputError,), threads=True,
                flush_every=1,
                batch_size=request.batch_size or adapter.default_batch_size,
                concurrency=request.concurrency or adapter.default_concurrency,
                progress=request.progress, desc=f"{plan.resolved.label} on {plan.spec.bench}",
            ))  # fmt: skip
        except InputError as e:  # --strict: what is written stays
            raise RunError(f"--strict: {e}") from None
        except _ServerGone as e:  # what is written stays; the same command resumes
            count()
            manifest["status"] = "stopped"
            manifest["error"] = str(e)
            manifest["updated"] = now()
            store.write_manifest(manifest)
            kept = len(plan.done) + written
            raise RunError(
                f"{e}; stopped: {kept} predictions kept in {store.root}; once the server "
                "answers, run the same command again to resume"
            ) from None
        finally:
            if failures > MAX_WARNINGS:
                print(
                    f"error: … and {failures - MAX_WARNINGS} more failed items "
                    "(each reason is in predictions.jsonl)",
                    file=sys.stderr,
                )
        count()
    finally:
        calls.close()
        adapter.close()
    return written


def _write_batch(
    store: Any, writer: Any, manifest: dict[str, Any], before: dict[str, Any], adapter: Any,
    tally: Tally, preds: list[Prediction],
) -> Tally:  # fmt: skip
    """Append ``preds``, then the manifest with their counts and the file's new length (the
    commit); when the manifest cannot be written (a full disk, Ctrl-C) the lines are taken back
    out, so the counters on disk never miss nor exceed the predictions. Returns the new tally;
    ``manifest`` is changed only once the batch is committed."""
    start = writer.size
    grown = tally.plus(preds)
    staged = dict(manifest)
    try:
        writer.write_many(preds)
        record(staged, before, adapter, grown)
        staged[COUNTED] = writer.size
        staged["updated"] = now()
        store.write_manifest(staged)
    except BaseException:
        if not _committed_past(store, start):
            writer.truncate(start)
        raise
    manifest.update(staged)
    return grown


def _committed_past(store: Any, start: int) -> bool:
    """Whether the manifest on disk already covers predictions.jsonl beyond ``start`` (an
    interrupt that came after the manifest's rename)."""
    try:
        counted = store.read_manifest().get(COUNTED)
    except Exception:  # noqa: BLE001 - unreadable: the batch is not committed
        return False
    return type(counted) is int and counted > start


class _LoadFailed(RunError):
    """The adapter could not load: a run folder this call made for it is removed again."""


class RunInterrupted(RunError):
    """Ctrl-C during a run: the message says what was saved and how to resume."""

    exit_code = 130  # the shell's code for SIGINT


def _interrupted(plan: RunPlan, manifest: dict[str, Any]) -> RunInterrupted:
    manifest["status"] = "interrupted"
    manifest["updated"] = now()
    plan.store.write_manifest(manifest)
    saved = {(p.sample_id, p.run_index) for p in plan.store.predictions()} & plan.keys
    return RunInterrupted(
        f"interrupted: {len(saved)} of {len(plan.keys)} predictions saved in {plan.store.root}; "
        "run the same command again to resume (nothing saved is run twice)"
    )


class _ServerGone(Exception):
    """A model server's circuit breaker opened (cafe.clients.breaker): stop the run."""


def _judge(run_dir: Path, name: str, options: dict[str, Any], progress: bool) -> list[str]:
    try:
        from cafe.steps.cafe_judge import judge_run
    except ImportError:
        return [
            f"CAFE judge not available in this install; add it later with `cafe judge {run_dir}`"
        ]
    from cafe.clients.breaker import ServerUnreachable
    from cafe.judge.pipeline import JudgeFailedError

    try:
        judge_run(run_dir, judge=name, progress=progress, **options)
    except (ValueError, FileNotFoundError) as e:  # no server named, no key, no captions
        return [f"error: judge {name} not run: {e}; judge later with `cafe judge {run_dir}`"]
    except ServerUnreachable as e:  # the judgements made so far are kept
        return [f"error: judge {name}: {e}; or judge later with `cafe judge {run_dir}`"]
    except JudgeFailedError as e:  # earlier judgements and CAFE metrics were kept
        return [f"error: {e}"]
    return []


def failure_summary(failed: list[Prediction], total: int, run_dir: Path) -> list[str]:
    """Distinct reasons with counts, and what to do about the kinds a user can fix."""
    from cafe.failures import RUN_LOG, summary_lines

    kinds = {p.sections.get("failure") for p in failed}
    hints = []
    if "audio" in kinds:
        hints.append("missing or unreadable audio is retried once the file changes: add or "
                     "fix the files and run the same command again")  # fmt: skip
    if "adapter" in kinds:
        hints.append(f"adapter errors are not retried (tracebacks in {run_dir / RUN_LOG}); "
                     "after a fix, run again with --retry-failed")  # fmt: skip
    if "model" in kinds:
        hints.append("model/server failures are retried by running the same command again")
    pairs = [(p.error or "failed", p.sample_id) for p in failed]
    return summary_lines("items", pairs, total, "; ".join(hints) or None)
