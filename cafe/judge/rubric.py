"""MMAR rubric scoring (SPEC §12) to the MMAR authors' protocol (their
``code/evaluation_rubrics.py``), in our own words and code:

- only an (item, run) whose answer passes the official string match is rated; the others score 0;
- the judge sees the question, the correct answer, the item's ideal reasoning (``thinking``), one
  section per rubric criterion (its rule and allowed scores) and the model's reasoning followed
  by "The answer is {answer}."; it replies with a JSON list of ``{name, score, justification}``,
  one per criterion in order, invalid when it is not such a list or a score is not one of its
  criterion's choices (a renamed criterion is only noted, as theirs);
- rater score = sum of scores / sum of maxima; ``raters`` (5) calls at temperature 0 with a fixed
  ``seed`` (42); drop the ``trim`` lowest and highest, average the rest.

A rater with no valid reply after ``retries`` leaves the item ``invalid`` (raw replies kept): as
theirs, out of every denominator and listed as not evaluated (cafe.metrics.rubric)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cafe.benchmarks.string_match import is_correct, official_text
from cafe.cache import Cache
from cafe.judge.base import Asking
from cafe.judge.spec import JudgeSpec
from cafe.metrics.cues import reasoning_of
from cafe.metrics.stats import trimmed_mean
from cafe.parsing import first_json
from cafe.prompts import fill, text_template
from cafe.records import InputError, Prediction, Problem, RubricScore, Sample
from cafe.store import SAMPLES

RATERS = 5  # the authors' NUM_RATERS
TRIM = 1  # drop this many lowest and highest rater scores
TEMPERATURE = 0.0
SEED = 42
RETRIES = 3  # extra attempts per rater after an invalid reply
MAX_TOKENS = 2048
PAPER_JUDGE = "gpt-4o-2024-11-20"  # the authors' judge model
_PART = re.compile(r"^----- (system|user|criterion|reply item) -----\n", re.MULTILINE)


@dataclass(frozen=True)
class Criterion:
    name: str
    scoring_point: str
    choices: tuple[float, ...]


def criteria_of(sample: Sample, source: str = SAMPLES) -> list[Criterion]:
    """The item's rubric (``meta["rubric"]``, MMAR v2); InputError naming item and field."""
    rubric = sample.meta.get("rubric")

    def bad(msg: str) -> InputError:
        return InputError(Problem(source, msg, sample.id, "rubric"))

    if not rubric:
        raise bad("no rubric (MMAR v2 metadata, MMAR-meta.jsonl, carries one per item)")
    if not isinstance(rubric, list):
        raise bad("must be a list of criteria")
    out = []
    for i, c in enumerate(rubric):
        if not isinstance(c, dict) or not c.get("name"):
            raise bad(f"criterion {i}: needs a name")
        choices = c.get("choices")
        if not isinstance(choices, list) or not choices or not all(map(_number, choices)):
            raise bad(f"criterion {i} ({c['name']}): choices must be a list of numbers")
        out.append(Criterion(str(c["name"]), str(c.get("scoring_point", "")), tuple(choices)))
    return out


@dataclass(frozen=True)
class RubricTemplate:
    system: str
    user: str
    criterion: str
    reply_item: str
    hash: str

    @classmethod
    def load(cls, path: str | None = None) -> RubricTemplate:
        text, digest = text_template("rubric", path)
        bits = _PART.split(text)
        parts = {bits[i]: bits[i + 1].strip("\n") for i in range(1, len(bits) - 1, 2)}
        missing = [p for p in ("system", "user", "criterion", "reply item") if p not in parts]
        if missing:
            where = path or "the packaged rubric template"
            raise ValueError(f"{where}: missing part(s) {', '.join(missing)} ('----- NAME -----')")
        return cls(parts["system"], parts["user"], parts["criterion"], parts["reply item"], digest)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _choices(c: Criterion) -> str:
    return "[" + ", ".join(f"{x:g}" for x in c.choices) + "]"


def build_prompt(
    template: RubricTemplate, sample: Sample, criteria: Sequence[Criterion], reasoning: str,
    answer_prediction: str,
) -> str:  # fmt: skip
    blocks = [
        fill(template.criterion, name=c.name, scoring_point=c.scoring_point, choices=_choices(c))
        for c in criteria
    ]
    items = [
        fill(template.reply_item, name=json.dumps(c.name)[1:-1], choices=_choices(c))
        for c in criteria
    ]
    return fill(
        template.user,
        question=sample.question,
        answer=sample.answer or "",
        thinking=str(sample.meta.get("thinking") or ""),
        criteria="\n\n".join(blocks),
        reply_format=",\n".join(items),
        reasoning=reasoning.strip(),
        answer_prediction=answer_prediction,
    )


def score_reply(
    text: str | None, criteria: Sequence[Criterion]
) -> tuple[float | None, str | None, list[str]]:
    """(rater score in [0, 1], None, notes) for a valid reply, else (None, reason, notes)."""
    if not text or not text.strip():
        return None, "empty reply", []
    obj = first_json(text, "[", lambda o: isinstance(o, list) and (not o or isinstance(o[0], dict)))
    if obj is None:
        return None, f"no JSON list in reply: {' '.join(text.split())[:80]!r}", []
    if len(obj) != len(criteria):
        return None, f"expected {len(criteria)} criteria, got {len(obj)}", []
    got = 0.0
    notes = []
    for i, (item, c) in enumerate(zip(obj, criteria, strict=True)):
        if not isinstance(item, dict) or "name" not in item or "score" not in item:
            return None, f"item {i}: needs 'name' and 'score'", []
        s = item["score"]
        if not _number(s):
            return None, f"item {i} ({c.name}): score {s!r} is not a number", []
        if s not in c.choices:
            return None, f"item {i} ({c.name}): score {s:g} not in {_choices(c)}", []
        if item["name"] != c.name:
            notes.append(f"item {i}: judge named {item['name']!r}, rubric says {c.name!r}")
        got += s
    top = sum(max(c.choices) for c in criteria)
    return (got / top if top else 0.0), None, notes


class RubricJudge(Asking):
    """Rates (item, run)s against their rubric through the one caller (``kind``: openai,
    gemini, openai-compatible)."""

    def __init__(
        self, kind: str, model: str | None, endpoints: Sequence[str] = (),
        template: str | None = None, cache: Cache | None = None, raters: int = RATERS,
        trim: int = TRIM, temperature: float = TEMPERATURE, seed: int | None = SEED,
        retries: int = RETRIES, max_tokens: int = MAX_TOKENS, concurrency: int = 16,
        client: Any = None, **client_options: Any,
    ):  # fmt: skip
        if not model:
            raise ValueError(f"rubric judge {kind!r} needs a model name (--judge-model)")
        if raters < 1 or trim < 0 or retries < 0:
            raise ValueError("raters >= 1, trim >= 0 and retries >= 0")
        self.template = RubricTemplate.load(template)
        self.template_hash = self.template.hash
        self.raters, self.trim = raters, trim  # the rest of the protocol: read from the spec
        self.spec = JudgeSpec(
            task="mmar-rubric", kind=kind, model=model, template_hash=self.template_hash,
            endpoint=JudgeSpec.endpoint_of(endpoints), max_tokens=max_tokens,
            temperature=temperature, seed=seed, raters=raters, trim=trim, retries=retries,
        )  # fmt: skip
        self.connect(self.spec, endpoints, cache, client, concurrency=concurrency, **client_options)

    def describe(self) -> dict[str, Any]:
        return {"judge": self.identity, "template_hash": self.template_hash, **self.protocol,
                "retries": self.spec.retries, "max_tokens": self.spec.max_tokens}  # fmt: skip

    @property
    def protocol(self) -> dict[str, Any]:
        """The settings a record was made under (a record under others is rated again)."""
        return {k: getattr(self.spec, k) for k in ("raters", "trim", "temperature", "seed")}

    def record(self, p: Prediction, status: str, **kw: Any) -> RubricScore:
        return RubricScore(
            p.sample_id, p.run_index, self.identity, self.template_hash, status,
            protocol=self.protocol, **kw,
        )  # fmt: skip

    def failed(self, item: tuple[Any, Prediction], why: str) -> RubricScore:
        """The record of a (sample, prediction) whose rating raised: rated again next time."""
        return self.record(item[1], "failed", reason=why)

    async def _rate(
        self, prompt: str, criteria: list[Criterion], rater: int
    ) -> tuple[float | None, list[str], int, list[str], str | None]:
        """One rater: (score or None, raw replies, invalid count, notes, failure reason)."""
        messages = [
            {"role": "system", "content": self.template.system},
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
        ]

        def parse(text: str | None) -> tuple[Any, str | None]:
            score, why, notes = score_reply(text, criteria)
            return ((score, notes), None) if score is not None else (None, why)

        def request(attempt: int, _: str | None) -> tuple[Any, dict[str, Any]]:
            return messages, {"prompt": prompt, "rater": rater, "attempt": attempt}

        got, raws = await self.caller.ask_retrying(
            self.spec.retries, request, parse, catch=True, temperature=self.spec.temperature,
            max_tokens=self.spec.max_tokens, seed=self.spec.seed,
        )  # fmt: skip
        if got.error is not None:
            return None, raws, len(raws), [], f"judge call failed: {got.error}"
        if got.ok:
            score, notes = got.value
            return score, raws, len(raws) - 1, notes, None
        note = f"rater {rater}: invalid after {len(raws)}: {got.reason}"
        return None, raws, len(raws), [note], None

    async def ascore(self, sample: Sample, p: Prediction) -> RubricScore:
        if p.raw_output is None or p.error:
            # a failed prediction has no answer: wrong, as the accuracy counts it
            return self.record(p, "wrong", score=0.0, reason=f"prediction failed: {p.error}")
        try:
            criteria = criteria_of(sample)
        except InputError as e:
            return self.record(p, "no_rubric", reason=str(e))
        answer = official_text(p) or ""  # the MMAR scripts' answer_prediction (empty: wrong)
        if sample.answer is None or not is_correct(answer, sample.answer, sample.choices):
            return self.record(p, "wrong", score=0.0)
        prompt = build_prompt(self.template, sample, criteria, reasoning_of(p), answer)
        rated = await asyncio.gather(*(self._rate(prompt, criteria, r) for r in range(self.raters)))
        kw: dict[str, Any] = {"correct": True, "rater_scores": [r[0] for r in rated],
                              "raw_replies": [r[1] for r in rated],
                              "invalid_replies": sum(r[2] for r in rated),
                              "notes": [n for r in rated for n in r[3]]}  # fmt: skip
        if failure := next((r[4] for r in rated if r[4]), None):  # a call that failed
            return self.record(p, "failed", reason=failure, **kw)
        if bad := sum(r[0] is None for r in rated):
            why = f"{bad} of {self.raters} raters gave no valid reply"
            return self.record(p, "invalid", reason=why, **kw)
        score = trimmed_mean([r[0] for r in rated], self.trim)  # type: ignore[misc]
        return self.record(p, "ok", score=score, **kw)
