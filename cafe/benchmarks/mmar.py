"""MMAR (ddlBoJack/MMAR): v1 (the Hugging Face JSON, May 2025) and v2 (the GitHub JSONL, which adds
thinking / cue / rubric and fixes answers). Audio is always `audio_path`, relative to the file:
46 items do not follow ``./audio/<id>.wav``."""

from __future__ import annotations

from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, by_meta
from cafe.benchmarks.metadata import MetadataSpec, join_list_category, load_official
from cafe.benchmarks.string_match_rows import RowScript

ISOLATED = ("sound", "music", "speech")

SPEC = MetadataSpec(
    bench="mmar",
    audio_field="audio_path",
    required=("modality", "category", "sub-category"),
    known_sha256={
        "7240ecca11b252c782ef44d4d19f711dd9b8424656a2bc3f92c548e318d25cee": "v1",
        "1c9a343e7bebf1037482b935c54eacd43cc63df7b2c668724b5560caf1f84fad": "v2",
    },
    known_content={
        "66c8db160771753ac6e495b81ef42eed6ded4f88509fa09c019e7629e1f4a9d1": "v1",
        "03b41acf1eec3e8c77fef5c7deebcb31964c2e94b5eb1b17f9b18d2eba887d6b": "v2",
    },
    file_names={"v2": "MMAR-meta.jsonl", "v1": "MMAR-meta.json"},
    extra_names=("MMAR-meta-v1.json",),
    default_audio=lambda sid: f"./audio/{sid}.wav",
)


def normalise(item: dict[str, Any], meta: dict[str, Any]) -> None:
    """Isolated (sound / music / speech) vs mixed (mix-*); languages as a list (null -> []);
    category as a string."""
    modality = item.get("modality")
    meta["isolation"] = "isolated" if modality in ISOLATED else "mixed"
    lang = item.get("language")
    meta["languages"] = [x for x in str(lang).split("|") if x] if lang else []
    join_list_category(item, meta)


class MMAR(Benchmark):
    """MMAR v1 / v2; breakdowns as the official script (modality, category = layer,
    sub-category) plus isolation (isolated vs mixed)."""

    version_items = {"v1": 1000, "v2": 1000}
    licence = "CC BY-NC 4.0 (ddlBoJack/MMAR data)"

    name = "mmar"
    signature = (SPEC.audio_field, *SPEC.required)  # every row of its files has these
    breakdowns = by_meta("modality", "category", "sub-category", "isolation")
    prediction_keys = ("answer_prediction", "model_prediction")  # code/evaluation.py
    export_format = ExportFormat("answer_prediction", "audio_path")
    modality_breakdown = "modality"  # sound / music / speech (and the mix-* modalities)
    licence = "CC BY-NC 4.0 (data)"
    version_items = {"v1": 1000, "v2": 1000}

    #: how the official script reads a predictions file, row by row (string_match_rows)
    script_rows = RowScript(
        "answer_prediction",
        {"modality": ("sound", "music", "speech", "mix-sound-music", "mix-sound-speech",
                      "mix-music-speech", "mix-sound-music-speech"),
         "category": ("Signal Layer", "Perception Layer", "Semantic Layer", "Cultural Layer"),
         "sub-category": None},
        "MMAR code/evaluation.py",
    )  # fmt: skip

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        return load_official(SPEC, data, version, normalise, audio_root=self.audio_root)
