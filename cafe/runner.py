"""Run a model on a benchmark into a resumable run folder (DESIGN.md "the one data flow").

samples -> requests (prompt style) -> audio check + call cache -> adapter batches on C threads
-> parse + score -> predictions.jsonl (durable per batch) -> metrics.json "accuracy" -> judge.

Resume: an (item, run) is done once its prediction line is on disk; a SIGKILL loses at most the
batches in flight, and the same command picks up exactly the missing ones (model failures are
retried, bad-input failures are final). A finished run re-run loads no model."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click

from cafe import cache as cache_mod
from cafe.adapters.base import ADAPTERS, Adapter, ModelCard
from cafe.audio import audio_state, check_audio, file_sha256
from cafe.benchmarks.base import BENCHMARKS, Benchmark, LoadedBenchmark
from cafe.failures import most_failed
from cafe.manifest import (
    card_dict,
    checkpoint_fingerprint,
    environment,
    identity_mismatch,
    now,
    without_secrets,
)
from cafe.parsing import extract_answer, parse_sections, reasoning_text
from cafe.prompts import PromptTemplate, build_request, load_template
from cafe.records import Completion, InputError, Prediction, Problem, Request, Sample
from cafe.store import RunStore

SAMPLES = "samples.jsonl"
DEFAULT_MODEL = "reference"
DEFAULT_BENCH = "synth"
#: benchmarks whose samples carry ground-truth events, so the rule judge runs by default
DEFAULT_JUDGE = {"synth": "rule"}
MAX_WARNINGS = 20


class RunError(click.ClickException):
    """A run that cannot start or must stop (--strict); one line saying what to fix."""


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
    judge_failed: bool = False  # the inline judge did not run or most judgements failed


# model resolution --------------------------------------------------------------------------
@dataclass
class ResolvedModel:
    card: ModelCard
    label: str  # names the default run folder
    checkpoint: str | None


def default_card(name: str, cls: type[Adapter]) -> ModelCard:
    """The card of an adapter named directly: its ``default_card`` or one from its attributes."""
    card = getattr(cls, "default_card", None)
    if isinstance(card, ModelCard):
        return card
    return ModelCard(
        name=name,
        adapter=name,
        prompt_style=getattr(cls, "prompt_style", "lalm"),
        group=getattr(cls, "group", "Baseline"),
        engine=getattr(cls, "engine", "cpu"),
        description=(cls.__doc__ or "").strip().split("\n")[0],
    )


#: why adapters were skipped by the last model_type_cards() (their module would not import)
IMPORT_FAILURES: list[str] = []


def model_type_cards() -> dict[str, str]:
    """config.json ``model_type`` -> card or adapter name, from the ``MODEL_TYPES`` dicts that
    adapter classes or their modules declare (e.g. ``MODEL_TYPES = {"qwen2_audio":
    "qwen2-audio"}``). Only used when --model is a checkpoint folder; adapters whose engine is
    not installed are skipped."""
    mapping: dict[str, str] = {}
    IMPORT_FAILURES.clear()
    for name in ADAPTERS.names():
        try:
            cls = ADAPTERS.get(name)
        except Exception as e:  # an optional engine not installed, or a broken module
            IMPORT_FAILURES.append(str(e))
            continue
        module = sys.modules.get(getattr(cls, "__module__", ""))
        mapping.update(getattr(module, "MODEL_TYPES", None) or {})
        mapping.update(getattr(cls, "MODEL_TYPES", None) or {})
    return mapping


def resolve_model(
    model: str, checkpoint: str | None = None, cards_files: list[str] | None = None
) -> ResolvedModel:
    """--model is a card name, a registered adapter name, or a checkpoint folder."""
    from cafe.adapters.cards import load_cards

    cards = load_cards(list(cards_files or []))
    if model in cards:
        card = cards[model]
        label = card.name if checkpoint is None else f"{card.name}@{Path(checkpoint).name}"
        return ResolvedModel(card, label, checkpoint or card.checkpoint)
    if model in ADAPTERS.names():
        card = default_card(model, ADAPTERS.get(model))
        label = model if checkpoint is None else f"{model}@{Path(checkpoint).name}"
        return ResolvedModel(card, label, checkpoint or card.checkpoint)
    path = Path(model)
    if path.is_dir():
        config = path / "config.json"
        if not config.exists():
            raise RunError(f"{path}: not a checkpoint folder (no config.json)")
        try:
            model_type = json.loads(config.read_text()).get("model_type")
        except (json.JSONDecodeError, AttributeError):
            raise RunError(f"{config}: field model_type: not readable JSON") from None
        name = model_type_cards().get(str(model_type))
        if name in cards:
            card = cards[name]
        elif name is not None and name in ADAPTERS.names():
            card = default_card(name, ADAPTERS.get(name))
        else:
            skipped = f"; adapters that could not be imported: {'; '.join(IMPORT_FAILURES)}"
            raise RunError(
                f"{config}: field model_type: no adapter declares {model_type!r}; "
                "pass --model CARD --checkpoint PATH (see `cafe adapters list`)"
                + (skipped if IMPORT_FAILURES else "")
            )
        return ResolvedModel(replace(card, checkpoint=str(path)), path.name, str(path))
    import difflib

    known = sorted(set(cards) | set(ADAPTERS.names()))
    close = difflib.get_close_matches(model, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise RunError(
        f"unknown model {model!r}{hint} (a card name, an adapter name or a checkpoint folder; "
        "`cafe adapters list` shows them)"
    )


# samples -----------------------------------------------------------------------------------
def check_samples(loaded: LoadedBenchmark) -> tuple[list[Sample], list[Problem]]:
    """Generic sanity every benchmark shares: unique ids, a question, choices, an answer among
    them. A bad item keeps its place as a failed sample (Sample.error); a duplicate id cannot
    (predictions are keyed by id) and is dropped with a Problem."""
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
            elif not s.choices or not all(isinstance(c, str) for c in s.choices):
                problem = Problem(
                    loaded.source, "must be a non-empty list of strings", s.id, "choices"
                )
            elif s.answer is not None and s.answer.strip() not in {c.strip() for c in s.choices}:
                problem = Problem(
                    loaded.source, f"answer {s.answer!r} is not among the choices", s.id, "answer"
                )
            elif not s.audio:
                problem = Problem(loaded.source, "no audio file", s.id, "audio")
        if problem is not None:
            problems.append(problem)
            s = replace(s, error=str(problem))
        elif s.error and loaded.source not in s.error:  # the reason must name file and item
            s = replace(s, error=str(Problem(loaded.source, s.error, s.id)))
        samples.append(s)
    return samples, problems


def _write_samples(store: RunStore, samples: list[Sample]) -> None:
    path = store.path(SAMPLES)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(s.to_json() + "\n" for s in samples)
    os.replace(tmp, path)


def read_samples(run_dir: str | Path) -> list[Sample]:
    """The samples a run folder was run on (what judge and reports read)."""
    from cafe.store import iter_jsonl

    return [Sample.from_dict(d) for d in iter_jsonl(Path(run_dir) / SAMPLES)]


# one (item, run) -> Prediction -------------------------------------------------------------
def failed_prediction(
    sample_id: str, run_index: int, base: dict[str, Any], reason: str, kind: str
) -> Prediction:
    """``kind``: input, audio, model or adapter (see cafe.failures: which are retried)."""
    return Prediction(
        sample_id=sample_id,
        run_index=run_index,
        raw_output=None,
        sections={"failure": kind},
        parse_status="failed",
        error=reason.splitlines()[0] if reason else kind + " failure",
        **base,
    )


def score_completion(
    sample: Sample,
    completion: Completion,
    base: dict[str, Any],
    count_tokens: Callable[[str], int],
    is_correct: Callable[[str, str, list[str]], bool],
) -> Prediction:
    if completion.error or completion.text is None:
        reason = completion.error or "adapter returned no text"
        return failed_prediction(sample.id, completion.run_index, base, reason, "model")
    sections = parse_sections(completion.text)
    answer, status = extract_answer(sections.answer, sample.choices)
    correct = bool(
        answer is not None
        and sample.answer is not None
        and is_correct(answer, sample.answer, sample.choices)
    )
    return Prediction(
        sample_id=sample.id,
        run_index=completion.run_index,
        raw_output=completion.text,
        sections=sections.to_dict(),
        answer=answer,
        parse_status=status,
        correct=correct,
        reasoning_tokens=count_tokens(reasoning_text(completion.text, sections)),
        latency_s=completion.latency_s,
        **base,
    )


@dataclass
class _Job:
    """Everything a worker thread needs; built once per run."""

    adapter: Adapter
    identity: dict[str, Any]
    template: PromptTemplate
    generation: dict[str, Any]
    seed: int
    model_name: str
    cache: cache_mod.Cache
    strict: bool
    is_correct: Callable[[str, str, list[str]], bool]
    log: Any = None  # cafe.failures.RunLog: tracebacks of adapter exceptions, once each

    def base(self, run_index: int) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "prompt_style": self.template.style,
            "template_hash": self.template.hash,
            "seed": self.seed + run_index,
        }

    def cache_key(self, request: Request, audio_hashes: list[str]) -> str:
        hashes = iter(audio_hashes)
        messages = [
            {
                **m,
                "content": [
                    {"type": "audio", "sha256": next(hashes)} if p.get("type") == "audio" else p
                    for p in m["content"]
                ]
                if isinstance(m.get("content"), list)
                else m.get("content"),
            }
            for m in request.messages
        ]
        return cache_mod.make_key(
            kind="generate",
            model=self.identity,
            template_hash=request.template_hash,
            messages=messages,
            generation=request.generation,
            seed=request.seed,
        )

    def process(self, items: list[tuple[Sample, int]]) -> list[Prediction]:
        out: dict[tuple[str, int], Prediction] = {}
        misses: list[tuple[Sample, Request, str]] = []
        for sample, run_index in items:
            try:
                hashes = []
                for path in sample.audio:
                    check_audio(path, sample_id=sample.id)
                    hashes.append(file_sha256(path) if self.cache.path else "")
            except InputError as e:
                if self.strict:
                    raise
                pred = failed_prediction(
                    sample.id, run_index, self.base(run_index), str(e), "audio"
                )
                pred.sections["audio_state"] = audio_state(sample.audio)
                out[(sample.id, run_index)] = pred
                continue
            request = build_request(
                sample, self.template.style, run_index, self.seed + run_index,
                self.generation, self.template,
            )  # fmt: skip
            key = self.cache_key(request, hashes)
            hit = self.cache.get(key)
            if hit is not None:
                completion = Completion.from_dict(
                    {**hit, "sample_id": sample.id, "run_index": run_index}
                )
                completion.backend = {**completion.backend, "cached": True}
                out[(sample.id, run_index)] = self._score(sample, completion)
            else:
                misses.append((sample, request, key))
        if misses:
            try:
                completions = self.adapter.generate([r for _, r, _ in misses])
                if inspect.isawaitable(completions):  # an async generate: one loop per batch
                    completions = asyncio.run(completions)  # type: ignore[arg-type]
                if len(completions) != len(misses):
                    raise RuntimeError(
                        f"adapter returned {len(completions)} completions for {len(misses)}"
                    )
            except Exception as e:  # adapter code raised: deterministic, never retried blindly
                first = (str(e).strip().splitlines() or [""])[0]
                reason = f"adapter error: {type(e).__name__}: {first}"
                if self.log is not None:
                    self.log.exception(f"{self.model_name}: generate() raised", e)
                    reason += f" (traceback in {self.log.path})"
                for sample, request, _ in misses:
                    out[(sample.id, request.run_index)] = failed_prediction(
                        sample.id, request.run_index, self.base(request.run_index), reason,
                        "adapter",
                    )  # fmt: skip
                return [out[(s.id, r)] for s, r in items]
            for (sample, request, key), completion in zip(misses, completions, strict=True):
                if not completion.error and completion.text:  # failed/empty: retried next time
                    self.cache.put(key, completion.to_dict())
                out[(sample.id, request.run_index)] = self._score(sample, completion)
        return [out[(s.id, r)] for s, r in items]

    def _score(self, sample: Sample, completion: Completion) -> Prediction:
        return score_completion(
            sample,
            completion,
            self.base(completion.run_index),
            self.adapter.count_tokens,
            self.is_correct,
        )


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _warn(lines: list[str]) -> None:
    for line in lines[:MAX_WARNINGS]:
        click.echo(f"warning: {line}", err=True)
    if len(lines) > MAX_WARNINGS:
        click.echo(f"warning: … and {len(lines) - MAX_WARNINGS} more (manifest.json)", err=True)


def _slug(text: str) -> str:
    return re.sub(r"[^\w.@+-]+", "_", text).strip("_") or "run"


def _cache(enabled: bool) -> cache_mod.Cache:
    if not enabled:
        return cache_mod.Cache(None)
    return cache_mod.Cache(cache_mod.cache_file("calls.sqlite"))


# the run -----------------------------------------------------------------------------------
def run(
    model: str = DEFAULT_MODEL,
    bench: str = DEFAULT_BENCH,
    /,  # positional-only, so an adapter option may itself be called "model" (served models)
    *,
    checkpoint: str | None = None,
    data: str | None = None,
    version: str | None = None,
    runs: int = 1,
    limit: int | None = None,
    batch_size: int | None = None,
    concurrency: int | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    prompt_style: str | None = None,
    prompt_template: str | Path | None = None,
    judge: str | None = None,
    judge_options: dict[str, Any] | None = None,
    strict: bool = False,
    progress: bool = True,
    cache: bool = True,
    cards: list[str] | None = None,
    audio_root: str | Path | None = None,
    retry_failed: bool = False,
    **adapter_options: Any,
) -> RunResult:
    """Run ``model`` on ``bench`` into a run folder and return its metrics. Re-running the same
    call resumes; ``judge=None`` means the benchmark's default ("rule" for synth), "none" skips.
    Raises RunError (a click.ClickException) for what the user must fix, and on the first bad
    input with ``strict``."""
    if runs < 1:
        raise RunError("--runs must be at least 1")
    resolved = resolve_model(model, checkpoint, cards)
    card = resolved.card
    style = prompt_style or card.prompt_style
    try:
        template = load_template(style, prompt_template)
    except (FileNotFoundError, ValueError, KeyError) as e:
        raise RunError(str(e)) from None

    try:
        bench_obj: Benchmark = BENCHMARKS.get(bench)()
    except KeyError as e:
        raise RunError(str(e)) from None
    if audio_root is not None:  # audio kept outside the metadata's folder, by the user's choice
        bench_obj.audio_root = str(audio_root)
    loaded = bench_obj.load(data=data, version=version)
    samples, own_problems = check_samples(loaded)
    problems = [*loaded.problems, *own_problems]
    if limit is not None:
        samples = samples[:limit]
    if strict:
        if problems:
            raise RunError(f"--strict: {problems[0]}")
        bad = next((s for s in samples if s.error), None)
        if bad is not None:
            raise RunError(f"--strict: {bad.error}")
    _warn([str(p) for p in problems])

    run_dir = (
        Path(out) if out else Path("runs") / _slug(f"{resolved.label}-{bench}-{loaded.version}")
    )
    store = RunStore(run_dir).create()
    adapter_cls = ADAPTERS.get(card.adapter)
    generation = dict(card.generation)
    manifest: dict[str, Any] = {
        "cafe": {"format": 1},
        "model": card_dict(card),
        "checkpoint": {
            "path": resolved.checkpoint,
            "fingerprint": checkpoint_fingerprint(resolved.checkpoint),
        },
        "adapter_options": without_secrets(adapter_options),
        "bench": {
            "name": bench,
            "version": loaded.version,
            "source": loaded.source,
            "sha256": loaded.sha256,
            "n_samples": len(samples),
            "problems": [str(p) for p in problems],
        },
        "prompt": {
            "style": template.style,
            "template_hash": template.hash,
            "template_source": template.source,
            "system": template.system,
        },
        "runs": runs,
        "seed": seed,
        "seeds": [seed + k for k in range(runs)],
        "limit": limit,
        "generation": generation,
        **environment(),
    }
    old: dict[str, Any] = {}
    if store.path("manifest.json").exists():
        old = store.read_manifest()
        mismatch = identity_mismatch(old, manifest)
        if mismatch:
            raise RunError(
                f"{run_dir} holds a different run ({mismatch}); pass --out NEW_FOLDER or delete it"
            )
    manifest["created"] = old.get("created", now())
    manifest["updated"] = now()
    for k in ("adapter", "token_counter", "usage"):
        if k in old:
            manifest[k] = old[k]
    manifest["status"] = "running"
    store.write_manifest(manifest)
    # same identity (bench file hash) and the same item count: the same samples, already written
    if not store.path(SAMPLES).exists() or old.get("bench", {}).get("n_samples") != len(samples):
        _write_samples(store, samples)

    done = {(p.sample_id, p.run_index): p for p in store.predictions()}

    from cafe.failures import RETRIED, RunLog

    retry = (*RETRIED, "adapter") if retry_failed else RETRIED

    def is_pending(s: Sample, r: int) -> bool:
        p = done.get((s.id, r))
        if p is None or p.parse_status != "failed":
            return p is None
        kind = p.sections.get("failure")
        if kind == "audio":  # retried once its files changed (added, replaced, repaired)
            return p.sections.get("audio_state") != audio_state(s.audio)
        return kind in retry

    pending = [(s, r) for r in range(runs) for s in samples if is_pending(s, r)]
    base = {"model": card.name, "prompt_style": template.style, "template_hash": template.hash}
    result = RunResult(run_dir=run_dir, metrics={}, problems=problems)

    from cafe.benchmarks.scoring import accuracy_section, is_correct

    with store.writer("predictions.jsonl") as writer:
        bad = [(s, r) for s, r in pending if s.error]
        writer.write_many(
            failed_prediction(s.id, r, {**base, "seed": seed + r}, s.error or "", "input")
            for s, r in bad
        )
        result.new_predictions += len(bad)
        todo = [(s, r) for s, r in pending if not s.error]
        if todo:
            if runs > 1 and not generation.get("do_sample") and not generation.get("temperature"):
                _warn([f"--runs {runs} with greedy decoding: runs will be identical"])
            try:
                adapter = adapter_cls(card, checkpoint=resolved.checkpoint, **adapter_options)
            except (OSError, ValueError, ImportError) as e:  # missing weights, key, extra
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                msg = (
                    f"cannot load model {card.name!r} (adapter {card.adapter}, checkpoint "
                    f"{resolved.checkpoint or '-'}): {first}"
                )
                manifest["status"] = "failed"  # never left "running" by a model that won't load
                manifest["error"] = msg
                manifest["updated"] = now()
                store.write_manifest(manifest)
                raise RunError(msg) from e
            result.model_loaded = True
            try:
                manifest["adapter"] = without_secrets(adapter.identity())
                manifest["token_counter"] = adapter.token_counter
                store.write_manifest(manifest)
                job = _Job(
                    adapter=adapter,
                    identity={
                        **manifest["adapter"],
                        "fingerprint": manifest["checkpoint"]["fingerprint"],
                    },
                    template=template,
                    generation=generation,
                    seed=seed,
                    model_name=card.name,
                    cache=_cache(cache),
                    strict=strict,
                    is_correct=is_correct,
                    log=RunLog(run_dir),
                )
                result.new_predictions += _execute(
                    job,
                    todo,
                    batch_size or adapter.default_batch_size,
                    concurrency or adapter.default_concurrency,
                    writer,
                    progress,
                    f"{resolved.label} on {bench}",
                )
                manifest["cache"] = {"hits": job.cache.hits, "misses": job.cache.misses}
                job.cache.close()
                # API adapters total tokens and cost; a resumed run adds this session's share
                session = getattr(adapter, "usage", None)
                if isinstance(session, dict):
                    manifest["usage"] = add_usage(manifest.get("usage") or {}, session)
            finally:
                adapter.close()

    keys = {(s.id, r) for s in samples for r in range(runs)}
    final = store.predictions() if result.new_predictions else list(done.values())
    predictions = [p for p in final if (p.sample_id, p.run_index) in keys]
    store.update_metrics(
        "accuracy", accuracy_section(samples, predictions, dict(bench_obj.breakdowns), runs=runs)
    )
    manifest["status"] = "complete"
    manifest.pop("error", None)
    failed = [p for p in predictions if p.parse_status == "failed"]
    manifest["counts"] = {"predictions": len(predictions), "failed": len(failed)}
    result.failure_lines = _failure_summary(failed, len(predictions), run_dir)
    result.most_failed = bool(predictions) and most_failed(len(failed), len(predictions))
    manifest["updated"] = now()

    judge_name = judge if judge is not None else DEFAULT_JUDGE.get(bench)
    if judge_name and judge_name != "none":
        manifest["judge"] = {"name": judge_name, **without_secrets(judge_options or {})}
        store.write_manifest(manifest)
        judge_notes = _judge(run_dir, judge_name, judge_options or {}, progress)
        result.notes.extend(judge_notes)
        result.judge_failed = any(n.startswith("error:") for n in judge_notes)
    store.write_manifest(manifest)
    result.manifest = manifest
    result.metrics = store.read_metrics()
    return result


def _failure_summary(failed: list[Prediction], total: int, run_dir: Path) -> list[str]:
    """Distinct reasons with counts, and what to do about the kinds a user can fix."""
    from cafe.failures import summary_lines

    kinds = {p.sections.get("failure") for p in failed}
    hints = []
    if "audio" in kinds:
        hints.append("missing or unreadable audio is retried once the file changes: add or "
                     "fix the files and run the same command again")  # fmt: skip
    if "adapter" in kinds:
        hints.append(f"adapter errors are not retried (tracebacks in {run_dir / 'run.log'}); "
                     "after a fix, run again with --retry-failed")  # fmt: skip
    if "model" in kinds:
        hints.append("model/server failures are retried by running the same command again")
    pairs = [(p.error or "failed", p.sample_id) for p in failed]
    return summary_lines("items", pairs, total, "; ".join(hints) or None)


def add_usage(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Field-wise sum of two usage dicts (calls, tokens, cost)."""
    out = dict(total)
    for k, v in more.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = round(out.get(k, 0) + v, 6)
    return out


def _execute(
    job: _Job,
    items: list[tuple[Sample, int]],
    batch_size: int,
    concurrency: int,
    writer: Any,
    progress: bool,
    desc: str,
) -> int:
    """Batches on ``concurrency`` threads, at most 2 batches per thread in flight (memory stays
    flat); each finished batch is written and fsynced before it counts as done."""
    from tqdm import tqdm

    batch_size, concurrency = max(1, batch_size), max(1, concurrency)
    written = failures = 0
    bar = tqdm(total=len(items), desc=desc, unit="item", disable=not progress, file=sys.stderr)
    batches = _batches(items, batch_size)
    in_flight: set[Future[list[Prediction]]] = set()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        try:
            while True:
                while len(in_flight) < 2 * concurrency:
                    batch = next(batches, None)
                    if batch is None:
                        break
                    in_flight.add(pool.submit(job.process, batch))
                if not in_flight:
                    break
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    preds = fut.result()  # InputError under --strict stops the run here
                    writer.write_many(preds)
                    written += len(preds)
                    bar.update(len(preds))
                    for p in preds:  # say why an item failed as it happens, not only on disk
                        if p.parse_status == "failed" and p.error:
                            failures += 1
                            if failures <= MAX_WARNINGS:
                                bar.write(f"error: {p.error}", file=sys.stderr)
        except (
            BaseException
        ) as e:  # --strict stop, Ctrl-C: drop queued batches, keep what's written
            for fut in in_flight:
                fut.cancel()
            if isinstance(e, InputError):
                raise RunError(f"--strict: {e}") from None
            raise
        finally:
            bar.close()
            if failures > MAX_WARNINGS:
                click.echo(
                    f"error: … and {failures - MAX_WARNINGS} more failed items "
                    "(each reason is in predictions.jsonl)",
                    err=True,
                )
    return written


def _judge(run_dir: Path, name: str, options: dict[str, Any], progress: bool) -> list[str]:
    try:
        from cafe.judge.pipeline import judge_run
    except ImportError:
        return [
            f"CAFE judge not available in this install; add it later with `cafe judge {run_dir}`"
        ]
    from cafe.judge.pipeline import JudgeFailedError

    try:
        judge_run(run_dir, judge=name, progress=progress, **options)
    except (ValueError, FileNotFoundError) as e:  # no server named, no key, no captions
        return [f"error: judge {name} not run: {e}; judge later with `cafe judge {run_dir}`"]
    except JudgeFailedError as e:  # earlier judgements and CAFE metrics were kept
        return [f"error: {e}"]
    return []


# summary -----------------------------------------------------------------------------------
def _num(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def summary_table(metrics: dict[str, Any]) -> str:
    acc = metrics.get("accuracy") or {}
    total = acc.get("total") or {}
    rows = [("total", total.get("correct"), total.get("total"), total.get("acc"))]
    for name, values in (acc.get("breakdowns") or {}).items():
        for value, cell in values.items():
            rows.append(
                (f"{name}={value}", cell.get("correct"), cell.get("total"), cell.get("acc"))
            )
    width = max(len(r[0]) for r in rows)
    lines = [f"{'':{width}}  correct  total     acc"]
    for label, correct, n, a in rows:
        lines.append(f"{label:{width}}  {correct!s:>7}  {n!s:>5}  {a!s:>6}")
    runs = acc.get("runs") or {}
    pr = acc.get("parse_rate")
    lines.append(
        f"parse rate {pr}%   unanswered {acc.get('unanswered')}   failed {acc.get('failed')}"
        + (
            f"   runs {runs.get('n')}: mean {runs.get('mean')} ± {runs.get('std')}"
            if runs.get("n", 1) > 1
            else ""
        )
    )
    official = acc.get("official_denominator")
    if official:
        lines.append(
            "official scripts' denominator (answered only): "
            f"{official.get('correct')}/{official.get('total')} = {official.get('acc')}"
        )
    cafe = metrics.get("cafe")
    if cafe:
        keys = ("acc_per", "err_per", "err_use", "err_omit")
        lines.append(
            "CAFE "
            + "  ".join(f"{k} {_num(cafe.get(k))}" for k in keys)
            + f"  ({cafe.get('mode', 'micro')})"
        )
    return "\n".join(lines)


# command line ------------------------------------------------------------------------------
def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--option {pair!r}: expected KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


@click.command("run")
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Model card name, registered adapter name, or a checkpoint folder (its config.json "
    "model_type picks the card).",
)
@click.option("--checkpoint", help="Checkpoint path or hub id overriding the card's.")
@click.option("--bench", default=DEFAULT_BENCH, show_default=True, help="Benchmark name.")
@click.option("--data", help="Benchmark metadata file or folder (default: the benchmark's own).")
@click.option("--version", "bench_version", help="Benchmark version (default: detected).")
@click.option(
    "--audio-root",
    type=click.Path(file_okay=False),
    help="Folder the metadata's audio paths are relative to and must stay inside [the metadata "
    "file's folder]; paths resolving outside it fail their item.",
)
@click.option("--runs", default=1, show_default=True, help="Sampled generations per item.")
@click.option("--limit", type=int, help="Only the first N items.")
@click.option("--batch-size", type=int, help="Requests per generate() call [adapter default].")
@click.option("--concurrency", type=int, help="generate() calls in flight [adapter default].")
@click.option("--seed", default=0, show_default=True, help="Seed of run 0; run k uses seed+k.")
@click.option("--out", type=click.Path(), help="Run folder [runs/<model>-<bench>-<version>].")
@click.option("--prompt-style", help="Override the card's prompt style (`cafe adapters show`).")
@click.option(
    "--prompt-template",
    type=click.Path(exists=True, dir_okay=False),
    help="Template file ({question}, {choices}) replacing the style's text.",
)
@click.option("--judge", help="CAFE judge after the run (rule for synth by default; none: skip).")
@click.option("--judge-model", help="Judge model name (API judges).")
@click.option(
    "--endpoint",
    multiple=True,
    help="Model server base URL for server-backed models (repeat: work is sharded across them).",
)
@click.option(
    "--judge-endpoint", multiple=True, help="Judge server base URL (repeat to spread load)."
)
@click.option("--judge-concurrency", type=int, help="Judge calls in flight.")
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="Variable holding the key for the --endpoint server(s) [CAFE_ENDPOINT_API_KEY; "
    "OpenAI's own URL takes OPENAI_API_KEY].",
)
@click.option(
    "--judge-api-key-env",
    metavar="NAME",
    help="Variable holding the key for the --judge-endpoint server(s) [CAFE_ENDPOINT_API_KEY].",
)
@click.option(
    "--captions",
    type=click.Path(exists=True),
    help="Ground-truth captions JSONL for an LLM judge (`cafe caption`); synth needs none.",
)
@click.option("--strict", is_flag=True, help="Stop with an error at the first bad input.")
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Also retry items whose adapter raised (after fixing it); missing audio and server "
    "failures are always retried.",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the model call cache.")
@click.option("--cards", multiple=True, type=click.Path(exists=True), help="Extra cards YAML.")
@click.option("-o", "--option", "options", multiple=True, help="Adapter option KEY=VALUE.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def run_command(
    model: str,
    checkpoint: str | None,
    bench: str,
    data: str | None,
    bench_version: str | None,
    audio_root: str | None,
    runs: int,
    limit: int | None,
    batch_size: int | None,
    concurrency: int | None,
    seed: int,
    out: str | None,
    prompt_style: str | None,
    prompt_template: str | None,
    judge: str | None,
    judge_model: str | None,
    endpoint: tuple[str, ...],
    judge_endpoint: tuple[str, ...],
    judge_concurrency: int | None,
    api_key_env: str | None,
    judge_api_key_env: str | None,
    captions: str | None,
    strict: bool,
    retry_failed: bool,
    no_cache: bool,
    cards: tuple[str, ...],
    options: tuple[str, ...],
    quiet: bool,
) -> None:
    """Run a model on a benchmark into a resumable run folder.

    With no options: the reference listener on the synthetic benchmark (generated on first
    use), judged by the rule judge. Kill it at any time and run the same command again to
    finish; a finished run re-run makes no model call. Results: manifest.json,
    predictions.jsonl, samples.jsonl, metrics.json (and judgements.jsonl after judging)."""
    judge_options: dict[str, Any] = {}
    if judge_model:
        judge_options["judge_model"] = judge_model
    if judge_endpoint:
        judge_options["endpoints"] = tuple(judge_endpoint)
    if judge_concurrency:
        judge_options["concurrency"] = judge_concurrency
    if captions:
        judge_options["captions"] = captions
    if judge_api_key_env:
        judge_options["api_key_env"] = judge_api_key_env
    adapter_options = _parse_options(options)
    if endpoint:
        adapter_options["endpoints"] = list(endpoint)
    if api_key_env:
        adapter_options["api_key_env"] = api_key_env
    result = run(
        model,
        bench,
        checkpoint=checkpoint,
        data=data,
        version=bench_version,
        runs=runs,
        limit=limit,
        batch_size=batch_size,
        concurrency=concurrency,
        seed=seed,
        out=out,
        prompt_style=prompt_style,
        prompt_template=prompt_template,
        judge=judge,
        judge_options=judge_options,
        strict=strict,
        progress=not quiet,
        cache=not no_cache,
        cards=list(cards),
        audio_root=audio_root,
        retry_failed=retry_failed,
        **adapter_options,
    )
    for note in result.notes:
        click.echo(note, err=True)
    click.echo(summary_table(result.metrics))
    state = "model loaded" if result.model_loaded else "nothing left to run, no model loaded"
    click.echo(f"{result.new_predictions} new predictions ({state}); run folder: {result.run_dir}")
    for line in result.failure_lines:
        click.echo(line, err=True)
    if result.most_failed:  # a run that produced (almost) nothing must not look like success
        raise RunError("most items failed (reasons above); the run folder keeps what succeeded")
    if result.judge_failed:
        raise RunError("the model run is complete, but its CAFE judge failed (reason above)")
