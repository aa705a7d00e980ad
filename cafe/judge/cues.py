"""`cafe cues RUN_DIR`: cue recall for MMAR v2 runs (cafe.metrics.cues), offline always and by
the CAFE judge when one is named: the extraction judge (same JSON, same validation, retries and
cache as `cafe judge`) with the item's cue list in place of the required events it would pick
from a caption. Judgements go to ``cues.judgements.<judge>.jsonl``; the metrics.json "cues"
section also compares the cues with the run's own CAFE judgements' ``required_events``."""

from __future__ import annotations

from typing import Any

from cafe.judge.base import JudgeItem
from cafe.judge.extraction import LLMJudge
from cafe.metrics.cues import cues_of
from cafe.prompts import text_template

SECTION = "cues"
NO_CAPTION = "(no caption: the cues above are all that is known about the clip)"


class CueJudge(LLMJudge):
    """The CAFE extraction judge told the required events: the item's MMAR cues."""

    needs_caption = False
    task = "cue-extraction"

    def __init__(self, kind: str, model: str | None = None, template: str | None = None, **kw: Any):
        super().__init__(kind, model, template=None, **kw)
        self.template, self.template_hash = text_template("cue_extraction", template)

    def prompt_for(self, item: JudgeItem) -> str:
        cues = "\n".join(f"- {c}" for c in cues_of(item.sample))
        return super().prompt_for(item).replace("{cues}", cues)
