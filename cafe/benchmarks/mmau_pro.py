"""MMAU-Pro (sonalkum/MMAUPro; Hugging Face gamma-lab-umd/MMAU-Pro, test.parquet, audio in
data.zip): 5,305 items, 49 skills. Columns: id, audio_path (a LIST: some items have several
clips, all passed to the model in order), question, answer, choices (list), category, sub-cat,
length_type, perceptual_skills, reasoning_skills, transcription, task_classification,
task_identifier, kwargs. ``--data``: test.parquet, its folder (data.zip extracted there) or a
JSON / JSONL file of such rows; clip paths are relative to it.

The official rule has three paths, each its own model or check (metrics.json "official"):
closed questions (every category but open and instruction following, rows with more than one
choice; others dropped): an embedding model matches the raw output to the nearest choice
(cosine), right when it is the answer; open questions: an LLM judge scores 1-5 on four criteria
(a missing score is 3.0), the category score is the mean / 5; instruction following: a check per
task_identifier, a success rate. Overall: the category scores weighted by their item counts.
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


def path_of(sample: Sample) -> str:
    """Which official path scores an item (from its category, and its choices)."""
    cat = re.sub(r"[\s_-]+", " ", str(sample.meta.get("category") or "")).strip().lower()
    if "instruction" in cat:
        return INSTRUCTION
    if cat.startswith("open"):
        return OPEN
    return CLOSED if len(sample.choices) > 1 else DROPPED


def read_scores(text: str | None) -> float | None:
    """The mean of the four criterion scores (a missing one is 3.0, as the official script
    fills it); None when the reply gives none of them."""
    from cafe.clients.thinking import final_answer

    reply = final_answer(text) or ""
    found = {}
    for name in CRITERIA:
        m = re.search(rf"{name}\W*\s*([1-5])\b", reply, flags=re.I)
        if m:
            found[name] = float(m.group(1))
    if not found:
        return None
    return statistics.fmean(found.get(n, MISSING_SCORE) for n in CRITERIA)


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
        clips = [clips] if isinstance(clips, str) else list(clips or [])
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
        choices = [str(c) for c in (row.get("choices") or [])]
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            errors.append(("question", "missing field"))
            question = ""
        meta = {k: v for k, v in row.items() if k not in ("id", "question", "choices")}
        sample = Sample(sid, "mmau-pro", ver, question, choices, None, audio, meta)
        path_name = path_of(sample)
        meta["path"] = path_name
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
    export_format = ExportFormat("model_output", "audio_path")
    official_rule = (
        "closed: nearest choice by embedding cosine (nvidia/NV-Embed-v2); open: LLM judge 1-5 on "
        "four criteria (Qwen2.5-7B-Instruct), mean / 5; instruction following: checks per "
        "task_identifier; overall = category scores weighted by item counts"
    )
    licence = "CC BY-NC 4.0 (Hugging Face card, reportedly)"
    version_items = {"test": 5305}
    accuracy_label = (
        "option match on the closed questions (the answer mapped to a choice by its text or "
        "letter); NOT the official figure (an embedding model: see the 'official' section)"
    )
    official_embedder = OFFICIAL_EMBEDDER
    open_items = True

    @property
    def official_judge(self) -> Any:
        from cafe.judge.verdict import VerdictSpec

        return VerdictSpec(
            name="mmau-pro-open",
            template=Path(__file__).with_name("templates") / "mmau_pro_open.txt",
            model=OFFICIAL_OPEN_JUDGE,
            temperature=0.1,
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
        from cafe.benchmarks.instruction_checks import follows
        from cafe.benchmarks.official import run_ids

        by_key = {(p.sample_id, p.run_index): p for p in predictions}
        embedded = judged.get("embedded")
        verdicts = judged.get("verdicts")
        # category -> path, (item, run) pair scores (0..1), unchecked count
        cats: dict[str, dict[str, Any]] = defaultdict(lambda: {"scores": [], "unchecked": 0})
        dropped = defaulted = 0
        for s in samples:
            path = path_of(s)
            if s.error is not None and path == CLOSED and s.answer is None:
                continue  # no answer to match (reported as bad input)
            if path == DROPPED:
                dropped += 1
                continue
            cell = cats[str(s.meta.get("category"))]
            cell["path"] = path
            for r in run_ids(predictions, runs):
                p: Prediction | None = by_key.get((s.id, r))
                out = p.raw_output if p is not None and p.error is None else None
                if path == CLOSED:
                    if embedded is None:
                        continue
                    e = embedded.get((s.id, r))
                    cell["scores"].append(float(e is not None and e["choice"] == s.answer))
                elif path == OPEN:
                    if verdicts is None:
                        continue
                    v = verdicts.get((s.id, r))
                    value = v.value if v is not None and v.status == "ok" else None
                    defaulted += value is None
                    cell["scores"].append((MISSING_SCORE if value is None else value) / 5)
                else:
                    ok = follows(out, s.meta.get("task_identifier"), s.meta.get("kwargs"))
                    if ok is None:
                        cell["unchecked"] += 1
                    else:
                        cell["scores"].append(float(ok))
        missing = {
            CLOSED: None if embedded is not None else
            f"embedding model not run (`cafe judge-official RUN --embedder NAME`; the "
            f"official one is {OFFICIAL_EMBEDDER})",
            OPEN: None if verdicts is not None else
            f"open-question judge not run (`cafe judge-official RUN --judge KIND`; the official "
            f"one is {OFFICIAL_OPEN_JUDGE})",
        }  # fmt: skip
        categories: dict[str, Any] = {}
        for name in sorted(cats):
            c = cats[name]
            why = missing.get(c["path"])
            if why is None and c["unchecked"]:
                why = f"{c['unchecked']} responses with an instruction cafe cannot check"
            if why is not None or not c["scores"]:
                categories[name] = {"path": c["path"], **_absent(why or "no scored items")}
                continue
            categories[name] = {"path": c["path"], "n": len(c["scores"]),
                                "score": round(100 * statistics.fmean(c["scores"]), 2)}  # fmt: skip
        scored = [c for c in categories.values() if c["score"] is not None]
        complete = bool(categories) and len(scored) == len(categories)
        overall = (
            round(sum(c["score"] * c["n"] for c in scored) / sum(c["n"] for c in scored), 2)
            if complete
            else None
        )
        absent = sorted({c["label"] for c in categories.values() if c["score"] is None})
        embedder = judged.get("embedder")
        label = "official: count-weighted overall of the category scores"
        if embedder and embedder != OFFICIAL_EMBEDDER:
            label += f" (closed path through {embedder}, not the official {OFFICIAL_EMBEDDER})"
        if judged.get("judge"):
            label += f"; open path judged by {judged['judge']}"
        headline = {
            "label": label if complete else "absent: " + "; ".join(absent),
            "total": {"acc": overall, "items": sum(c["n"] for c in scored)} if complete else None,
            "categories": categories,
            "dropped": dropped,
            "open_scores_defaulted": defaulted,
        }
        return {"rule": self.official_rule, "headline": headline, "variants": {}}
