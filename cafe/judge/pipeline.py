"""The CAFE judge's pieces that compute from records (its step, cafe.steps.cafe_judge, runs
on the step engine and refuses a failed judge): the caption map, the errors of a failed judge
and their reasons (reply health: cafe.metrics.cafe). Invalid judgements are kept (re-judging
replays them from the cache); failed ones are tried again on the next run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cafe.errors import CafeError
from cafe.failures import summary_lines
from cafe.folder.status import NothingUsable
from cafe.judge.base import Judge
from cafe.judge.captions import load_captions
from cafe.records import Judgement, Sample
from cafe.store import judge_records_name


class JudgeFailedError(CafeError):
    """Most judgements failed: the run's current judgements and CAFE metrics were left as they
    were (a failed judge never replaces a good one); the message gives the reasons with counts."""


class JudgeUnusable(JudgeFailedError, NothingUsable):
    """Not one of the judge's judgements is usable: nothing measured (cafe.folder.status)."""


def load_caption_map(samples: Sequence[Sample], captions: str | Path | None) -> dict[str, str]:
    out = {s.id: s.caption for s in samples if s.caption}
    if captions is not None:
        out.update(load_captions(captions))
    return out


def judging_reasons(judge: Judge, attempted: Sequence[Judgement]) -> list[str]:
    """The reasons of this invocation's failed and unusable judgements (``attempted``), one line
    each naming the judge's records file and the item."""
    name = judge_records_name("cafe", judge.identity)

    def said(j: Judgement) -> tuple[str, str]:  # one line naming the file and the item
        return f"{name}: sample {j.sample_id}: {j.reason or j.status}", j.sample_id

    failed = [said(j) for j in attempted if j.status == "failed"]
    reasons = summary_lines("judgements", failed, len(attempted))
    invalid = [said(j) for j in attempted if j.status == "invalid"]
    return reasons + summary_lines("judge replies", invalid, len(attempted), verb="were unusable")
