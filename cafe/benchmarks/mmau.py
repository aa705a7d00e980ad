"""MMAU (Sakshi113/MMAU): test-mini in its two releases (original, v05.15.25) and the answerless
test split. Audio is `audio_id` (``./test-mini-audios/<id>.wav``) relative to the JSON file."""

from __future__ import annotations

from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, by_meta
from cafe.benchmarks.metadata import MetadataSpec, join_list_category, load_official
from cafe.benchmarks.string_match_rows import RowScript

SPEC = MetadataSpec(
    bench="mmau",
    audio_field="audio_id",
    required=("task", "difficulty", "sub-category", "category"),
    known_sha256={
        "e8cc09223b497191781756212cb616315690aaa6ea7ac359db1b65d97d1e2433": "original",
        "9f18fda99f8dbc2bc5ecd6323fb5063309f54969810b5c6f1caeb3b8d904cf1c": "v05.15.25",
    },
    known_content={
        "67c17407780a829b7e10a6f964569acc77a57190c16871d01a4a290d72e9edaf": "original",
        "4d5258c8922def6171c495c63dea4e6a71a906052c0b8256a6027d7dcc89d706": "v05.15.25",
    },
    file_names={
        "v05.15.25": "mmau-test-mini.json",
        "original": "mmau-test-mini-original.json",
        "test": "mmau-test.json",
    },
    answerless_version="test",
)


def normalise(item: dict[str, Any], meta: dict[str, Any]) -> None:
    """13 test-mini items carry category as a one-element list: keep a string (joined with '|'
    if a list ever has several), remember the original form."""
    join_list_category(item, meta)


class MMAU(Benchmark):
    """MMAU test-mini (original / v05.15.25) or test; breakdowns as the official script (task,
    difficulty, sub-category) plus category (Information Extraction / Reasoning)."""

    name = "mmau"
    signature = (SPEC.audio_field, *SPEC.required)  # every row of its files has these
    breakdowns = by_meta("task", "difficulty", "sub-category", "category")
    prediction_keys = ("model_output",)  # evaluation.py
    export_format = ExportFormat("model_output", "audio_id")
    modality_breakdown = "task"  # sound / music / speech
    versions_comparable = False  # the two test-mini releases are different tests
    version_items = {"original": 1000, "v05.15.25": 1000, "test": 9000}  # test: no answers
    licence = "Apache-2.0 (Sakshi113/MMAU repository)"

    def has_answers(self, version: str) -> bool:
        return version != SPEC.answerless_version

    #: how the official script reads a predictions file, row by row (string_match_rows)
    script_rows = RowScript(
        "model_output",
        {"task": ("sound", "music", "speech"), "difficulty": ("easy", "hard", "medium"),
         "sub-category": None},
        "MMAU evaluation.py",
    )  # fmt: skip

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        return load_official(SPEC, data, version, normalise, audio_root=self.audio_root)
