"""The accuracy section of metrics.json under the official MMAU / MMAR answer rule
(cafe.benchmarks.string_match), plus `cafe score` for predictions files in the official scripts'
format. The official scripts silently skip items without a prediction; we keep them in the
denominator as wrong, count them, and also report the figure under the scripts' denominator.

The headline applies the rule to the model's answer text (the answer section its prompt style
defines, unmodified: what `cafe export` writes and the official scripts read), so a bare "(A)" is
wrong. The lenient figure maps the answer to a choice first (a letter, the option text) and is
reported beside it, labelled, with the mapping's parse status counts."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from cafe.benchmarks.metadata import parse_rows
from cafe.benchmarks.official import KNOWN_KEYS, ROWS_READING, row_id
from cafe.benchmarks.official import cell as _cell
from cafe.benchmarks.official import percent as _acc
from cafe.benchmarks.string_match import is_correct, official_text
from cafe.errors import CafeError
from cafe.records import InputError, Prediction, Problem, Sample


@lru_cache(maxsize=32)
def choice_rule_for(bench: str | None) -> Callable[[str | None, str, list[str]], bool]:
    """A benchmark's reading of a reply already mapped to a choice (``choice_is_correct``): the
    lenient figure's and a judge-named option's rule."""
    from cafe.benchmarks.base import benchmark_class

    return benchmark_class(bench or "")().choice_is_correct


RULE_LABEL = "official string match on the model's answer text (what `cafe export` writes)"
LENIENT_LABEL = (
    "lenient: the answer mapped to a choice first (a letter or the option text), then the "
    "official match; not comparable with the official scripts"
)
PARSE_STATUSES = ("ok", "no_answer", "unmapped", "failed", "missing")
OFFICIAL_LABEL = (
    "official: items without a prediction skipped (left out of the denominator), as the "
    "official scripts do; cafe's own figure counts them wrong"
)


def _values(v: Any) -> list[str]:
    """A breakdown value as the list of keys it counts under (lists count under each)."""
    if isinstance(v, (list, tuple, set)):
        return [str(x) for x in v] or ["none"]
    return ["none" if v is None else str(v)]


def accuracy_section(
    samples: list[Sample],
    predictions: list[Prediction],
    breakdowns: dict[str, Callable[[Sample], Any]] | None = None,
    *,
    runs: int | None = None,
    rule: Callable[[str | None, str, list[str]], bool] | None = None,
    label: str | None = None,
    choice_rule: Callable[[str | None, str, list[str]], bool] | None = None,
    lenient_label: str | None = None,
    answered_label: str | None = None,
) -> dict[str, Any]:
    """Accuracy over every (item, run): a missing, unanswered (no answer text) or failed
    prediction counts as wrong. Runs are 0..runs-1 when given (so a run with no prediction at all
    still counts), plus any other run index present (at least one). Samples without an
    answer (MMAU test) cannot be scored and are only counted under "unscorable".

    The headline (total, breakdowns, runs) is ``rule`` (the benchmark's; default the official
    match) on the answer text. Returns total / official_denominator (correct over answered (item,
    run) pairs, as the official scripts compute it) / unanswered / failed / parse_rate (share with
    an answer text, percent) / breakdowns / runs (per-run accuracy, mean and sample std) /
    lenient (the choice-mapped figure, labelled) / parse_status (mapping outcome counts)."""
    breakdowns = breakdowns or {}
    rule = rule or is_correct
    choice_rule = choice_rule or rule
    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    run_ids = sorted({p.run_index for p in predictions} | set(range(runs or 0))) or [0]
    scorable = [s for s in samples if s.answer is not None]

    correct = total = unanswered = failed = 0
    lenient = 0
    lenient_run = {r: 0 for r in run_ids}
    status = dict.fromkeys(PARSE_STATUSES, 0)
    per_run = {r: [0, 0] for r in run_ids}
    # per value: [correct, total, answered]; answered = the official scripts' denominator
    cells: dict[str, dict[str, list[int]]] = {n: defaultdict(lambda: [0, 0, 0]) for n in breakdowns}
    for s in scorable:
        keys = {n: _values(fn(s)) for n, fn in breakdowns.items()}
        for r in run_ids:
            ok, lenient_ok, answered, is_failed = _score_pair(
                s, by_key.get((s.id, r)), rule, choice_rule, status
            )
            unanswered += not answered
            failed += is_failed
            total += 1
            correct += ok
            lenient += lenient_ok
            lenient_run[r] += lenient_ok
            per_run[r][0] += ok
            per_run[r][1] += 1
            for n, vals in keys.items():
                for v in vals:
                    cells[n][v][0] += ok
                    cells[n][v][1] += 1
                    cells[n][v][2] += answered

    return {
        "rule": label or RULE_LABEL,  # the benchmark's own where its rule is another
        "total": _cell(correct, total),
        "official_denominator": _cell(correct, total - unanswered),
        "unanswered": unanswered,
        "failed": failed,
        "unscorable": len(samples) - len(scorable),
        "parse_rate": _acc(total - unanswered, total),
        "breakdowns": _breakdown_cells(cells, official=False),
        "official_breakdowns": _breakdown_cells(cells, official=True),
        "official_label": answered_label or OFFICIAL_LABEL,
        "runs": _runs_spread(per_run),
        "identical_runs": _identical_runs(predictions, run_ids),
        "lenient": {
            "label": lenient_label or LENIENT_LABEL,
            "total": _cell(lenient, total),
            "runs": _lenient_runs(per_run, lenient_run),
        },
        "parse_status": status,
    }


def _breakdown_cells(
    cells: dict[str, dict[str, list[int]]], official: bool
) -> dict[str, dict[str, Any]]:
    """Per breakdown value: correct over every (item, run), or ``official``ly over the answered
    ones (the official scripts leave items without a prediction out of each denominator)."""
    return {
        n: {v: _cell(c, a if official else t) for v, (c, t, a) in sorted(by.items())}
        for n, by in cells.items()
    }


def _runs_spread(per_run: dict[int, list[int]]) -> dict[str, Any]:
    """Per-run accuracy ([correct, total] per run index), their mean and sample std."""
    exact = [100.0 * c / t for c, t in per_run.values() if t]
    return {
        "n": len(per_run),
        "per_run": [_acc(c, t) for c, t in per_run.values()],
        "mean": round(statistics.fmean(exact), 2) if exact else None,
        "std": round(statistics.stdev(exact), 2) if len(exact) > 1 else 0.0,
    }


def _lenient_runs(per_run: dict[int, list[int]], lenient_run: dict[int, int]) -> dict[str, Any]:
    exact = [100.0 * lenient_run[r] / t for r, (_, t) in per_run.items() if t]
    return {
        "per_run": [_acc(lenient_run[r], t) for r, (_, t) in per_run.items()],
        "mean": round(statistics.fmean(exact), 2) if exact else None,
    }


def bench_accuracy(
    bench: Any, samples: list[Sample], predictions: list[Prediction], runs: int | None = None
) -> dict[str, Any]:
    """accuracy_section with everything ``bench`` declares: its rule and label, its breakdowns,
    its reading of a mapped choice (the lenient figure) and what answered-only means for it."""
    return accuracy_section(samples, predictions, dict(bench.breakdowns), runs=runs,
                            rule=bench.is_correct, label=bench.accuracy_label,
                            choice_rule=bench.choice_is_correct, lenient_label=bench.lenient_label,
                            answered_label=bench.answered_label)  # fmt: skip


def _score_pair(
    s: Sample,
    p: Prediction | None,
    rule: Callable[..., bool],
    choice_rule: Callable[..., bool],
    status: dict[str, int],
) -> tuple[bool, bool, bool, bool]:
    """One (item, run): (correct, lenient correct, answered, failed); counts its parse status.
    A missing or failed prediction is unanswered; a missing one is failed when the item is."""
    if p is None or p.error is not None:
        status["missing" if p is None else "failed"] += 1
        return False, False, False, p is not None or s.error is not None
    status[p.parse_status if p.parse_status in status else "unmapped"] += 1
    text = official_text(p)
    ok = text is not None and bool(rule(text, s.answer, s.choices))
    lenient_ok = p.answer is not None and bool(choice_rule(p.answer, s.answer, s.choices))
    return ok, lenient_ok, text is not None, False


def _identical_runs(predictions: list[Prediction], run_ids: list[int]) -> bool:
    """True when there are several runs and every item's outputs are the same in all of them
    (greedy decoding): the spread over runs is then no sampling spread, and tables say so."""
    if len(run_ids) < 2:
        return False
    outputs: dict[str, set[str | None]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for p in predictions:
        outputs[p.sample_id].add(p.raw_output)
        counts[p.sample_id] += 1
    return bool(outputs) and all(
        len(o) == 1 and counts[sid] == len(run_ids) and None not in o for sid, o in outputs.items()
    )


# `cafe score` -----------------------------------------------------------------------------------


def read_parquet_records(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a parquet file (MMAU-Pro's official input: test.parquet with a prediction
    column added), as the official script's pandas reads them (a struct column: a dict with
    every field, null where unset)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        why = "reading parquet needs pyarrow (pip install pyarrow; cafe-audio-eval[hf] has it)"
        raise InputError(Problem(str(path), why)) from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # a truncated or foreign file: pyarrow's own error, one line
        raise InputError(Problem(str(path), f"not a readable parquet file ({e})")) from None


def read_records(path: str | Path) -> tuple[list[dict[str, Any]], list[Problem]]:
    """A JSON list or JSONL file of objects (or a parquet file's rows). Malformed JSONL lines
    and non-objects become Problems; the rest is returned."""
    p = Path(path)
    if p.suffix == ".parquet":
        return read_parquet_records(p), []
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        msg = f"not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})"
        raise InputError(Problem(str(p), msg)) from None
    except OSError as e:
        raise InputError(Problem(str(p), f"cannot read ({e.strerror or e})")) from None
    if not text.strip():
        raise InputError(Problem(str(p), "file is empty"))
    try:
        rows, problems = parse_rows(text, p)
    except json.JSONDecodeError as e:
        raise InputError(Problem(str(p), f"not valid JSON ({e.msg}, line {e.lineno})")) from None
    except ValueError as e:  # nested too deep for the parser
        raise InputError(Problem(str(p), f"not valid JSON ({e})")) from None
    where = "item" if text.lstrip().startswith("[") else "line"
    out = []
    for i, row in rows:
        if isinstance(row, dict):
            out.append(row)
        else:
            problems.append(Problem(str(p), f"{where} {i}: not a JSON object"))
    return out, problems


def predictions_from_file(
    path: str | Path,
    keys: tuple[str, ...],
    key: str | None = None,
    id_keys: tuple[str, ...] = ("id",),
) -> tuple[list[Prediction], list[Problem]]:
    """Official-format predictions as Prediction records (run 0). The whole prediction text is
    the answer the official rule matches; an item without the key gives no Prediction (the
    official scripts skip it; accuracy_section counts it as unanswered). ``keys``: where the
    benchmark's official script reads the prediction (``Benchmark.prediction_keys``, first
    present wins); ``key`` overrides them. ``id_keys``: where a row holds its item's id
    (``Benchmark.prediction_id_keys``, first present wins)."""
    rows, problems = read_records(path)
    return predictions_from_rows(rows, path, keys, key, id_keys, problems)


def response_rows(
    rows: list[dict[str, Any]], keys: tuple[str, ...], key: str | None, id_keys: tuple[str, ...]
) -> list[tuple[str, Any]]:
    """Every row with an id, in order, as (id, the value under the prediction key or MISSING):
    what a script that reads each line sees (duplicates included)."""
    from cafe.benchmarks.letters import MISSING

    keys = (key,) if key else tuple(keys)
    out = []
    for row in rows:
        sid = row_id(row, id_keys)
        if sid is not None:
            k = next((k for k in keys if k in row), None)
            out.append((sid, MISSING if k is None else row[k]))
    return out


def predictions_from_rows(
    rows: list[dict[str, Any]],
    path: str | Path,
    keys: tuple[str, ...],
    key: str | None = None,
    id_keys: tuple[str, ...] = ("id",),
    problems: list[Problem] | None = None,
) -> tuple[list[Prediction], list[Problem]]:
    """predictions_from_file for rows already read (read_records, or a benchmark's own layout:
    Benchmark.read_official_file)."""
    problems = [] if problems is None else problems
    if rows and not any(row_id(row, id_keys) is not None for row in rows):
        where = " / ".join(id_keys)
        msg = f"no row has {where} (where this benchmark's files name their item)"
        raise InputError(Problem(str(path), msg, field=id_keys[0]))
    keys = (key,) if key else tuple(keys)
    other = None if key else _other_known_key(rows, keys)
    if other is not None:  # one line instead of a warning per item
        k, n = other
        problems.append(
            Problem(
                str(path),
                f"no item has {' / '.join(keys)} (where the official script reads the "
                f"prediction); {n} item(s) have {k!r}: pass --key {k} to score them "
                "(every item counts unanswered now)",
            )
        )
    preds: dict[str, Prediction] = {}
    for i, row in enumerate(rows, 1):
        sid = row_id(row, id_keys)
        if sid is None:
            problems.append(Problem(str(path), f"item {i} has no {' / '.join(id_keys)}",
                                    field=id_keys[0]))  # fmt: skip
            continue
        k = next((k for k in keys if k in row), None)
        if k is None:  # the official scripts skip it too: unanswered, but said
            if other is None:
                problems.append(Problem(str(path), "no prediction (unanswered)", sid, keys[0]))
            continue
        value = row[k]
        if not isinstance(value, str):  # scripts crash on or drop these: counted, named
            what = "null" if value is None else f"not a string ({type(value).__name__})"
            problems.append(Problem(str(path), f"prediction is {what}: counted unanswered", sid, k))
        if sid in preds:
            problems.append(
                Problem(str(path), "duplicate id; the last prediction is used", sid, "id")
            )
        text = value if isinstance(value, str) else None
        preds[sid] = Prediction(
            sample_id=sid,
            run_index=0,
            model="file",
            prompt_style="",
            template_hash="",
            raw_output=text,
            answer_text=text,
            parse_status="ok" if text is not None else "no_answer",
        )
    return list(preds.values()), problems


def different_answers(
    rows: list[dict[str, Any]], by_id: dict[str, Sample], id_keys: tuple[str, ...] = ("id",)
) -> int:
    """Rows of an official-format file (whole items) whose ``answer`` differs from the loaded
    metadata's answer for the same id (compared after trimming spaces)."""
    n = 0
    for row in rows:
        s = by_id.get(str(row_id(row, id_keys)))
        if s is not None and s.answer is not None and isinstance(row.get("answer"), str):
            n += row["answer"].strip() != s.answer.strip()
    return n


def _other_known_key(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> tuple[str, int] | None:
    """(key, items holding it) when no row has ``keys`` but rows use another known key."""
    if not rows or any(k in row for row in rows for k in keys):
        return None
    counts = {k: sum(k in row for row in rows) for k in KNOWN_KEYS if k not in keys}
    best = max(counts, key=lambda k: counts[k], default=None)
    return (best, counts[best]) if best is not None and counts[best] else None


def score_file(
    bench: str, data: str, predictions: str, key: str | None = None, version: str | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """Load the metadata (``data``) with the benchmark's loader, match predictions by id,
    score -> (accuracy section, problems)."""
    from cafe.benchmarks import BENCHMARKS

    b = BENCHMARKS.get(bench)()
    match = None
    if version is None:
        version, match = version_from_predictions(b, data, predictions)
    loaded = b.load(data, version=version)
    section, problems = score_loaded(b, loaded, predictions, key)
    if match is not None:
        section["bench"]["chosen_by"] = match
    return section, [*loaded.problems, *problems]


def version_from_predictions(
    bench: Any, data: str, predictions: str | Path
) -> tuple[str | None, dict[str, Any] | None]:
    """For a folder holding several releases of the benchmark (MMAU original and v05.15.25,
    MMAR v1 and v2): the release the predictions match, by their ids and, where the rows carry
    them, their answers (official-format files hold the whole item). -> (version, how it was
    chosen); (None, None) for a single file or release. Raises CafeError when the predictions
    fit several releases equally, naming them and their counts."""
    from cafe.benchmarks.metadata import SPECS, find_metadata, sha256_file

    spec = SPECS.get(bench.name)
    if spec is None or Path(data).is_file():
        return None, None
    held = []
    for v, name in spec.file_names.items():
        if v == spec.answerless_version:
            continue
        try:
            f = find_metadata(data, spec, v)
        except InputError:
            return None, None
        if f.name == name or spec.known_sha256.get(sha256_file(f)) == v:
            held.append(v)
    if len(held) < 2:
        return None, None
    rows, _ = read_records(predictions)
    fit: dict[str, dict[str, int]] = {}
    for v in held:
        by_id = {s.id: s for s in bench.load(data, version=v).samples}
        unknown = different = 0
        for row in rows:
            s = by_id.get(str(row.get("id")))
            if s is None:
                unknown += 1
            elif isinstance(row.get("answer"), str) and s.answer is not None:
                different += row["answer"].strip() != s.answer.strip()
        fit[v] = {"unknown_ids": unknown, "different_answers": different}
    cost = {v: f["unknown_ids"] + f["different_answers"] for v, f in fit.items()}
    best = min(cost.values())
    winners = sorted(v for v in held if cost[v] == best)
    said = "; ".join(
        f"{v}: {f['unknown_ids']} unknown ids, {f['different_answers']} different answers"
        for v, f in fit.items()
    )
    if len(winners) > 1:
        raise CafeError(
            f"{data} holds {bench.name} {' and '.join(winners)} and {predictions} fits "
            f"{' and '.join(winners)} equally ({said}): pass --version "
            f"{' or --version '.join(winners)}"
        )
    return winners[0], {"rule": "the release the predictions' ids and answers match", "fit": fit}


def score_loaded(
    bench: Any, loaded: Any, predictions: str | Path, key: str | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """score_file for an already loaded benchmark (a Benchmark and its LoadedBenchmark)."""
    from cafe.parsing import extract_answer

    own = bench.read_official_file(Path(predictions), loaded.samples)
    if own is not None:  # the benchmark's own layout (SAKURA's per-track results JSON)
        rows, problems, judged = own.rows, list(own.problems), own.judged
    else:  # a JSON list / JSONL / parquet of items
        (rows, problems), judged = read_records(predictions), {}
    id_keys = bench.prediction_id_keys
    preds, problems = predictions_from_rows(rows, predictions, bench.prediction_keys, key,
                                            id_keys, problems)  # fmt: skip
    by_id = {s.id: s for s in loaded.samples}
    if preds and not any(p.sample_id in by_id for p in preds):  # never 0/N with exit 0
        raise CafeError(
            f"{predictions}: no row's {' / '.join(id_keys)} matches a {bench.name} "
            f"{loaded.version} item of {loaded.source} ({len(preds)} row(s); first "
            f"{preds[0].sample_id!r}): the file is another benchmark's or release's, or keys "
            "its items elsewhere"
        )
    for p in preds:
        s = by_id.get(p.sample_id)
        if s is None:
            problems.append(
                Problem(str(predictions), "id not in the metadata; ignored", p.sample_id, "id")
            )
            continue
        # the lenient figure beside the headline: the prediction mapped to a choice first
        p.answer, p.parse_status = extract_answer(p.answer_text, s.choices)
        if s.answer is not None:
            p.correct = bench.is_correct(p.answer_text, s.answer, s.choices)
    section = bench_accuracy(bench, loaded.samples, preds)
    official = bench.official_section(
        loaded.samples,
        preds,
        file_rows=response_rows(rows, bench.prediction_keys, key, id_keys),
        file_records=rows,  # whole rows, for a script that scores each from its own fields
        file_path=predictions,  # for a script that reads the file itself, line by line
        file_keys=(key,) if key else tuple(bench.prediction_keys),
        **judged,
    )
    if official is not None:  # the benchmark's official figure, where the headline is not it
        section["official"] = official
    section["bench"] = {
        "name": bench.name,
        "version": loaded.version,
        "sha256": loaded.sha256,
        "source": loaded.source,
    }
    section["predictions_file"] = str(predictions)
    differ = different_answers(rows, by_id, id_keys)
    if differ:  # the file's items are not this release's: say so once, with the count
        problems.append(
            Problem(
                str(predictions),
                f"{differ} item(s) carry an answer different from {bench.name} "
                f"{loaded.version}'s: the predictions may be for another release (--version)",
            )
        )
    section["different_answers"] = differ
    # null / non-string predictions (MMAU's, MMAR's and AIR-Bench's scripts crash on them,
    # MMSU's drops them: the official section reads them so): unanswered here, counted
    section["non_string_predictions"] = sum(p.raw_output is None for p in preds)
    return section, problems


def _pct(v: float | None, width: int) -> str:
    """A percentage as the table prints it; no figure (nothing to divide by) as "–"."""
    return f"{'–':>{width}}" if v is None else f"{v:{width}.2f}"


def format_table(section: dict[str, Any]) -> str:
    """Human table: total (every item), the answered-only figure (the official denominator where
    the benchmark's official figure is this rule's), the lenient figure, then every breakdown
    value; each line says what its denominator is."""
    lines = []
    w = 44
    t = section["total"]
    # a row-by-row reading (string_match_rows) leaves the answered-only figure the official
    # scripts' denominator item by item; another official figure replaces it
    official_sec = section.get("official") or {}
    answered_is_official = not official_sec or official_sec.get("reading") == ROWS_READING
    lines.append(f"{'':{w}} {'acc %':>7} {'correct':>8} {'total':>6}")
    lines.append(f"{'total (every item)':{w}} {_pct(t['acc'], 7)} {t['correct']:8d} "
                 f"{t['total']:6d}")  # fmt: skip
    o = section["official_denominator"]
    name = "total, official denominator" if answered_is_official else "total, answered only"
    lines.append(f"{name:{w}} {_pct(o['acc'], 7)} {o['correct']:8d} {o['total']:6d}")
    skipped = "skipped by the official scripts" if answered_is_official else "left out above"
    lines.append(f"unanswered (wrong in the first line, {skipped}): {section['unanswered']}")
    lenient = section.get("lenient")
    if lenient:
        lt = lenient["total"]
        st = section.get("parse_status") or {}
        lines.append(
            f"{'lenient (choice-mapped; every item)':{w}} {_pct(lt['acc'], 7)} "
            f"{lt['correct']:8d} {lt['total']:6d}"
        )
        lines.append(f"  {lenient.get('label', '')}")
        lines.append("mapping: " + ", ".join(f"{k} {v}" for k, v in st.items() if v))
    official = section.get("official_breakdowns") or {}
    if official:
        lines.append("")
        lines.append(f"breakdowns: every item (unanswered count wrong) | "
                     f"{section['official_label']}")  # fmt: skip
    for name, cells in section["breakdowns"].items():
        lines.append("")
        head = f"by {name}"
        if name in official:
            head = f"{head:{w}} {'acc %':>7} {'correct':>8} {'total':>6} | "
            head += f"{'answered':>8} {'total':>6}"
        lines.append(head)
        for v, c in cells.items():
            label = v if len(v) <= w - 2 else v[: w - 5] + "..."
            row = f"  {label:{w - 2}} {_pct(c['acc'], 7)} {c['correct']:8d} {c['total']:6d}"
            o = official.get(name, {}).get(v)
            if o is not None:
                row += f" | {_pct(o['acc'], 8)} {o['total']:6d}"
            lines.append(row)
    return "\n".join(lines)
