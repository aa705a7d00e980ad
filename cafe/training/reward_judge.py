"""Judge scores for MPAR² rewards (SPEC §7): perception, each reasoning step, holistic reasoning
and review, each a number in [0, 1].

Two backends share one interface (`RewardJudge.score(kind, fields)`):
- `LLMRewardJudge`: a text judge through the shared chat clients (`cafe.clients`), project
  templates in cafe/training/templates/*.txt (overridable per kind; each states appendix F's
  criteria, penalty sizes and score bands, SPEC §7), reply parsed as the prompt asks: a final
  score in [0, 1] in steps of 0.1 ("strict", the default; "8/10", "Step 2 gets 0.4", 0.75 or 1.5
  are invalid, not clamped or rounded) or, with ``parse="authors"``, the authors' rule (first
  number anywhere, clamped); server thinking is never parsed, only the final answer. An invalid
  reply is counted (``invalid``) and retried up to 5 times (3 for review), each retry with a
  format reminder appended (the same prompt at temperature 0 would repeat the same reply); 0
  when every try fails, counted in ``failed`` (GRPO logs the share per step); calls are cached
  (cafe.cache) and a whole group of completions is scored with every call in flight at once
  under a concurrency limit (the authors call the judge one completion, one call at a time).
- `OfflineRewardJudge`: a deterministic rule judge for the synth benchmark, scoring the same
  sections against ground-truth events (labelled as a stand-in: no LLM reads anything).
For both, an empty reasoning step scores 0.0 without a call (F.2's rule, applied in code).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.cache import Cache, make_key
from cafe.caller import Asks, Caller, CallerSpec
from cafe.training.rewards import JudgeScores

KINDS = ("perception", "step", "holistic", "review")
RETRIES = {"perception": 5, "step": 5, "holistic": 5, "review": 3}
TEMPLATE_DIR = Path(__file__).parent / "templates"
_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")


REMINDER = (
    "\n\nYour previous reply held no score. Reply with one number between 0 and 1 in steps of "
    "0.1 (for example 0.7) and nothing else."
)


#: a final score line: the number alone, or labelled "Score:" / "Final score:", maybe bold
_FINAL = re.compile(r"^(?:(?:final\s+)?score\s*[:=]\s*)?(\d*\.?\d+)\s*\.?$", re.IGNORECASE)
PARSE_RULES = ("strict", "authors")


def parse_score(text: str | None, rule: str = "strict") -> float | None:
    """The judge's score from its reply's final answer (thinking cut away); None when invalid.

    ``strict`` (what the prompts ask): the last non-empty line is one number in [0, 1] in steps
    of 0.1, alone or labelled "Score:"; anything else ("8/10", "Step 2 gets 0.4", 7, 1.5, 0.75)
    is invalid.
    ``authors``: the authors' code: the first number anywhere, clamped to [0, 1]."""
    from cafe.clients.thinking import final_answer

    final = final_answer(text)
    if rule == "authors":
        m = _NUMBER.search(final)
        return None if m is None else min(1.0, max(0.0, float(m.group(0))))
    if rule != "strict":
        raise ValueError(f"reward judge parse rule {rule!r}: one of {', '.join(PARSE_RULES)}")
    lines = [ln.strip().strip("*`_ ").strip() for ln in final.splitlines()]
    lines = [ln for ln in lines if ln]
    m = _FINAL.match(lines[-1]) if lines else None
    if m is None:
        return None
    value = float(m.group(1))
    on_grid = abs(value * 10 - round(value * 10)) < 1e-6  # the prompts' 0.1 steps
    return value if 0.0 <= value <= 1.0 and on_grid else None


def load_templates(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The four judge templates; ``overrides`` maps a kind to a file of the user's own."""
    out = {}
    for kind in KINDS:
        path = Path((overrides or {}).get(kind) or TEMPLATE_DIR / f"{kind}.txt")
        out[kind] = path.read_text(encoding="utf-8")
    return out


def template_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class RewardItem:
    """What the judge needs for one completion: the parsed sections and the sample's truth."""

    sections: Any  # cafe.parsing.Sections
    correct: bool
    question: str
    answer: str
    caption: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)  # synth ground truth (offline)


@dataclass(frozen=True)
class _RewardSpec:
    """What keys a reward judge's score besides its template and prompt (a value parsed by
    another rule is another value); its keys are those the reward judge has always written."""

    judge: str
    thinking: bool
    max_tokens: int | None
    parse: str

    def call_key(self, **request: Any) -> str:
        return make_key(judge=self.judge, thinking=self.thinking, max_tokens=self.max_tokens,
                        parse=self.parse, **request)  # fmt: skip


class RewardJudge(ABC):
    identity: str
    asked = 0  # scores asked for (cache hits included)
    failed = 0  # scores that fell back to 0 because no try gave a valid score
    invalid = 0  # replies that held no valid score (each one was retried or, last, failed)

    @abstractmethod
    async def score(self, kind: str, fields: dict[str, Any]) -> float: ...

    async def aclose(self) -> None:
        pass


class LLMRewardJudge(Asks, RewardJudge):
    def __init__(
        self,
        client: Any,
        *,
        templates: dict[str, str] | None = None,
        cache: Cache | None = None,
        concurrency: int = 64,
        max_tokens: int = 16,
        thinking: bool = False,
        thinking_budget: int | None = None,
        parse: str = "strict",
    ):
        from cafe.clients.thinking import judge_max_tokens

        if parse not in PARSE_RULES:
            raise ValueError(f"reward judge parse rule {parse!r}: one of {', '.join(PARSE_RULES)}")
        self.parse = parse
        self.identity = client.identity
        self.templates = templates or load_templates()
        self.hashes = {k: template_hash(v) for k, v in self.templates.items()}
        self.thinking = thinking
        # a thinking judge gets its thinking budget on top: 16 tokens of thinking is no answer
        self.max_tokens = judge_max_tokens(max_tokens, thinking, thinking_budget)
        self.asked = self.failed = self.invalid = 0
        self.concurrency = concurrency
        # the one caller, on TRL's event loop (its bound is per loop); no early stop: the
        # authors' rule scores a judge that never answers with a number 0
        kind, _, model = str(client.identity).partition(":")
        how = CallerSpec(kind, model, concurrency=concurrency, role="reward judge")
        spec = _RewardSpec(self.identity, self.thinking, self.max_tokens, self.parse)
        self.caller = Caller(how, identity=spec, cache=cache, client=client, watch=False)

    async def score(self, kind: str, fields: dict[str, Any]) -> float:
        prompt = self.templates[kind].format_map(_Blank(fields))
        self.asked += 1

        def parse(text: str | None) -> tuple[Any, str | None]:
            value = parse_score(text, self.parse)
            return (value, None) if value is not None else (None, "no score")

        inputs = {"template": self.hashes[kind], "kind": kind, "prompt": prompt}
        # the tries of one score share its key: the value of the one that gave a number
        for attempt in range(RETRIES[kind]):
            content = prompt if attempt == 0 else prompt + REMINDER
            got = await self.caller.ask([{"role": "user", "content": content}], inputs, parse,
                                        temperature=0.0, max_tokens=self.max_tokens,
                                        keep="value", valid=_a_number)  # fmt: skip
            if got.ok:  # the authors' rule: a judge that never answers with a number scores 0
                return float(got.value)
            self.invalid += 1  # no valid score in the reply (or no reply): tried again
        self.failed += 1
        return 0.0


class _Blank(dict):
    """format_map that leaves unknown placeholders empty instead of raising (custom templates)."""

    def __missing__(self, key: str) -> str:
        return ""


_WORD = re.compile(r"[a-z]+")
_STOP = {"a", "an", "the", "of", "and", "then", "is", "it", "to", "in", "at", "on", "with", "sound"}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall((text or "").lower().replace("_", " ")) if w not in _STOP}


class OfflineRewardJudge(RewardJudge):
    """Rule-based stand-in for the text judge on the synth benchmark (deterministic, no LLM).

    perception: an event line matches a ground-truth event when it names the event's label words;
      score = F1 of matched lines vs events, capped at 0.2 when a line is hallucinated or a required
      event is missed, x0.8 when not chronological; rounded to 0.1 steps.
    step: 1.0 grounded (names a ground-truth label) with an "Answer:", 0.5 with an answer only,
      0.1 otherwise. holistic: share of grounded steps, halved when the correct answer's words are
      not reached. review: evidence and logic checks present and grounded -> 1.0; the checks
      without grounding 0.5; otherwise 0.1 ("approves without checking")."""

    identity = "offline-rule-reward-judge"

    async def score(self, kind: str, fields: dict[str, Any]) -> float:
        labels = [_words(e.get("label", "")) for e in fields.get("events") or []]
        required = [
            _words(e.get("label", "")) for e in fields.get("events") or [] if e.get("required")
        ]
        if kind == "perception":
            return self._perception(fields.get("perception_events") or [], labels, required)
        if kind == "step":
            return self._step(fields.get("step", ""), labels)
        if kind == "holistic":
            steps = fields.get("steps") or []
            if not steps:
                return 0.0
            grounded = sum(self._grounded(s, labels) for s in steps) / len(steps)
            reached = _words(fields.get("answer", "")) <= _words(fields.get("reasoning", ""))
            return round(grounded * (1.0 if reached else 0.5), 1)
        if kind == "review":
            text = fields.get("review", "")
            checks = "evidence check" in text.lower() and "logic check" in text.lower()
            if checks and self._grounded(text, labels):
                return 1.0
            return 0.5 if checks else 0.1
        raise ValueError(f"unknown judge kind {kind!r}")

    @staticmethod
    def _grounded(text: str, labels: Sequence[set[str]]) -> bool:
        words = _words(text)
        return any(lab and lab <= words for lab in labels)

    def _step(self, step: str, labels: Sequence[set[str]]) -> float:
        has_answer = "answer:" in step.lower()
        if has_answer and self._grounded(step, labels):
            return 1.0
        return 0.5 if has_answer else 0.1

    @staticmethod
    def _perception(
        lines: list[dict[str, Any]], labels: list[set[str]], required: list[set[str]]
    ) -> float:
        if not lines or not labels:
            return 0.0
        line_words = [_words(x.get("text", "")) for x in lines]
        hits = [any(lab and lab <= w for lab in labels) for w in line_words]
        found = [any(lab and lab <= w for w in line_words) for lab in labels]
        precision = sum(hits) / len(lines)
        recall = sum(found) / len(labels)
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        missed_key = any(not any(r and r <= w for w in line_words) for r in required)
        if not all(hits) or missed_key:
            f1 = min(f1, 0.2)
        starts = [float(x.get("start", 0.0)) for x in lines]
        if starts != sorted(starts):
            f1 *= 0.8
        return round(f1, 1)


def annotations_text(events: Sequence[dict[str, Any]]) -> str:
    """Ground-truth events as "[start, end]: label" lines (the review judge's annotations input,
    SPEC §F.4 equivalent); "(none)" when the item carries no structured events."""
    lines = []
    for e in events or []:
        start, end = e.get("onset", e.get("start")), e.get("offset", e.get("end"))
        span = f"[{float(start):.2f}, {float(end):.2f}]" if start is not None else "[?, ?]"
        label = str(e.get("label") or e.get("text") or "").replace("_", " ")
        lines.append(f"{span}: {label}" + (" (needed for the answer)" if e.get("required") else ""))
    return "\n".join(lines) or "(none)"


def _fields(item: RewardItem) -> dict[str, Any]:
    s = item.sections
    return {
        "question": item.question,
        "answer": item.answer,
        "caption": item.caption,
        "events": item.events,
        "annotations": annotations_text(item.events),
        "perception": s.perception or "",
        "perception_events": s.perception_events,
        "reasoning": s.reasoning or "",
        "steps": list(s.steps),
        "review": s.review or "",
    }


#: a step's labels and punctuation: what is left once they are gone is the step's content
_STEP_LABELS = re.compile(r"sub-question\s*:|answer\s*:|[\W_]+", re.IGNORECASE)


def empty_step(step: str) -> bool:
    """A step with nothing but its labels ("2. Sub-question: Answer:"): F.2 scores it 0.0, so no
    judge is asked."""
    return not _STEP_LABELS.sub("", step)


async def _empty() -> float:
    return 0.0


def _calls(judge: RewardJudge, item: RewardItem) -> list[tuple[str, int, Any]]:
    """(kind, step index, awaitable score) for each score one completion's rewards use. Calls are
    skipped where the reward would not use them: no section, no steps, or review of a wrong
    answer (R_rea is gated by correctness); an empty step scores 0.0 without a call (F.2)."""
    f = _fields(item)
    s = item.sections
    calls: list[tuple[str, int, Any]] = []
    if (s.perception or "").strip():
        calls.append(("perception", 0, judge.score("perception", f)))
    if (s.reasoning or "").strip() and s.steps:
        for j, step in enumerate(s.steps):
            history = "\n".join(s.steps[:j]) or "(none)"
            fields = {**f, "step": step, "history": history}
            calls.append(("step", j, _empty() if empty_step(step) else judge.score("step", fields)))
        calls.append(("holistic", 0, judge.score("holistic", f)))
    if item.correct and (s.review or "").strip():
        calls.append(("review", 0, judge.score("review", f)))
    return calls


def _collect(item: RewardItem, scored: list[tuple[str, int, float]]) -> JudgeScores:
    out = JudgeScores(steps=[0.0] * len(item.sections.steps))
    for kind, j, value in scored:
        if kind == "step":
            out.steps[j] = value
        else:
            setattr(out, kind, value)
    if not (item.sections.reasoning or "").strip():  # steps are never scored without reasoning
        out.steps = []
    return out


async def score_group(judge: RewardJudge, items: Sequence[RewardItem]) -> list[JudgeScores]:
    """Every judge call for a whole group of completions, in flight at once (the judge's
    concurrency limit applies)."""
    calls = [_calls(judge, item) for item in items]
    values = iter(await asyncio.gather(*(c[2] for cs in calls for c in cs)))
    return [
        _collect(item, [(kind, j, next(values)) for kind, j, _ in cs])
        for item, cs in zip(items, calls, strict=True)
    ]


async def score_one_at_a_time(judge: RewardJudge, items: Sequence[RewardItem]) -> list[JudgeScores]:
    """The authors' order (one completion, one call at a time); kept for perf comparison."""
    out = []
    for item in items:
        out.append(_collect(item, [(kind, j, await call) for kind, j, call in _calls(judge, item)]))
    return out


def make_reward_judge(
    kind: str = "offline",
    model: str | None = None,
    endpoints: Sequence[str] = (),
    *,
    cache_path: str | Path | None = None,
    templates: dict[str, str] | None = None,
    concurrency: int = 64,
    thinking: bool = False,
    thinking_budget: int | None = None,
    api_key_env: str | None = None,
    calls: Any = None,
    parse: str = "strict",
) -> RewardJudge:
    """``kind`` "offline" (rule judge for synth) or a chat client kind from `cafe.clients`
    ("openai-compatible" for a vLLM-served Qwen3-32B, "openai", "gemini"). ``calls``: a
    cafe.clients.calls.CallPlan (cost ledger, dry run; batch makes sense only offline, since a
    GRPO step waits for its rewards)."""
    if kind == "offline":
        return OfflineRewardJudge()
    from cafe.caller import CallerSpec, client_for

    if not model:
        raise ValueError(f"reward judge {kind!r} needs a judge model name")
    how = CallerSpec(kind, model, tuple(endpoints), concurrency=concurrency, thinking=thinking,
                     key_env=api_key_env, role="reward judge")  # fmt: skip
    client = client_for(how, calls)
    return LLMRewardJudge(
        client,
        templates=load_templates(templates),
        cache=Cache(cache_path),
        concurrency=concurrency,
        thinking=thinking,
        thinking_budget=thinking_budget,
        parse=parse,
    )


def judge_from_recipe(
    recipe: dict[str, Any],
    kind: str | None = None,
    judge_model: str | None = None,
    endpoints: Sequence[str] = (),
    cache: str | Path | None = None,
    concurrency: int | None = None,
    api_key_env: str | None = None,
) -> RewardJudge:
    """The reward judge a recipe's ``judge:`` block names ("offline" or a chat client kind);
    the arguments (from the command line) override the recipe."""
    from cafe.cache import cache_file

    spec = dict(recipe.get("judge") or {})
    return make_reward_judge(
        kind or spec.get("kind", "offline"),
        judge_model or spec.get("model"),
        list(endpoints) or spec.get("endpoints") or [],
        cache_path=cache or spec.get("cache") or cache_file("reward-judge.sqlite"),
        templates=spec.get("templates"),
        concurrency=int(concurrency or spec.get("concurrency", 64)),
        # recipe judge.thinking: true lets a thinking judge think (budget judge.thinking_budget)
        thinking=bool(spec.get("thinking", False)),
        thinking_budget=spec.get("thinking_budget"),
        api_key_env=api_key_env or spec.get("api_key_env"),
        # judge.parse: strict (a final score in [0, 1], as asked) or authors (first number)
        parse=str(spec.get("parse", "strict")),
    )


def _a_number(value: Any) -> bool:
    """A cached score: a number (not a bool, nor a poisoned string)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
