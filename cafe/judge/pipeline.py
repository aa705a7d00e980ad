"""The CAFE judge's pieces that compute from records (its step, cafe.steps.cafe_judge, runs
on the step engine): the caption map and ground-truth check, refusing a failed judge (reply
health: cafe.metrics.cafe). Invalid judgements are kept (re-judging replays them from the
cache); failed ones are tried again on the next run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.errors import CafeError, ConfigError
from cafe.execution import pending_calls
from cafe.failures import most_failed, summary_lines
from cafe.folder.status import NothingUsable
from cafe.judge.base import Judge, JudgeItem
from cafe.judge.captions import load_captions
from cafe.records import Judgement, Prediction, Sample
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


def _check_ground_truth(
    run_dir: str | Path, judge: str, judge_cls: Any, samples: Sequence[Sample],
    caption_of: dict[str, str],
) -> None:  # fmt: skip
    """The judge's ground truth is there (captions, or events), else one line saying how."""
    if getattr(judge_cls, "needs_caption", True) and not caption_of:
        raise ConfigError(
            f"{run_dir}: no sample has a caption; the {judge} judge needs ground-truth captions: "
            "write them with `cafe caption --bench NAME --captioner ... --out FILE` and pass "
            "--captions FILE (or use --judge rule on the synth benchmark)"
        )
    # events known (an empty list under a silence control is known: nothing happens)
    if getattr(judge_cls, "needs_events", False) and all(s.events is None for s in samples):
        raise ConfigError(
            f"{run_dir}: the {judge} judge needs ground-truth events, which no sample of this "
            "benchmark carries (synth has them); use an LLM judge with --captions FILE"
        )


def _item_without_sample(p: Prediction) -> JudgeItem:
    return JudgeItem(Sample(p.sample_id, "", "", "", [], None, []), p, None)


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


def _refuse_a_failed_judge(
    run_dir: str | Path, judge: Judge, attempted: Sequence[Judgement],
    preds: Sequence[Prediction], judgements: Sequence[Judgement], plan: Any,
) -> list[Judgement]:  # fmt: skip
    """Raises JudgeFailedError (with ``judging_reasons`` of this invocation's ``attempted``
    judgements) when the judge failed most of the outputs, JudgeUnusable when none of its
    ``judgements`` is usable -> the judgements of the predictions with an output."""
    reasons = judging_reasons(judge, attempted)
    # the judge's own record: of the predictions that have an output to judge, how many did it
    # fail on (a failed prediction's judgement fails whatever the judge)
    outputs = {(p.sample_id, p.run_index) for p in preds if p.raw_output is not None}
    judged = [j for j in judgements if (j.sample_id, j.run_index) in outputs]
    judge_failed = sum(j.status == "failed" for j in judged)
    # a batch left running (--batch-no-wait) or cancelled at the service is pending, not a judge
    # failure: the next run collects it or submits its items anew
    pending = pending_calls(plan)
    usable = sum(j.status == "ok" for j in judged)
    kept = f"{run_dir}'s judgements.jsonl and its CAFE metrics were left as they were"
    if not pending and judged and not usable:  # 6 of 6 unusable (now or kept): nothing measured
        raise JudgeUnusable("\n".join([*reasons, f"judge {judge.identity} produced nothing "
                                        f"usable: none of {len(judged)} judgements is usable; "
                                        f"{kept}"]))  # fmt: skip
    if attempted and not pending and most_failed(judge_failed, len(judged)):
        raise JudgeFailedError("\n".join([*reasons, f"judge {judge.identity} failed: {kept}; fix "
                                           "the cause and run the same command again (failed "
                                           "judgements are retried)"]))  # fmt: skip
    return judged
