"""AIR-Bench foundation (OFA-Sys/AIR-Bench; Hugging Face qyang1021/AIR-Bench-Dataset,
Foundation_meta.json): about 19k MCQ in 19 tasks. Rows: path, question, choice_a..d, answer_gt
(text), task_name, dataset_name, uniq_id. The clip is ``path`` relative to the metadata file's
folder, else under ``<task_name>_<dataset_name>/`` there (the first that exists).

Official rule: the letter rule (cafe.benchmarks.letter_rule), format failures excluded; accuracy
per task_name + dataset_name; the README's average is about the mean of the task rows. The
script's optional step that maps free-form answers to a letter with an LLM is not run."""

from __future__ import annotations

from typing import Any

from cafe.benchmarks.base import ExportFormat, by_meta
from cafe.benchmarks.letter_rule import LetterRuleBenchmark, RowSpec

SPEC = RowSpec(
    bench="airbench",
    id_field="uniq_id",
    audio_fields=("path",),
    meta_fields=("task_name", "dataset_name"),
    file_names=("Foundation_meta.json",),
    known_sha256={},  # no release file is available to hash yet: recorded as 'unknown'
    audio_candidates=lambda row, rel: [
        rel,
        f"{row.get('task_name')}_{row.get('dataset_name')}/{rel}",
    ],  # fmt: skip
)


def _task_dataset(s: Any) -> str:
    return f"{s.meta.get('task_name')}/{s.meta.get('dataset_name')}"


def _averages(cells: dict[str, Any]) -> dict[str, Any]:
    from cafe.benchmarks.official import mean_of

    return {"tasks": mean_of(cells["task_name"])}  # the README's average of the task rows


class AIRBench(LetterRuleBenchmark):
    name = "airbench"
    row_spec = SPEC
    averages = _averages
    breakdowns = {**by_meta("task_name", "dataset_name"), "task_dataset": _task_dataset}
    prediction_keys = ("response", "model_output", "prediction")
    export_format = ExportFormat("response", "path")
    official_rule = (
        "letter rule (first character if A-D, else the second-to-last); format failures "
        "excluded; per task_name + dataset_name; average = mean of the task rows"
    )
    licence = "Apache-2.0 (README)"
    version_items = {"foundation": 19000}  # "about 19k": the exact count is the file's
    accuracy_label = (
        "the official letter rule with format failures counted wrong (the official figure "
        "excludes them: see the 'official' section)"
    )
