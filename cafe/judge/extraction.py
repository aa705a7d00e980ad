"""LLM event-extraction judge (SPEC §2, §8): the probing model reads the model output O, question
Q, answer A and caption C and sorts every audio event into matched / hallucinated / misused /
neutral / missed, as JSON.

Replies are validated against a JSON schema: the paper's six lists (A.2) are required, the two
analysis lists of our template (required_events, all_caption_events) are optional; without
required_events it is derived as matched ∪ missed. Server thinking is kept in the raw reply and
never parsed. An invalid reply is retried with a reminder naming what was wrong; after the
retries the Judgement is ``invalid`` with every raw reply kept; a call that fails gives
``failed``, never cached, so a re-judge retries it while replaying every other decision."""

from __future__ import annotations

import functools
from typing import Any

from cafe.cache import Cache
from cafe.clients.thinking import final_answer, judge_max_tokens
from cafe.judge.base import Asking, Judge, JudgeItem
from cafe.judge.spec import JudgeSpec
from cafe.parsing import first_json
from cafe.prompts import fill, text_template
from cafe.records import Judgement

#: the paper's printed output format (A.2): every reply must hold these
PAPER_KEYS = ("all_reasoning_events", "matched_events", "error_matched", "error_use",
              "neutral_events", "missed_events")  # fmt: skip
#: the analysis lists our template asks for first; optional in a reply
ANALYSIS_KEYS = ("required_events", "all_caption_events")
KEYS = (*ANALYSIS_KEYS, *PAPER_KEYS)
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": list(PAPER_KEYS),
    "properties": {k: {"type": "array", "items": {"type": "string"}} for k in KEYS},
}
TEMPERATURE = 0.0  # fixed: the judge must be deterministic to be cached and compared
PLACEHOLDERS = ("question", "answer", "caption", "output", "choices")
_RETRY_SEP = "\n----- retry -----\n"


def build_prompt(template: str, **fields: str) -> str:
    """Fill the template's ``PLACEHOLDERS`` (one not given: emptied)."""
    return fill(template, **{name: fields.get(name, "") or "" for name in PLACEHOLDERS})


@functools.cache
def _validator() -> Any:
    """Built once: jsonschema.validate re-checks the schema itself on every call, which
    dominated judging."""
    import jsonschema

    return jsonschema.Draft202012Validator(REPLY_SCHEMA)


def parse_reply(text: str | None) -> tuple[dict[str, list[str]] | None, str | None]:
    """(the eight lists, None) for a valid reply (its final answer), else (None, one-line
    reason); a six-list reply gets required_events = matched ∪ missed."""
    had_text = bool(text and text.strip())
    text = final_answer(text)
    if not text:
        return None, "empty reply" if not had_text else "no answer after the thinking"
    obj = first_json(text, "{", lambda o: isinstance(o, dict))
    if obj is None:
        return None, f"no JSON object in reply: {' '.join(text.split())[:80]!r}"
    error = next(iter(sorted(_validator().iter_errors(obj), key=lambda e: list(e.path))), None)
    if error is not None:  # the first schema error, as 'path: message'
        where = "/".join(str(p) for p in error.absolute_path) or "reply"
        return None, f"schema: {where}: {error.message}"
    out = {k: list(obj.get(k) or []) for k in KEYS}
    if "required_events" not in obj:
        out["required_events"] = list(dict.fromkeys(out["matched_events"] + out["missed_events"]))
    return out, None


def reminder(reason: str | None) -> str:
    """Appended to the prompt on a retry: the same prompt at temperature 0 gives the same reply."""
    return (
        f"\n\nYour previous reply could not be used ({reason}). Reply with the JSON object only: "
        "the lists named above, each a list of strings, and nothing else."
    )


class LLMJudge(Asking, Judge):
    """One judge for every chat protocol: ``kind`` is the client kind (openai-compatible, openai,
    gemini), asked through the one caller (cafe.caller)."""

    def __init__(
        self, kind: str, model: str | None = None, endpoints: list[str] | tuple[str, ...] = (),
        template: str | None = None, cache: Cache | None = None, retries: int = 2,
        max_tokens: int = 2048, client: Any = None, thinking: bool = False,
        thinking_budget: int | None = None, **client_options: Any,
    ):  # fmt: skip
        if not model:
            raise ValueError(f"judge {kind!r} needs a model name (--judge-model)")
        self.kind, self.model = kind, model
        self.template, self.template_hash = text_template("extraction", template)
        self.temperature = TEMPERATURE
        self.retries = retries
        self.thinking = bool(thinking)
        self.max_tokens = judge_max_tokens(max_tokens, self.thinking, thinking_budget)
        self.endpoint = JudgeSpec.endpoint_of(endpoints)
        self.connect(self.spec, endpoints, cache, client, **client_options)

    @property
    def spec(self) -> JudgeSpec:
        return JudgeSpec(
            task=self.task, kind=self.kind, model=self.model, template_hash=self.template_hash,
            endpoint=self.endpoint, thinking=self.thinking, max_tokens=self.max_tokens,
            temperature=self.temperature, retries=self.retries,
        )  # fmt: skip

    def prompt_for(self, item: JudgeItem) -> str:
        s = item.sample
        return build_prompt(
            self.template,
            question=s.question,
            answer=s.answer or "",
            caption=item.caption or "",
            output=item.prediction.raw_output or "",
            choices="\n".join(s.choices),
        )

    def describe(self) -> dict:
        return {**super().describe(), "retries": self.retries, "max_tokens": self.max_tokens,
                "thinking": self.thinking}  # fmt: skip

    async def ajudge(self, item: JudgeItem) -> Judgement:
        pred = item.prediction
        if pred.raw_output is None or pred.error:
            return self.failed(item, f"prediction failed: {pred.error or 'no output'}")
        if not item.caption:
            return self.failed(item, "no caption: run `cafe caption` or pass --captions FILE")
        base_prompt = self.prompt_for(item)

        def request(attempt: int, reason: str | None) -> tuple[list[dict], dict[str, Any]]:
            prompt = base_prompt if attempt == 0 else base_prompt + reminder(reason)
            message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
            return [message], {"prompt": prompt, "attempt": attempt}

        got, raws = await self.caller.ask_retrying(
            self.retries, request, parse_reply, catch=True, temperature=self.temperature,
            max_tokens=self.max_tokens,
        )  # fmt: skip
        if got.error is not None:
            return self.failed(item, f"judge call failed: {got.error}")
        if got.ok:
            reason = None if len(raws) == 1 else f"valid on attempt {len(raws)}"
        else:
            reason = f"invalid after {len(raws)} attempts: {got.reason}"
        return self.judgement(
            item, raw_reply=_RETRY_SEP.join(raws),  # earlier invalid attempts kept too
            status="ok" if got.ok else "invalid", reason=reason, **(got.value if got.ok else {}),
        )  # fmt: skip
