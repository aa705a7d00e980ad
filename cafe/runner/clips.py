"""One line when a run's clips are not where its metadata says: how many, the first one, and
where each benchmark's audio comes from; said once per run, also for a model that reads no
audio (a chance baseline runs without them, but the user should know they are absent)."""

from __future__ import annotations

import os

from cafe.records import Sample

WHERE = "docs/benchmarks.md (Getting the data)"


def missing_clips_line(samples: list[Sample], bench: str, reads_audio: bool) -> str | None:
    """The line, or None when every clip of ``samples`` is there."""
    clips = [p for s in samples if not s.error for p in (s.audio or ())]
    missing = [p for p in clips if not os.path.exists(p)]
    if not missing:
        return None
    effect = (
        "the model reads no audio, so its items run; a model that listens needs them"
        if not reads_audio
        else "their items fail"
    )
    return (
        f"{len(missing)} of {len(clips)} {bench} clips are missing (first: {missing[0]}): "
        f"{effect}; where to get the audio: {WHERE}"
    )
