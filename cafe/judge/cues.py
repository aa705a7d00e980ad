"""`cafe cues RUN_DIR`: cue recall for MMAR v2 runs (cafe.metrics.cues), offline always and by
the CAFE judge when one is named: the extraction judge (same JSON, same validation, retries and
cache as `cafe judge`) with the item's cue list in place of the required events it would pick
from a caption. Judgements go to ``cues.judgements.<judge>.jsonl``; the metrics.json "cues"
section also compares the cues with the run's own CAFE judgements' ``required_events``."""

from __future__ import annotations

from typing import Any

from cafe.judge.base import JudgeItem
from cafe.judge.extraction import LLMJudge
from cafe.judge.pipeline import fmt
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


def format_cues(section: dict[str, Any]) -> str:
    lines = []
    for who in ("offline", "judge"):
        b = section.get(who)
        if not b:
            continue
        name = "offline matcher" if who == "offline" else f"judge {b['judge']['judge']}"
        lines.append(
            f"cue recall ({name}): {fmt(b['recall'])} pooled over {b['cues']} cues, "
            f"{fmt(b['recall_macro'])} mean per item, {b['items']} (item, run)s; "
            f"{b['no_cues']} without cues"
        )
    if ag := section.get("offline_vs_judge"):
        lines.append(
            f"offline vs judge per cue: agreement {fmt(ag['agreement'])}, kappa {ag['kappa']}"
        )
    if rq := section.get("cues_vs_required_events"):
        lines.append(
            f"cues vs the CAFE judge's required events ({rq['items']} (item, run)s): precision "
            f"{fmt(rq['precision'])}, recall {fmt(rq['recall'])}, F1 {fmt(rq['f1'])}"
        )
    return "\n".join(lines)
