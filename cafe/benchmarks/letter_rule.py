"""What MMSU and AIR-Bench foundation share: rows with choice_a..choice_d and answer_gt (the option
TEXT), and the official letter rule of their scripts.

The rule: the response stripped and its newlines removed; the letter is its first character if
that is A-D, else its second-to-last ("The answer is A."); a reply with neither is a format
failure, DROPPED from the official denominator; an empty reply or "None" is wrong (kept). The
reply is right when the chosen letter's option text equals answer_gt. Beside the official
figure, labelled: the same figure with the format failures counted wrong (the accuracy section's
headline), and the option match (the answer mapped to an option by its text or its letter, as
cafe's text-answer prompt styles ask for)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, LoadedBenchmark
from cafe.records import InputError, Prediction, Problem, Sample

LETTERS = "ABCD"
CHOICE_FIELDS = ("choice_a", "choice_b", "choice_c", "choice_d")

OFFICIAL_LABEL = (
    "official letter rule (first character, else second-to-last, A-D); format failures dropped "
    "from the denominator, as the official script drops them"
)
COUNTED_LABEL = (
    "the official letter rule with format failures counted wrong (not the official figure: "
    "the official script drops them)"
)
MATCH_LABEL = (
    "option match: the answer mapped to an option by its text or letter (cafe's text-answer "
    "prompt styles); not the official figure"
)


def letter_of(response: str | None) -> str | None:
    """The official script's letter: "" for an empty or "None" reply (wrong), the letter A-D,
    or None for a format failure (dropped)."""
    if response is None:
        return ""
    text = response.strip().replace("\n", "")
    if not text or text == "None":
        return ""
    if text[0] in LETTERS:
        return text[0]
    if len(text) >= 2 and text[-2] in LETTERS:
        return text[-2]
    return None


def letter_verdict(response: str | None, answer: str, choices: list[str]) -> bool | None:
    """True / False under the official rule, None for a format failure."""
    letter = letter_of(response)
    if letter is None:
        return None
    idx = LETTERS.find(letter) if letter else -1
    return 0 <= idx < len(choices) and choices[idx] == answer


@dataclass(frozen=True)
class RowSpec:
    """One benchmark's row layout."""

    bench: str
    id_field: str  # id (MMSU) / uniq_id (AIR-Bench)
    audio_fields: tuple[str, ...]  # where a row names its clip, first present wins
    meta_fields: tuple[str, ...]  # kept in Sample.meta (breakdowns read them)
    file_names: tuple[str, ...]  # the metadata file's usual names in a folder
    known_sha256: dict[str, str]  # file sha256 -> version
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
    if audio_root is not None:
        base = Path(audio_root).expanduser()
    detected = spec.known_sha256.get(sha or "")
    if detected is None and not version:
        problems.append(Problem(str(source), "unknown file hash: version recorded as 'unknown' "
                                "(pass --version to name it)"))  # fmt: skip
    ver = version or detected or "unknown"
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


def letter_rule_section(
    bench: Any,
    samples: list[Sample],
    predictions: list[Prediction],
    runs: int | None,
    averages: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The "official" section of a letter-rule benchmark: the official figure (format failures
    dropped) as the headline; beside it, labelled, the same with them counted wrong and the
    option match."""
    from cafe.benchmarks.official import answered, tally
    from cafe.parsing import extract_answer

    breakdowns = dict(bench.breakdowns)

    def official(s: Sample, p: Prediction | None) -> bool | None:
        if p is None or p.error is not None:
            return False  # no reply: wrong, as an empty one
        return letter_verdict(answered(p), s.answer or "", s.choices)

    def counted(s: Sample, p: Prediction | None) -> bool:
        return bool(official(s, p))

    def matched(s: Sample, p: Prediction | None) -> bool:
        choice, status = extract_answer(answered(p), s.choices)
        return status == "ok" and choice == s.answer

    figures = {
        "headline": {
            "label": OFFICIAL_LABEL,
            **tally(samples, predictions, official, breakdowns, runs),
        },  # fmt: skip
        "counted_wrong": {
            "label": COUNTED_LABEL,
            **tally(samples, predictions, counted, breakdowns, runs),
        },  # fmt: skip
        "option_match": {
            "label": MATCH_LABEL,
            **tally(samples, predictions, matched, breakdowns, runs),
        },  # fmt: skip
    }
    if averages is not None:
        for fig in figures.values():
            fig["average"] = averages(fig["breakdowns"])
    headline = figures.pop("headline")
    headline["format_failures"] = headline["dropped"]
    return {"rule": bench.official_rule, "headline": headline, "variants": figures}


class LetterRuleBenchmark(Benchmark):
    """A benchmark of lettered MCQ rows scored by the letter rule (MMSU, AIR-Bench): its rows'
    layout (``row_spec``) and the averages its official table prints (``averages``) are all
    that differ."""

    row_spec: RowSpec
    averages: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            from cafe.benchmarks.metadata import default_data

            data = str(default_data(self.name))
        return load_rows(self.row_spec, data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        return bool(letter_verdict(prediction, answer, choices))

    def official_section(
        self, samples: list[Any], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        averages = type(self).averages  # a plain function, not a method
        return letter_rule_section(self, samples, predictions, runs, averages)
