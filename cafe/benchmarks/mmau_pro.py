"""MMAU-Pro (sonalkum/MMAUPro; Hugging Face gamma-lab-umd/MMAU-Pro, test.parquet, audio in
data.zip): 5,305 items, 49 skills. Columns: id, audio_path (a LIST: some items have several
clips, all passed to the model in order), question, answer, choices (list), category, sub-cat,
length_type, perceptual_skills, reasoning_skills, transcription, task_classification,
task_identifier, kwargs. ``--data``: test.parquet, its folder (data.zip extracted there) or a
JSON / JSONL file of such rows; clip paths are relative to it.

The official rule has three paths, each its own model or check (metrics.json "official"):
closed questions (every category but open and instruction following, compared exactly; rows
with more than one choice; others dropped): an embedding model matches the raw output to the
nearest choice (cosine), right when it is the answer; open questions: an LLM judge scores four
criteria and an OVERALL, read as the official script reads them (official_overall), the
category score is the mean / 5; instruction following: the check of each readable
task_identifier (cafe.benchmarks.instruction_checks), a success rate. Overall: the category
scores weighted by their item counts.
The paths that need a model run with `cafe judge-official RUN --embedder NAME` and `--judge
KIND`; until then their figures, and the overall, are absent (never replaced by another rule)."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, by_meta
from cafe.records import InputError, Prediction, Problem, Sample

CLOSED, OPEN, INSTRUCTION, DROPPED = "closed", "open", "instruction_following", "dropped"
CRITERIA = ("correctness", "relevance", "completeness", "clarity")
MISSING_SCORE = 3.0  # the official script's value for a score the judge did not give
OFFICIAL_EMBEDDER = "nvidia/NV-Embed-v2"
OFFICIAL_OPEN_JUDGE = "Qwen/Qwen2.5-7B-Instruct"


#: the official category names of the two paths that are not closed questions (compared exactly)
OPEN_CATEGORY, INSTRUCTION_CATEGORY = "open", "instruction following"
#: the official script's reading of the judge's scores (extract_scores_from_evaluation): any
#: case, an integer per criterion (even above 5), OVERALL a decimal; the first match of each
SCORE_PATTERNS = {
    **{name: re.compile(rf"{name.upper()}:\s*(\d+)", re.I) for name in CRITERIA},
    "overall": re.compile(r"OVERALL:\s*(\d+(?:\.\d+)?)", re.I),
}
#: the system message the open-question judge gets (ours; the official script sends its own)
JUDGE_SYSTEM = "You grade answers to questions about audio carefully and without bias."


#: official path -> the prompt form its items get (closed items: the style's main text)
PROMPT_FORMS = {OPEN: "open", DROPPED: "open", INSTRUCTION: "instruction"}


def path_of(sample: Sample) -> str:
    """Which official path scores an item: its category compared exactly, as the official
    script does, then its choices (a closed item needs more than one)."""
    cat = sample.meta.get("category")
    if cat == INSTRUCTION_CATEGORY:
        return INSTRUCTION
    if cat == OPEN_CATEGORY:
        return OPEN
    return CLOSED if len(sample.choices) > 1 else DROPPED


def judge_scores(text: str | None, final_only: bool = False) -> dict[str, float | None]:
    """Each criterion and OVERALL as the reply gives it (None: not found): the first match in
    the reply as it came, thinking and all, as the official script reads it; ``final_only``
    reads the final answer only (the friendlier reading, beside it)."""
    from cafe.clients.thinking import final_answer

    reply = final_answer(text) if final_only else (text or "")
    found = {name: pattern.search(reply) for name, pattern in SCORE_PATTERNS.items()}
    return {name: float(m.group(1)) if m else None for name, m in found.items()}


def official_overall(text: str | None, final_only: bool = False) -> float:
    """The open question's score as the official script computes it: a missing field is 3.0
    (MISSING_SCORE); the judge's OVERALL is used unless it is missing or exactly 3.0, then the
    mean of the four criteria. No range check: a 7 stays 7. Read as judge_scores reads it."""
    scores = judge_scores(text, final_only)
    got = {k: (MISSING_SCORE if v is None else v) for k, v in scores.items()}
    if got["overall"] == MISSING_SCORE:
        return statistics.fmean(got[n] for n in CRITERIA)
    return got["overall"]


def read_scores(text: str | None) -> float:
    """The judge reader: the official overall (never None: a reply without scores is 3.0)."""
    return official_overall(text)


def _rows(data: Path) -> tuple[list[Any], Path, str | None, list[Problem], tuple[Path, ...]]:
    from cafe.benchmarks import hf_copy
    from cafe.benchmarks.metadata import read_rows, sha256_file

    if not data.exists():
        raise InputError(Problem(str(data), "mmau-pro data not found"))
    if hf_copy.is_hf_copy(data):
        rows, base, _ = hf_copy.load_rows(data, "audio_path")
        files = [data] if data.is_file() else sorted(data.glob("*.parquet"))
        sha = sha256_file(files[0]) if len(files) == 1 else None
        return list(enumerate(rows, 1)), base, sha, [], (hf_copy.audio_dir(data),)
    path = data
    if data.is_dir():
        found = sorted([*data.glob("*.json"), *data.glob("*.jsonl")])
        if len(found) != 1:
            raise InputError(Problem(str(data), "no MMAU-Pro test.parquet or single JSON / JSONL "
                                     "metadata file in this folder"))  # fmt: skip
        path = found[0]
    rows, problems = read_rows(path)
    return rows, path.parent, sha256_file(path), problems, ()


def load(data: str | Path, version: str | None, audio_root: str | None) -> LoadedBenchmark:
    from cafe.audio import contained_audio

    source = Path(data).expanduser()
    rows, base, sha, problems, extra = _rows(source)
    from cafe.benchmarks.metadata import check_signature

    check_signature("mmau-pro", [r for _, r in rows], str(source))
    if audio_root is not None:
        base = Path(audio_root).expanduser()
    if not version:  # no release hash is known: the file's content fingerprint tells them apart
        from cafe.benchmarks.metadata import fingerprint_version, unknown_release

        version = fingerprint_version([r for _, r in rows], ("audio_path", "audio"))
        problems.append(unknown_release(str(source), version))
    ver = version
    samples: list[Sample] = []
    seen: set[str] = set()
    for pos, row in rows:
        if not isinstance(row, dict) or row.get("id") in (None, ""):
            problems.append(Problem(str(source), f"item {pos} has no id", field="id"))
            continue
        sid = str(row["id"])
        errors: list[tuple[str, str]] = []
        if sid in seen:
            sid = f"{sid}#dup{pos}"
            errors.append(("id", f"duplicate id (item {pos}); recorded as {sid}"))
        seen.add(sid)
        clips = row.get("audio_path")
        clips = [clips] if isinstance(clips, str) else clips or []
        if not isinstance(clips, list) or not all(isinstance(c, str) for c in clips):
            problems.append(Problem(str(source), f"item {pos}: not a path or a list of paths "
                                    f"({type(row.get('audio_path')).__name__}); item left out",
                                    sid, "audio_path"))  # fmt: skip
            continue
        audio: list[str] = []
        for clip in clips:
            path, outside = contained_audio(str(clip), [base, *extra], file=str(source),
                                            sample_id=sid, field="audio_path")  # fmt: skip
            if outside is not None:
                errors.append(("audio_path", outside.message))
            else:
                audio.append(str(path))
        if not clips:
            errors.append(("audio_path", "no clip"))
        given = row.get("choices")
        if given is not None and not isinstance(given, list):  # an int where a list belongs
            errors.append(("choices", f"not a list ({type(given).__name__})"))
            given = None
        choices = [str(c) for c in (given or [])]
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            errors.append(("question", "missing field"))
            question = ""
        meta = {k: v for k, v in row.items() if k not in ("id", "question", "choices")}
        sample = Sample(sid, "mmau-pro", ver, question, choices, None, audio, meta)
        path_name = path_of(sample)
        meta["path"] = path_name
        if path_name in PROMPT_FORMS:  # the prompt style's form for this item (cafe.prompts)
            meta["prompt_form"] = PROMPT_FORMS[path_name]
        answer = row.get("answer")
        if path_name == CLOSED:
            # only closed items have an answer cafe's accuracy can match: the others are scored
            # by their own path (the reference answer stays in meta["answer"])
            if not isinstance(answer, str) or answer not in choices:
                errors.append(("answer", "missing field" if answer is None
                               else "answer is not among the choices"))  # fmt: skip
            sample.answer = answer if isinstance(answer, str) else None
        for f, m in errors:
            problems.append(Problem(str(source), m, sid, f))
        sample.error = "; ".join(f"{f}: {m}" for f, m in errors) or None
        samples.append(sample)
    return LoadedBenchmark(samples, ver, str(source), sha, problems)


def _absent(why: str) -> dict[str, Any]:
    return {"score": None, "label": why}


class MMAUPro(Benchmark):
    """MMAU-Pro: official paths per category (closed / open / instruction following), the
    count-weighted overall; breakdowns category, sub-cat, length_type, path."""

    name = "mmau-pro"
    breakdowns = by_meta("category", "sub-cat", "length_type", "path")
    signature = ("audio_path", "question", "category")  # every row of test.parquet has these
    prediction_keys = ("model_output", "response", "prediction")
    # the official input: test.parquet with model_output (`cafe export --out X.parquet`), the
    # whole response, a null where there is none (the script reads it as "" or "None")
    export_format = ExportFormat("model_output", "audio_path", default_field="raw",
                                 unanswered=None, leave_out=("path", "prompt_form"))  # fmt: skip
    official_rule = (
        "closed (categories other than 'open' and 'instruction following', more than one "
        "choice): nearest choice by embedding cosine (nvidia/NV-Embed-v2), a null output "
        "embedded as ''; open: LLM judge (Qwen2.5-7B-Instruct, temperature 0.1) scores four "
        "criteria and OVERALL, its OVERALL (the mean of the four when missing or 3.0; a missing "
        "field 3.0) / 5, a null output judged as ''; instruction following: the check of each "
        "readable task_identifier with its kwargs, unknown ones fail, a null output read as "
        "'None'; overall = category scores weighted by item counts"
    )
    licence = "CC BY-NC 4.0 (Hugging Face card, reportedly)"
    version_items = {"test": 5305}
    default_prompt_style = "mmau-pro"  # per category: choices, free text, the instruction
    accuracy_label = (
        "option match on the closed questions (the answer mapped to a choice by its text or "
        "letter); NOT the official figure (an embedding model: see the 'official' section)"
    )
    official_embedder = OFFICIAL_EMBEDDER
    open_items = True

    @property
    def official_judge(self) -> Any:
        from cafe.benchmarks.official_judge import VerdictSpec

        # the official request: sampled at temperature 0.1, up to 512 new tokens; a missing
        # output is judged as "" (the script fills nulls with "")
        return VerdictSpec(
            name="mmau-pro-open",
            template=Path(__file__).with_name("templates") / "mmau_pro_open.txt",
            model=OFFICIAL_OPEN_JUDGE,
            temperature=0.1,
            max_tokens=512,
            system=JUDGE_SYSTEM,
            null_output="",
            fields=lambda s: {"question": s.question, "answer": str(s.meta.get("answer") or "")},
            reader=read_scores,
            applies=lambda s: path_of(s) == OPEN,
        )

    def embedding_applies(self, sample: Sample) -> bool:
        return path_of(sample) == CLOSED

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            from cafe.benchmarks.metadata import default_data

            data = str(default_data("mmau-pro"))
        return load(data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        from cafe.parsing import extract_answer

        choice, status = extract_answer(prediction, list(choices))
        return status == "ok" and choice == answer

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        cats, counts = _path_scores(samples, predictions, runs, judged)
        headline = self._figure(cats, counts, judged)
        variants: dict[str, Any] = {}
        if counts["thinking_first"]:  # the friendlier reading of those replies, beside it
            final = self._figure(_path_scores(samples, predictions, runs, judged, True)[0],
                                 counts, judged)  # fmt: skip
            final["label"] = ("final answer: open replies' scores read after their thinking; NOT "
                              "the official figure (the script reads the first match)")  # fmt: skip
            variants["final_answer"] = final
        return {"rule": self.official_rule, "headline": headline, "variants": variants}

    def _figure(
        self, cats: dict[str, dict[str, Any]], counts: dict[str, Any], judged: dict[str, Any]
    ) -> dict[str, Any]:
        """The count-weighted overall of the category scores, with what is counted beside it."""
        from cafe.benchmarks.sentences import sentence_splitter

        categories = _category_figures(cats, judged)
        scored = [c for c in categories.values() if c["score"] is not None]
        complete = bool(categories) and len(scored) == len(categories)
        # weighted over the unrounded category scores, as the script weights them
        pairs = [x for c in cats.values() for x in c["scores"]]
        overall = round(100 * statistics.fmean(pairs), 2) if complete and pairs else None
        absent = sorted({c["label"] for c in categories.values() if c["score"] is None})
        embedder = judged.get("embedder")
        label = "official: count-weighted overall of the category scores"
        if embedder and embedder != OFFICIAL_EMBEDDER:
            label += f" (closed path through {embedder}, not the official {OFFICIAL_EMBEDDER})"
        if judged.get("judge"):
            label += f"; open path judged by {judged['judge']}"
        if counts["crashed"]:
            label += f"; {len(counts['crashed'])} instruction items kept out (the official "
            label += "script crashes on them)"
        headline = {
            "label": label if complete else "absent: " + "; ".join(absent),
            "total": {"acc": overall, "items": sum(c["n"] for c in scored)} if complete else None,
            "categories": categories,
            "dropped": counts["dropped"],
            "open_replies_with_defaults": counts["defaulted"],
            "null_outputs": counts["null"],
            "unknown_identifiers": counts["unknown"],
            "crashed_items": sorted({k for k, _ in counts["crashed"]}),
            "sentence_counts": sentence_splitter(),
            "open_replies_scored_in_thinking": counts["thinking_first"],
        }
        return headline


def _path_scores(
    samples: list[Sample],
    predictions: list[Any],
    runs: int | None,
    judged: dict[str, Any],
    final_only: bool = False,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per official category, each (item, run) pair's score (0..1) as the official script
    gives it; and the counts said beside the figure. A missing output is what the script reads
    for a null: "" for the embedding and the judge, the text "None" for the checks."""
    from cafe.benchmarks.instruction_checks import CHECKS, CheckCrash, follows
    from cafe.benchmarks.official import run_ids

    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    embedded, verdicts = judged.get("embedded"), judged.get("verdicts")
    cats: dict[str, dict[str, Any]] = defaultdict(lambda: {"scores": [], "failed": 0})
    counts: dict[str, Any] = {"dropped": 0, "defaulted": 0, "null": 0, "unknown": 0,
                              "crashed": [], "thinking_first": 0}  # fmt: skip
    for s in samples:
        path = path_of(s)
        if s.error is not None and path == CLOSED and s.answer is None:
            continue  # no answer to match (reported as bad input)
        if path == DROPPED:
            counts["dropped"] += 1
            continue
        cell = cats[str(s.meta.get("category"))]
        cell["path"] = path
        for r in run_ids(predictions, runs):
            p: Prediction | None = by_key.get((s.id, r))
            out = p.raw_output if p is not None and p.error is None else None
            counts["null"] += out is None
            if path == CLOSED and embedded is not None:
                e = embedded.get((s.id, r))
                cell["scores"].append(float(e is not None and e["choice"] == s.answer))
            elif path == OPEN and verdicts is not None:
                v = verdicts.get((s.id, r))
                if v is None or v.status != "ok":
                    cell["failed"] += 1  # no reply to read: the figure waits for one
                    continue
                found = judge_scores(v.raw, final_only)
                counts["defaulted"] += any(x is None for x in found.values())
                score = official_overall(v.raw, final_only)
                counts["thinking_first"] += score != official_overall(v.raw, not final_only)
                cell["scores"].append(score / 5)
            elif path == INSTRUCTION:
                ident = s.meta.get("task_identifier")
                counts["unknown"] += str(ident) not in CHECKS
                try:
                    ok = follows(out, ident, s.meta.get("kwargs"), s.question)
                except CheckCrash:
                    counts["crashed"].append((s.id, r))
                    continue
                cell["scores"].append(float(ok))
    return cats, counts


def _category_figures(cats: dict[str, dict[str, Any]], judged: dict[str, Any]) -> dict[str, Any]:
    """Each category's score (percent) and pairs, or absent with the reason."""
    missing = {
        CLOSED: None if judged.get("embedded") is not None else
        f"embedding model not run (`cafe judge-official RUN --embedder NAME`; the "
        f"official one is {OFFICIAL_EMBEDDER})",
        OPEN: None if judged.get("verdicts") is not None else
        f"open-question judge not run (`cafe judge-official RUN --judge KIND`; the official "
        f"one is {OFFICIAL_OPEN_JUDGE})",
    }  # fmt: skip
    out: dict[str, Any] = {}
    for name in sorted(cats):
        c = cats[name]
        why = missing.get(c["path"])
        if why is None and c["failed"]:
            why = (f"{c['failed']} open answers without a judge verdict (run `cafe "
                   "judge-official` again)")  # fmt: skip
        if why is not None or not c["scores"]:
            out[name] = {"path": c["path"], **_absent(why or "no scored items")}
            continue
        out[name] = {"path": c["path"], "n": len(c["scores"]),
                     "score": round(100 * statistics.fmean(c["scores"]), 2)}  # fmt: skip
    return out
