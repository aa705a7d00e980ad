"""VoiceBench (MatthewCYM/VoiceBench @ 5338154, Apache-2.0; data Hugging Face hlt-lab/voicebench):
spoken instructions in subsets, each with its own evaluator (scorers.py): open answers rated 1-5
by a GPT judge (alpacaeval, alpacaeval_full, commoneval, wildvoice), reference QA judged yes / no
(sd-qa, one split per accent), multiple choice (openbookqa, mmsu in 12 domain splits), IFEval
(ifeval), four BIG-Bench Hard tasks (bbh), refusal (advbench). The leaderboard's Overall is the
mean of its nine columns, the GPT scores times 20.

``--data``: a folder with one folder per subset, each holding its splits as
``<split>.jsonl`` (rows with ``audio`` a path relative to it) or the hub's
``<split>-*.parquet``. An item's id is ``<subset>/<split>/<row>`` (row from 0, the dataset's
order). `cafe score --bench voicebench` reads the official results files
(``[result-]<model>-<subset>-<split>-<modality>.jsonl``: the dataset's fields, ``response``,
after the judge ``score``), one file or a folder of them; `cafe export` writes them; `cafe
judge-official RUN --judge KIND` asks the GPT judge (judge.py) for the open and QA subsets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, OfficialFile, by_meta
from cafe.records import InputError, Prediction, Problem, Sample

#: the seed of the random choice that replaces an unread multiple-choice / BBH reply (the
#: official draw is unseeded); recorded with every figure it moves
FALLBACK_SEED = 0
AUDIO_KEYS = ("audio",)
#: fields cafe adds to a row it reads or writes, left out of an exported official file
ADDED = ("_cafe_id", "subset", "split", "instruction")
_FILE = re.compile(
    r"^(?:result-)?(?P<model>.+)-(?P<subset>alpacaeval_full|alpacaeval|commoneval|wildvoice|sd-qa"
    r"|openbookqa|mmsu|ifeval|bbh|advbench|mtbench)-(?P<split>[^-]+)-(?P<modality>audio|text|ttft)"
    r"\.jsonl$"
)


def _split_files(folder: Path) -> list[tuple[str, str, Path]]:
    """(subset, split, file) for every split file under the data folder."""
    from cafe.benchmarks.voicebench.scorers import EVALUATORS

    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name in EVALUATORS):
        for f in sorted([*sub.glob("*.jsonl"), *sub.glob("*.parquet")]):
            out.append((sub.name, f.name.split("-")[0].removesuffix(".jsonl"), f))
    return out


def _rows_of(f: Path) -> tuple[list[tuple[int, Any]], Path, list[Problem]]:
    if f.suffix == ".parquet":
        from cafe.benchmarks import hf_copy

        rows, base, _ = hf_copy.load_rows(f, "audio")
        return list(enumerate(rows)), base, []
    from cafe.benchmarks.metadata import read_rows

    rows, problems = read_rows(f)
    return [(pos - 1, r) for pos, r in rows], f.parent, problems


def load(data: str | Path, version: str | None, audio_root: str | None) -> LoadedBenchmark:
    from cafe.audio import contained_audio
    from cafe.benchmarks.metadata import fingerprint_version

    source = Path(data).expanduser()
    if not source.is_dir():
        raise InputError(Problem(str(source), "voicebench data folder not found"))
    files = _split_files(source)
    if not files:
        raise InputError(Problem(str(source), "no <subset>/<split>.jsonl or .parquet file of a "
                                 "VoiceBench subset in this folder"))  # fmt: skip
    samples: list[Sample] = []
    problems: list[Problem] = []
    every: list[Any] = []
    for subset, split, f in files:
        rows, base, probs = _rows_of(f)
        problems += probs
        root = Path(audio_root).expanduser() if audio_root else base
        for pos, row in rows:
            sid = f"{subset}/{split}/{pos}"
            if not isinstance(row, dict):
                problems.append(Problem(str(f), "row is not an object; left out", sid))
                continue
            every.append(row)
            errors: list[tuple[str, str]] = []
            prompt = row.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                errors.append(("prompt", "missing field"))
                prompt = ""
            audio: list[str] = []
            clip = row.get("audio")
            path, outside = contained_audio(clip if isinstance(clip, str) else "", [root],
                                            file=str(f), sample_id=sid, field="audio")  # fmt: skip
            if outside is not None:
                errors.append(("audio", outside.message))
            else:
                audio.append(str(path))
            meta = {k: v for k, v in row.items() if k != "audio"}
            # the model hears the instruction only: no text beside it (prompt style voicebench)
            meta.update(subset=subset, split=split, instruction="")
            for field, msg in errors:
                problems.append(Problem(str(f), msg, sid, field))
            sample = Sample(sid, "voicebench", "", prompt, [], None, audio, meta)
            sample.error = "; ".join(f"{k}: {m}" for k, m in errors) or None
            samples.append(sample)
    ver = version or fingerprint_version(every, AUDIO_KEYS)
    for s in samples:
        s.version = ver
    return LoadedBenchmark(samples, ver, str(source), None, problems)


def file_rows(path: Path, samples: list[Sample]) -> OfficialFile:
    """Official results files (one, or a folder of them) as rows with cafe's item id under
    ``_cafe_id``: a row is its split's item with the same prompt (the first not taken yet); a
    row no item has is kept for the official figure (the script counts it) under an id no item
    has, and said."""
    files = [path] if path.is_file() else sorted(path.glob("*.jsonl"))
    by_prompt: dict[tuple[str, str, str], list[str]] = {}
    for s in samples:
        key = (s.meta["subset"], s.meta["split"], s.question)
        by_prompt.setdefault(key, []).append(s.id)
    rows: list[dict[str, Any]] = []
    problems: list[Problem] = []
    from cafe.benchmarks.metadata import read_rows

    for f in files:
        m = _FILE.match(f.name)
        if m is None:
            why = "not named <model>-<subset>-<split>-<modality>.jsonl as main.py names results"
            problems.append(Problem(str(f), why + "; left out"))
            continue
        subset, split = m["subset"], m["split"]
        read, probs = read_rows(f)
        problems += probs
        for pos, row in read:
            if not isinstance(row, dict):
                problems.append(Problem(str(f), f"line {pos} is not an object; left out"))
                continue
            free = by_prompt.get((subset, split, str(row.get("prompt"))), [])
            sid = free.pop(0) if free else f"{subset}/{split}/unknown-line{pos}"
            if sid.endswith(f"unknown-line{pos}"):
                problems.append(Problem(str(f), f"line {pos}: no {subset}/{split} item has this "
                                        "prompt, or it is there twice; counted as the official "
                                        "script counts it", sid, "prompt"))  # fmt: skip
            rows.append({**row, "_cafe_id": sid, "subset": subset, "split": split})
    return OfficialFile(rows, problems=problems)


def run_rows(
    samples: list[Sample], predictions: list[Prediction], runs: int | None, verdicts: Any
) -> tuple[list[dict[str, Any]], int]:
    """Result rows in the official layout from a run folder: one per answered (item, run), the
    judge's replies as ``score``; and the count of pairs without a response (left out)."""
    from cafe.benchmarks.official import run_ids

    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    rows: list[dict[str, Any]] = []
    unanswered = 0
    for s in samples:
        if s.error is not None:
            continue
        for r in run_ids(predictions, runs):
            p = by_key.get((s.id, r))
            if p is None or p.error is not None or p.raw_output is None:
                unanswered += 1
                continue
            row = {**s.meta, "prompt": s.question, "response": p.raw_output, "_cafe_id": s.id}
            v = (verdicts or {}).get((s.id, r))
            if v is not None and v.status == "ok":
                row["score"] = list(v.value)
            rows.append(row)
    return rows, unanswered


class VoiceBench(Benchmark):
    name = "voicebench"
    breakdowns = by_meta("subset", "split")
    prediction_keys = ("response",)
    prediction_id_keys = ("_cafe_id",)
    open_items = True
    signature = ("prompt",)
    default_prompt_style = "voicebench"
    export_format = ExportFormat("response", "audio", default_field="raw", leave_out=ADDED,
                                 writer=lambda rows, out: write_results(rows, out))  # fmt: skip
    official_rule = (
        "per subset its official evaluator: GPT score 1-5 (gpt-4o-mini, 3 samples, mean; "
        "alpacaeval / commoneval / wildvoice), reference QA (majority of 3 judge replies is "
        "'yes'; sd-qa), multiple choice and BBH (phrase readers; an unread reply replaced by a "
        f"random choice, seeded {FALLBACK_SEED}; also shown counted wrong), IFEval (mean of "
        "strict / loose, prompt / instruction level), refusal rate (advbench); Overall = mean "
        "of the nine leaderboard columns, GPT scores x20"
    )
    licence = "Apache-2.0 (code); data per subset's sources (Hugging Face hlt-lab/voicebench)"
    version_items = {"content-<hash>": None}  # no release hash: a content fingerprint
    accuracy_label = "no accuracy rule of its own: see the 'official' section"

    @property
    def official_judge(self) -> Any:
        from cafe.benchmarks.voicebench.judge import judge_spec

        return judge_spec()

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            raise InputError(Problem("voicebench", "pass --data: a folder of VoiceBench subsets "
                                     "(<subset>/<split>.jsonl or .parquet)"))  # fmt: skip
        return load(data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        return False

    def read_official_file(self, path: Path, samples: list[Sample]) -> OfficialFile | None:
        return file_rows(path, samples)

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        from cafe.benchmarks.voicebench.report import section

        records = judged.get("file_records")
        if records is not None:
            return section(records, FALLBACK_SEED, source="file", judge=judged.get("judge"))
        rows, unanswered = run_rows(samples, predictions, runs, judged.get("verdicts"))
        return section(rows, FALLBACK_SEED, source="run", unanswered=unanswered,
                       judge=judged.get("judge"))  # fmt: skip


def write_results(
    triples: list[tuple[Sample, dict[str, Any], str | None]], out: Path
) -> list[Path]:
    """`cafe export`: one official results file per subset and split, named as main.py names
    them (model "cafe", modality audio), in the folder ``out``; rows in the dataset's order."""
    from cafe.jsontext import strict_dumps
    from cafe.safe_files import replace_file

    out.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[str, str], list[str]] = {}
    for s, _item, value in triples:
        row = {k: v for k, v in s.meta.items() if k not in ADDED}
        row["prompt"] = s.question
        row["response"] = "" if value is None else value
        groups.setdefault((s.meta["subset"], s.meta["split"]), []).append(strict_dumps(row) + "\n")
    written = []
    for (subset, split), lines in sorted(groups.items()):
        f = out / f"cafe-{subset}-{split}-audio.jsonl"
        replace_file(f, lambda fh, lines=lines: fh.write("".join(lines)))
        written.append(f)
    return written
