"""Score: a completion becomes a Prediction (sections parsed, answer extracted, correctness by the
benchmark's own rule); an item that could not run becomes a failed Prediction with its reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cafe.parsing import extract_answer, parse_sections, reasoning_text
from cafe.records import Completion, Prediction, Sample

#: (prediction text, answer, choices) -> correct; a benchmark's ``is_correct``
Rule = Callable[[str, str, list[str]], bool]


def failed_prediction(
    sample_id: str, run_index: int, base: dict[str, Any], reason: str, kind: str
) -> Prediction:
    """``kind``: input, audio, model or adapter (cafe.failures says which are retried)."""
    return Prediction(
        sample_id=sample_id,
        run_index=run_index,
        raw_output=None,
        sections={"failure": kind},
        parse_status="failed",
        error=reason.splitlines()[0] if reason else kind + " failure",
        **base,
    )


def score_completion(
    sample: Sample,
    completion: Completion,
    base: dict[str, Any],
    count_tokens: Callable[[str], int],
    is_correct: Rule,
    choice_is_correct: Rule | None = None,
) -> Prediction:
    """``is_correct`` (the benchmark's rule) on the model's answer text, unmodified, is the
    headline (what `cafe export` writes and the official scripts read: a bare "(A)" is wrong);
    ``choice_is_correct`` (the benchmark's reading of a mapped choice; default the same rule) on
    the answer mapped to a choice is the lenient figure beside it."""
    choice_is_correct = choice_is_correct or is_correct
    if completion.error or completion.text is None:
        reason = completion.error or "adapter returned no text"
        # an exception raised by adapter code is deterministic (call_adapter marks it); a call
        # a dead server's breaker stopped is not written at all (the runner stops on it)
        marked = completion.backend.get("failure")
        kind = marked if marked in ("adapter", "unreachable") else "model"
        pred = failed_prediction(sample.id, completion.run_index, base, reason, kind)
        pred.front = completion.backend.get("front")
        return pred
    sections = parse_sections(completion.text)
    answer, status = extract_answer(sections.answer, sample.choices)
    truth = sample.answer
    return Prediction(
        sample_id=sample.id,
        run_index=completion.run_index,
        raw_output=completion.text,
        sections=sections.to_dict(),
        answer=answer,
        answer_text=sections.answer,
        parse_status=status,
        correct=bool(
            truth is not None
            and sections.answer is not None
            and is_correct(sections.answer, truth, sample.choices)
        ),
        correct_lenient=bool(
            truth is not None
            and answer is not None
            and choice_is_correct(answer, truth, sample.choices)
        ),
        reasoning_tokens=count_tokens(reasoning_text(completion.text, sections)),
        latency_s=completion.latency_s,
        front=completion.backend.get("front"),
        option_scores=completion.backend.get("option_scores"),
        **base,
    )


def is_pending(
    prediction: Prediction | None, sample: Sample | None = None, retry_failed: bool = False
) -> bool:
    """An (item, run) still to run: no prediction yet; a transient model failure; an unreadable
    clip whose file has changed since (added, repaired); an adapter error with
    ``retry_failed`` (after a fix). Bad metadata stays failed until the file is fixed."""
    from cafe.audio import audio_state
    from cafe.failures import RETRIED

    if prediction is None:
        return True
    if prediction.parse_status != "failed":
        return False
    kind = prediction.sections.get("failure")
    if kind == "audio" and sample is not None:
        return prediction.sections.get("audio_state") != audio_state(sample.audio)
    return kind in RETRIED or (retry_failed and kind == "adapter")
