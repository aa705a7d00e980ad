"""What MMSU and AIR-Bench foundation share: rows with choice_a..choice_d and answer_gt (the option
TEXT), and the letter rule of their official scripts, read from the scripts themselves
(dingdongwang/MMSU mmsu_evaluation.py at 217d1d3; OFA-Sys/AIR-Bench score_foundation.py at
9832476).

Both read a letter the same way: the reply stripped and its newlines removed; its first character
if that is A-D, else its second-to-last ("The answer is A."); a reply with neither is a format
failure, left out of every denominator. Where they differ (``LetterRule``, declared by each
benchmark): an empty or "None" reply is wrong (MMSU) or left out (AIR-Bench); a null or non-string
reply is silently dropped (MMSU) or stops the script (AIR-Bench, as does a row without the
response key, which MMSU reads as ""); the right letter is any whose option text equals answer_gt
(MMSU) or the first such letter, the script stopping when there is none (AIR-Bench). Where the
official script would stop, cafe names the items and keeps them out of the official figure, with
their count beside it.

The official figure is the script's on the file it reads: `cafe score`'s file (its rows, in order,
duplicates twice; items absent from it in no denominator), or for a run the file `cafe export`
writes (every item; a failed or unanswered one with an empty reply). Beside it, labelled: every
item counted, anything not right wrong (the accuracy section's headline), and the option match
(the reply mapped to an option by its letter or text, right when that option's text is
answer_gt)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, LoadedBenchmark
from cafe.benchmarks.letters import CHOICE_FIELDS, LETTERS, MISSING, LetterRule, letter_of
from cafe.records import InputError, Prediction, Problem, Sample

OFFICIAL_LABEL = (
    "official letter rule (first character, else second-to-last, A-D) as the official script "
    "reads its file: denominator = the replies it scores (format failures{excluded} left out; "
    "items absent from the file in no denominator)"
)
COUNTED_LABEL = (
    "every item of the metadata counted, any reply the official rule does not score right "
    "counted wrong (format failures, empty, absent, failed); not the official figure"
)
MATCH_LABEL = (
    "option match: the reply mapped to an option by its letter or its text, right when that "
    "option's text is answer_gt; denominator every item; not the official figure"
)

#: an outcome -> what it means (right / wrong count; the others are left out of the figure)
OUTCOMES = {
    "right": "right",
    "wrong": "wrong",
    "format_failure": "no letter read: left out, as the official script leaves it out",
    "empty": "empty or 'None' reply: left out, as the official script leaves it out",
    "non_string": "null or non-string reply: dropped, as the official script drops it",
    "stop_missing": "no response key: the official script stops here (KeyError)",
    "stop_non_string": "null or non-string reply: the official script stops here",
    "stop_no_gold": "answer_gt equals no option: the official script stops here (exit 1)",
}
EMPTY_CELL_STOP = "a row of the script's table with no scored reply: its summary stops (KeyError)"


def official_outcome(rule: LetterRule, reply: Any, answer: str, choices: list[str]) -> str:
    """One reply as the official script scores it: a key of OUTCOMES. ``reply``: the value
    under the response key, or MISSING."""
    if reply is MISSING:
        if rule.missing_stops:
            return "stop_missing"
        reply = ""
    if not isinstance(reply, str):
        return "stop_non_string" if rule.non_string_stops else "non_string"
    letter = letter_of(reply)
    if letter == "":
        return "empty" if rule.empty_excluded else "wrong"
    if letter is None:
        return "format_failure"
    if rule.first_gold:
        first = choices[:4]
        if answer not in first:
            return "stop_no_gold"
        return "right" if letter == LETTERS[first.index(answer)] else "wrong"
    idx = LETTERS.index(letter)
    return "right" if idx < len(choices) and choices[idx] == answer else "wrong"


@dataclass(frozen=True)
class RowSpec:
    """One benchmark's row layout."""

    bench: str
    id_field: str  # id (MMSU) / uniq_id (AIR-Bench)
    audio_fields: tuple[str, ...]  # where a row names its clip, first present wins
    meta_fields: tuple[str, ...]  # kept in Sample.meta (breakdowns read them)
    file_names: tuple[str, ...]  # the metadata file's usual names in a folder
    known_sha256: dict[str, str]  # file sha256 -> version (else: its content fingerprint)
    #: a row and the metadata folder -> clip paths to try, relative to that folder
    audio_candidates: Callable[[dict[str, Any], str], list[str]] = lambda row, rel: [rel]


Rows = tuple[list[tuple[int, Any]], Path, str | None, list[Problem], tuple[Path, ...]]


def _rows(spec: RowSpec, data: Path) -> Rows:
    """(rows, folder clips are relative to, sha256, problems, extra allowed audio roots)."""
    from cafe.benchmarks import hf_copy
    from cafe.benchmarks.metadata import read_rows, sha256_file

    if not data.exists():
        raise InputError(Problem(str(data), f"{spec.bench} data not found"))
    if hf_copy.is_hf_copy(data):
        rows, base, sha = hf_copy.load_rows(data, spec.audio_fields[0])
        return list(enumerate(rows, 1)), base, sha, [], (hf_copy.audio_dir(data),)
    path = data
    if data.is_dir():
        found = [data / n for n in spec.file_names if (data / n).is_file()]
        found = found or sorted([*data.glob("*.json"), *data.glob("*.jsonl")])
        if len(found) != 1 and not any(f.name in spec.file_names for f in found):
            raise InputError(Problem(str(data), f"no {spec.bench} metadata file "
                                     f"({', '.join(spec.file_names)}) in this folder"))  # fmt: skip
        path = found[0]
    rows, problems = read_rows(path)
    return rows, path.parent, sha256_file(path), problems, ()


def load_rows(
    spec: RowSpec, data: str | Path, version: str | None, audio_root: str | None = None
) -> LoadedBenchmark:
    """Rows -> Samples: choices are choice_a..d (empty and null ones left out, keeping letter
    order), answer is answer_gt; a bad row is a Problem and, when its id is known, a Sample with
    .error (never raised)."""
    from cafe.audio import contained_audio

    source = Path(data).expanduser()
    rows, base, sha, problems, extra = _rows(spec, source)
    from cafe.benchmarks.metadata import check_signature

    check_signature(spec.bench, [r for _, r in rows], str(source))
    if audio_root is not None:
        base = Path(audio_root).expanduser()
    from cafe.benchmarks.metadata import fingerprint_version, unknown_release

    detected = spec.known_sha256.get(sha or "")
    if detected is None and not version:
        detected = fingerprint_version([r for _, r in rows], spec.audio_fields)
        problems.append(unknown_release(str(source), detected))
    ver = version or detected
    samples: list[Sample] = []
    seen: set[str] = set()
    for pos, row in rows:
        if not isinstance(row, dict):
            problems.append(Problem(str(source), f"item {pos} is not a JSON object"))
            continue
        raw_id = row.get(spec.id_field)
        if raw_id is None or str(raw_id).strip() == "":
            problems.append(Problem(str(source), f"item {pos} has no {spec.id_field}",
                                    field=spec.id_field))  # fmt: skip
            continue
        sid = str(raw_id)
        errors: list[tuple[str, str]] = []
        if sid in seen:
            sid = f"{sid}#dup{pos}"
            errors.append((spec.id_field, f"duplicate id (item {pos}); recorded as {sid}"))
        seen.add(sid)
        given = [row.get(f) for f in CHOICE_FIELDS]
        # the letters stay the official ones: only trailing missing options are left out
        while given and (given[-1] is None or given[-1] == ""):
            given.pop()
        choices = ["" if c is None else str(c) for c in given]
        if len(choices) < 2:
            errors.append(("choice_a", "fewer than two options"))
        answer = row.get("answer_gt")
        if not isinstance(answer, str):
            errors.append(("answer_gt", "missing field" if answer is None else "not a string"))
            answer = None if answer is None else str(answer)
        elif answer not in choices:
            errors.append(("answer_gt", "answer is not among the choices"))
        question = row.get("question")
        if not isinstance(question, str):
            errors.append(("question", "missing field"))
            question = ""
        audio: list[str] = []
        rel = next((row[f] for f in spec.audio_fields if isinstance(row.get(f), str) and row[f]),
                   None)  # fmt: skip
        if rel is None:
            errors.append((spec.audio_fields[0], "missing field"))
        else:
            tries = spec.audio_candidates(row, rel)
            pick = next((t for t in tries if (base / t).exists()), tries[0])
            path, outside = contained_audio(pick, [base, *extra], file=str(source),
                                            sample_id=sid, field=spec.audio_fields[0])  # fmt: skip
            if outside is not None:
                errors.append((spec.audio_fields[0], outside.message))
            else:
                audio = [str(path)]
        for f in spec.meta_fields:
            if row.get(f) in (None, ""):
                errors.append((f, "missing field"))
        meta = {k: v for k, v in row.items() if k not in ("question", "audio")}
        for f, m in errors:
            problems.append(Problem(str(source), m, sid, f))
        samples.append(Sample(id=sid, bench=spec.bench, version=ver, question=question,
                              choices=choices, answer=answer, audio=audio, meta=meta,
                              error="; ".join(f"{f}: {m}" for f, m in errors) or None))  # fmt: skip
    return LoadedBenchmark(samples, ver, str(source), sha, problems)


#: the file's rows for `cafe score`, in order: (sample id, the value under the response key or
#: MISSING)
FileRows = list[tuple[str, Any]]


def _run_replies(
    samples: list[Sample], predictions: list[Prediction], runs: int | None
) -> list[tuple[Sample, Any]]:
    """A run's (item, run) pairs as `cafe export` writes them: every item, an empty reply where
    the prediction failed, is missing or has no answer text."""
    from cafe.benchmarks.official import answered, run_ids

    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    counted = run_ids(predictions, runs)
    return [(s, answered(by_key.get((s.id, r))) or "")
            for s in samples if s.answer is not None
            for r in counted]  # fmt: skip


def official_figure(
    bench: Any,
    pairs: list[tuple[Sample, Any]],
    breakdowns: dict[str, Callable[[Sample], Any]],
    stops: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The official script's figure over the replies it reads: right / wrong counted, the rest
    left out, by kind; those it would stop on named, with ``stops`` (where, why) found while
    reading its file."""
    from cafe.benchmarks.official import tally_pairs

    rule: LetterRule = bench.letter_rule
    outcomes = [(s, official_outcome(rule, v, "" if s.answer is None else s.answer, s.choices))
                for s, v in pairs]  # fmt: skip
    fig = tally_pairs([(s, {"right": True, "wrong": False}.get(o)) for s, o in outcomes],
                      breakdowns)  # fmt: skip
    kinds = Counter(o for _, o in outcomes if o not in ("right", "wrong"))
    left_out = {k: kinds[k] for k in ("format_failure", "empty", "non_string") if kinds[k]}
    kinds_stop = {k: kinds[k] for k in OUTCOMES if k.startswith("stop_") and kinds[k]}
    fig["dropped"] = sum(left_out.values())
    fig["format_failures"] = kinds["format_failure"]
    fig["left_out"] = left_out
    stopped_ids = [s.id for s, o in outcomes if o.startswith("stop_")]
    stopped_ids += [where for where, _ in stops or []]
    if rule.empty_cell_stops and pairs:  # a cell whose every reply was left out
        fn = breakdowns[rule.empty_cell_stops]
        scored = set(fig["breakdowns"].get(rule.empty_cell_stops) or {})
        empty = sorted({str(fn(s)) for s, _ in pairs} - scored)
        if empty:
            kinds_stop["stop_empty_cell"] = len(empty)
            fig["empty_cells"] = empty
    if not fig["total"]["total"]:  # 0 of 0 is no figure: say why
        why = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in left_out.items())
        fig["absent_reason"] = (
            f"no reply the official rule scores: {sum(left_out.values())} left out"
            f"{f' ({why})' if why else ''}"
            f"{f', {len(stopped_ids)} it would stop on' if stopped_ids else ''}"
        )
    fig["stopped"] = {
        "count": len(stopped_ids),
        "items": stopped_ids,
        "reasons": {
            **{OUTCOMES.get(k, EMPTY_CELL_STOP): n for k, n in kinds_stop.items()},
            **Counter(why for _, why in stops or []),
        },
        "label": "the official script would stop on these; left out of this figure",
    }
    return fig


def letter_rule_section(
    bench: Any,
    samples: list[Sample],
    predictions: list[Prediction],
    runs: int | None,
    averages: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    file_rows: FileRows | None = None,
    file_path: str | Path | None = None,
    file_keys: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The "official" section of a letter-rule benchmark: the official script's figure as the
    headline (over the file at ``file_path`` read as the script reads it, ``file_rows`` its rows
    with an id, when scoring a file; else over the run's export); beside it, labelled, every
    item counted with anything not right wrong, and the option match. Where the script would
    stop, the headline has no figure (the script prints none) and names the rows and reasons;
    the figure without them stands beside it, labelled."""
    from cafe.benchmarks.letter_rule_files import read_file
    from cafe.benchmarks.official import answered, tally, without_stops
    from cafe.parsing import extract_answer

    breakdowns = dict(bench.breakdowns)
    rule: LetterRule = bench.letter_rule
    cases: dict[str, int] = {}
    stops: list[tuple[str, str]] = []
    if file_rows is None or file_path is None:
        pairs, absent = _run_replies(samples, predictions, runs), 0
    else:
        reading = read_file(bench, file_path, samples, file_keys)
        pairs, stops, cases = reading.pairs, reading.stops, dict(reading.cases)
        present = {sid for sid, _ in file_rows}
        absent = sum(s.id not in present for s in samples if s.answer is not None)
    headline = {
        "label": OFFICIAL_LABEL.format(excluded=rule.excluded_text()),
        **official_figure(bench, pairs, breakdowns, stops),
        "absent": absent,
        **({"row_cases": cases} if cases else {}),
    }
    lenient = without_stops(headline)
    if file_rows is not None:
        ids = [sid for sid, _ in file_rows]
        headline["duplicate_rows"] = len(ids) - len(set(ids))

    def counted(s: Sample, p: Prediction | None) -> bool:
        reply = answered(p) or ""
        return official_outcome(rule, reply, s.answer or "", s.choices) == "right"

    def matched(s: Sample, p: Prediction | None) -> bool:
        choice, status = extract_answer(answered(p), s.choices)
        return status == "ok" and choice == s.answer

    variants = {
        **lenient,
        "counted_wrong": {"label": COUNTED_LABEL,
                          **tally(samples, predictions, counted, breakdowns, runs)},
        "option_match": {"label": MATCH_LABEL,
                         **tally(samples, predictions, matched, breakdowns, runs)},
    }  # fmt: skip
    if averages is not None:
        for fig in (headline, *variants.values()):
            fig["average"] = averages(fig["breakdowns"])
    return {"rule": bench.official_rule, "headline": headline, "variants": variants}


class LetterRuleBenchmark(Benchmark):
    """A benchmark of lettered MCQ rows scored by the letter rule (MMSU, AIR-Bench): its rows'
    layout (``row_spec``), its script's reading of a reply (``letter_rule``) and the averages
    its official table prints (``averages``) are all that differ."""

    row_spec: RowSpec
    letter_rule: LetterRule
    averages: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            from cafe.benchmarks.metadata import default_data

            data = str(default_data(self.name))
        return load_rows(self.row_spec, data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        reply = prediction or ""
        return official_outcome(self.letter_rule, reply, answer, choices) == "right"

    def choice_is_correct(self, choice: str | None, answer: str, choices: list[str]) -> bool:
        # the letter rule reads a letter: a mapped option is right when its text is the answer
        return choice is not None and choice == answer

    lenient_label = (
        "lenient (option match): the reply mapped to an option by its letter or its text, right "
        "when that option's text is answer_gt; denominator every item; not the official figure"
    )

    def official_section(
        self, samples: list[Any], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        averages = type(self).averages  # a plain function, not a method
        return letter_rule_section(self, samples, predictions, runs, averages,
                                   judged.get("file_rows"), judged.get("file_path"),
                                   judged.get("file_keys") or self.prediction_keys)  # fmt: skip
