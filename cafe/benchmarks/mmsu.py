"""MMSU (dingdongwang/MMSU; Hugging Face ddwang2000/MMSU, split "train", which the official
inference uses): 5,000 spoken-language MCQ. Rows: id, audio, task_name, question, choice_a..d,
answer_gt (the option text), category (Perception / Reasoning), sub-category (Linguistics /
Paralinguistics), sub-sub-category, linguistics_sub_discipline. ``--data``: a local HF copy
(parquet or save_to_disk) or a JSON / JSONL file of such rows (``audio`` a path relative to it).

Official rule (mmsu_evaluation.py, read at commit 217d1d3): the letter rule
(cafe.benchmarks.letter_rule), format failures and null / non-string replies dropped, an empty or
"None" reply wrong; micro accuracy per (category, sub-category), per category and overall."""

from __future__ import annotations

from typing import Any

from cafe.benchmarks.base import ExportFormat, by_meta
from cafe.benchmarks.letter_rule import LetterRuleBenchmark, RowSpec
from cafe.benchmarks.letters import LetterRule

SPEC = RowSpec(
    bench="mmsu",
    id_field="id",
    audio_fields=("audio", "audio_path"),
    meta_fields=("category", "sub-category"),
    file_names=("mmsu.json", "mmsu.jsonl", "MMSU.json", "MMSU.jsonl"),
    known_sha256={},  # no release file to hash yet: versions are content fingerprints
)


def _category_pair(s: Any) -> str:
    return f"{s.meta.get('category')}/{s.meta.get('sub-category')}"


class MMSU(LetterRuleBenchmark):
    name = "mmsu"
    row_spec = SPEC
    # mmsu_evaluation.py: "" / "None" wrong; a null or non-string reply dropped ("Error
    # prediction!"); a row without `response` read as ""; any letter whose option is answer_gt
    letter_rule = LetterRule(
        empty_excluded=False, non_string_stops=False, missing_stops=False, first_gold=False
    )
    default_prompt_style = "mmsu-letter"  # its official inference asks for the letter only
    signature = ("choice_a", "answer_gt", "category", "sub-category")
    breakdowns = {
        **by_meta("category", "sub-category", "task_name"),
        "category_sub": _category_pair,  # the official table's (category, sub-category) rows
    }
    prediction_keys = ("response", "model_output", "prediction")
    export_format = ExportFormat(
        "response", "audio_path",
        layout=("id", "audio_path", "question", "choice_a", "choice_b", "choice_c", "choice_d",
                "answer_gt", "response", "task_name", "category", "sub-category",
                "sub-sub-category", "linguistics_sub_discipline"),
    )  # mmsu_inference.py's rows  # fmt: skip
    official_rule = (
        "letter rule as mmsu_evaluation.py reads it (first character if A-D, else the "
        "second-to-last); format failures and null / non-string replies dropped from the "
        "denominator, empty or 'None' wrong; correct when the letter's option text is answer_gt; "
        "micro per (category, sub-category), per category, overall"
    )
    licence = "MIT (Hugging Face card, reportedly)"
    version_items = {"train": 5000}
    accuracy_label = (
        "the official letter rule over every item, format failures counted wrong (the "
        "official figure drops them: see the 'official' section)"
    )
