"""AIR-Bench foundation (OFA-Sys/AIR-Bench; Hugging Face qyang1021/AIR-Bench-Dataset,
Foundation_meta.json): about 19k MCQ in 19 tasks. Rows: path, question, choice_a..d, answer_gt
(text), task_name, dataset_name, uniq_id. The clip is ``path`` relative to the metadata file's
folder, else under ``<task_name>_<dataset_name>/`` there (the first that exists).

Official rule (score_foundation.py, read at commit 9832476): the letter rule
(cafe.benchmarks.letter_rule), format failures and empty / "None" replies left out (its
fail_num); the gold letter the first option equal to answer_gt; accuracy per task_name +
dataset_name (the script prints those rows, their item sum and fail_num; no overall). The README's
Average is the mean of its 19 task rows. The optional step that maps free-form answers to a
letter with an LLM (align_in_foundation.py) is not run."""

from __future__ import annotations

from typing import Any

from cafe.benchmarks.base import ExportFormat, by_meta
from cafe.benchmarks.letter_rule import LetterRuleBenchmark, RowSpec
from cafe.benchmarks.letters import LetterRule

SPEC = RowSpec(
    bench="airbench",
    id_field="uniq_id",
    audio_fields=("path",),
    meta_fields=("task_name", "dataset_name"),
    file_names=("Foundation_meta.json",),
    known_sha256={},  # no release file to hash yet: versions are content fingerprints
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
    # score_foundation.py: "" / "None" left out (fail_num); a null, non-string or missing
    # `response` stops it (AttributeError / KeyError); the gold letter is the first option equal
    # to answer_gt (none: exit 1); a task_id row with no scored reply stops its summary (KeyError)
    letter_rule = LetterRule(
        empty_excluded=True, non_string_stops=True, missing_stops=True, first_gold=True,
        empty_cell_stops="task_dataset", strict_lines=True,
    )  # fmt: skip
    averages = _averages
    default_prompt_style = "airbench-letter"  # its official inference asks for the letter only
    signature = ("choice_a", "answer_gt", "task_name", "dataset_name", "uniq_id")
    breakdowns = {**by_meta("task_name", "dataset_name"), "task_dataset": _task_dataset}
    prediction_keys = ("response", "model_output", "prediction")
    prediction_id_keys = ("uniq_id", "id")  # Inference_Foundation.py writes uniq_id, no id
    export_format = ExportFormat(
        "response", "path",
        layout=("path", "question", "choice_a", "choice_b", "choice_c", "choice_d", "answer_gt",
                "task_name", "dataset_name", "response", "uniq_id"),
    )  # Inference_Foundation.py's rows  # fmt: skip
    official_rule = (
        "letter rule as score_foundation.py reads it (first character if A-D, else the "
        "second-to-last); format failures and empty / 'None' replies left out (fail_num); the "
        "gold letter is the first option equal to answer_gt; per task_name + dataset_name; the "
        "README's Average = mean of the task rows"
    )
    licence = "Apache-2.0 (README)"
    version_items = {"foundation": 19000}  # "about 19k": the exact count is the file's
    accuracy_label = (
        "the official letter rule over every item, format failures counted wrong (the "
        "official figure leaves out them: see the 'official' section)"
    )
