"""VoiceBench's GPT judge (api_judge.py), declared: for the open subsets a 1-5 rating of the
reply, for sd-qa a Yes / No against the reference; gpt-4o-mini by default, temperature 0.5,
top_p 0.95, three samples per item (their replies are the row's ``score``), a system message.
Our own prompt wording (open_judge.txt, qa_judge.txt) with the official facts: the rubric's five
levels, the score alone / one word.

`cafe judge-official` asks it through the official judge's machinery (cafe.judge.verdict: call
cache, batch transport, cost ledger): each sample is its own cached call, so a resumed run asks
only for the samples it lacks."""

from __future__ import annotations

from pathlib import Path

from cafe.benchmarks.official_judge import VerdictSpec
from cafe.records import Sample

HERE = Path(__file__).parent
OFFICIAL_JUDGE = "gpt-4o-mini"
SYSTEM = "You are a careful assistant who judges answers to the user's request."
SAMPLES = 3
JUDGED = ("open", "qa")  # the evaluators whose rows carry the judge's replies


def _evaluator(sample: Sample) -> str:
    from cafe.benchmarks.voicebench.scorers import EVALUATORS

    return EVALUATORS.get(str(sample.meta.get("subset")), "")


def judge_spec() -> VerdictSpec:
    """The judge call: the open template, or the QA one (with the reference) for sd-qa; every
    reply text is kept as it is (the evaluators read it: a reply that is no score is named
    there)."""
    return VerdictSpec(
        name="voicebench-gpt",
        template=HERE / "open_judge.txt",
        model=OFFICIAL_JUDGE,
        temperature=0.5,
        top_p=0.95,
        max_tokens=1024,
        system=SYSTEM,
        fields=lambda s: {"answer": str(s.meta.get("reference") or "")},
        reader=lambda text: text,
        applies=lambda s: _evaluator(s) in JUDGED,
        templates=(("qa", HERE / "qa_judge.txt"),),
        template_for=lambda s: "qa" if _evaluator(s) == "qa" else None,
        samples=SAMPLES,
    )
