"""Whether a run's answers could depend on the order of the choices at all: a model that picks
by scoring each option's likelihood after a prompt that does not list them (the CPU cascade's
``answer_by: loglik``) answers the same under every ordering by construction, so its
consistency of 100 and its p of 1 are no finding, and the console says so."""

from __future__ import annotations

from pathlib import Path

from cafe.store import RunStore

#: the same cascade with its back writing the answer to the prompt that lists the choices
ORDER_DEMO = "--model whisper-tiny-smollm2 -o answer_by=generate"


def order_free_line(run_dir: str | Path) -> str | None:
    """The console line for a run whose every answered prediction was picked by option
    likelihood; None when some answer was written by the model (it can depend on order)."""
    answered = [p for p in RunStore(run_dir).predictions() if p.answer is not None]
    if not answered or not all(p.option_scores for p in answered):
        return None
    return (
        "note: every answer here was picked by scoring each option's likelihood after a prompt "
        "that does not list the choices, so it cannot depend on their order: consistency 100 "
        "and no positional bias are by construction, not a finding; to test choice order, run a "
        f"model that reads the list (e.g. {ORDER_DEMO})"
    )
