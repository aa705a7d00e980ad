"""LLM-backed stages (the paper's Gemini captioner and Qwen3-32B writers/filters) through the shared
chat clients. Project templates in cafe/training/templates/data_*.txt (overridable); every call at
temperature 0 unless the recipe says otherwise, cached by (client identity, template hash, prompt),
retried when the reply cannot be parsed; a call that never parses marks the item failed with the
reason (it is counted, never silently dropped)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.caller import PLAIN_KEY, Asks, Caller, CallerSpec
from cafe.training.data.rules import DIMENSIONS
from cafe.training.reward_judge import TEMPLATE_DIR, template_hash

STAGES = ("caption", "question", "question_filter", "subquestions", "cot", "cot_filter")
#: a planned sub-question line ("1. Sub-question: ...")
_SUBQ = re.compile(r"^\s*\d+[.)]\s*Sub-question:\s*\S", re.I | re.M)
_JSON = re.compile(r"\{.*\}", re.S)
_EVENT = re.compile(
    r"<event\d+>\s*<description>(.*?)</description>\s*<caption>(.*?)</caption>", re.S | re.I
)
#: "SOURCES, [START, END]" (seconds, an optional "s" after each number)
_SPAN = re.compile(r"^(.*?)[,;:]?\s*\[\s*(\d+(?:\.\d+)?)\s*s?\s*[,-]\s*(\d+(?:\.\d+)?)\s*s?\s*\]")


def caption_events(markup: str | None) -> list[dict[str, Any]]:
    """The captioner's events as annotations: sources (the label), [start, end] (onset,
    offset) from each ``<description>``, its detailed caption kept as an attribute. Events
    whose description holds no span are left out (no time to annotate)."""
    out = []
    for description, caption in _EVENT.findall(markup or ""):
        m = _SPAN.match(description.strip())
        if m is None:
            continue
        sources, start, end = m.group(1).strip(" ,;:"), float(m.group(2)), float(m.group(3))
        out.append({
            "label": sources or "sound", "onset": start, "offset": end,
            "attributes": {"caption": caption.strip()}, "required": False,
        })  # fmt: skip
    return out


def load_data_templates(overrides: dict[str, str] | None = None) -> dict[str, str]:
    out = {}
    for stage in STAGES:
        path = Path((overrides or {}).get(stage) or TEMPLATE_DIR / f"data_{stage}.txt")
        out[stage] = path.read_text(encoding="utf-8")
    return out


def parse_json(text: str | None) -> dict[str, Any] | None:
    m = _JSON.search(text or "")
    if not m:
        return None
    try:
        value = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _choices_text(choices: list[str]) -> str:
    return "\n".join(f"{'ABCDEFGH'[i]}. {c}" for i, c in enumerate(choices))


class LLMStages(Asks):
    """The five LLM stages over one chat client."""

    def __init__(
        self,
        client: Any,
        *,
        cache: Cache | None = None,
        templates: dict[str, str] | None = None,
        retries: int = 3,
        concurrency: int = 32,
    ):
        self.templates = templates or load_data_templates()
        self.hashes = {k: template_hash(v) for k, v in self.templates.items()}
        self.retries = retries
        self.identity = client.identity
        # the one caller: items with the same prompt (two questions on clips the captioner
        # described alike) share one ask, however the replies interleave; a stage that never
        # parses fails its item (counted), it does not stop the pipeline
        kind, _, model = str(client.identity).partition(":")
        how = CallerSpec(kind, model, concurrency=concurrency, role="data LLM")
        self.caller = Caller(how, identity=PLAIN_KEY, cache=cache, client=client, watch=False)

    async def _ask(self, stage: str, parts: list[dict[str, Any]], parse, **shape: str) -> Any:
        """The parsed reply for one prompt (the final answer: a thinking server's reasoning is
        not parsed): from the cache, from the same prompt's ask already in progress, or asked
        now (once per distinct prompt, up to ``retries`` times until it parses)."""

        def read(text: str | None) -> tuple[Any, str | None]:
            value = parse(text)
            return (value, None) if value is not None else (None, "unparseable")

        key = dict(judge=self.identity, template=self.hashes[stage], stage=stage, parts=parts,
                   **shape)  # fmt: skip
        got = await self.caller.ask([{"role": "user", "content": parts}], key, read,
                                    temperature=0.0, max_tokens=2048, keep="value", final=True,
                                    tries=self.retries)  # fmt: skip
        return got.value if got.ok else None

    async def caption(self, clip: dict[str, Any]) -> dict[str, Any] | None:
        """{"caption": the events' text, "events": their annotations (caption_events)}."""

        def parse(text):
            events = _EVENT.findall(text or "")
            caption = " ".join(f"{d.strip()}: {c.strip()}" for d, c in events)
            return {"caption": caption, "events": caption_events(text)} if caption else None

        parts = [
            {"type": "audio", "path": clip["audio"]},
            {"type": "text", "text": self.templates["caption"]},
        ]
        return await self._ask("caption", parts, parse, shape="caption+events")

    async def question(self, clip: dict[str, Any], dimension: str) -> dict[str, Any] | None:
        """A question dict, {"not_suitable": True}, or None when the reply never parsed."""
        prompt = self.templates["question"].format(
            dimension_name=dimension,
            dimension_definition=DIMENSIONS[dimension],
            caption=clip["caption"],
        )

        def parse(text):
            if "not suitable" in (text or "").lower() and "{" not in (text or ""):
                return {"not_suitable": True}
            q = parse_json(text)
            ok = (
                q
                and isinstance(q.get("question"), str)
                and isinstance(q.get("choices"), list)
                and len(q["choices"]) >= 2
                and str(q.get("answer", "")).strip().upper()[:1] in "ABCDEFGH"
            )
            return q if ok else None

        return await self._ask("question", [{"type": "text", "text": prompt}], parse)

    def _qa_parts(
        self, stage: str, clip: dict[str, Any], q: dict[str, Any], **extra: str
    ) -> list[dict[str, Any]]:
        """The stage's template filled with the clip's caption and the question, its choices
        and answer (and ``extra`` fields), as the one text part of a request."""
        prompt = self.templates[stage].format(
            caption=clip["caption"],
            question=q["question"],
            choices=_choices_text(q["choices"]),
            answer=q["answer_text"],
            **extra,
        )
        return [{"type": "text", "text": prompt}]

    async def question_filter(self, clip: dict[str, Any], q: dict[str, Any]) -> dict | None:
        def parse(text):
            v = parse_json(text)
            return v if v and isinstance(v.get("score"), (int, float)) else None

        return await self._ask("question_filter", self._qa_parts("question_filter", clip, q), parse)

    async def subquestions(self, clip: dict[str, Any], q: dict[str, Any]) -> str | None:
        """E.4's first step: the sub-question chain the CoT will follow (numbered lines)."""

        def parse(text):
            lines = [ln.strip() for ln in (text or "").splitlines() if _SUBQ.match(ln)]
            return "\n".join(lines) or None

        return await self._ask("subquestions", self._qa_parts("subquestions", clip, q), parse)

    async def cot(self, clip: dict[str, Any], q: dict[str, Any]) -> str | None:
        """E.4 in two steps: the sub-question chain first, then the MPAR² chain that perceives
        every caption event and answers those sub-questions in order. None when either step
        never parses (the item is counted failed)."""
        chain = await self.subquestions(clip, q)
        if chain is None:
            return None
        return await self._ask(
            "cot",
            self._qa_parts("cot", clip, q, subquestions=chain),
            lambda t: t.strip() if t and "<answer>" in t else None,
        )

    async def cot_filter(self, clip: dict[str, Any], q: dict[str, Any], cot: str) -> dict | None:
        prompt = self.templates["cot_filter"].format(
            caption=clip["caption"], question=q["question"], answer=q["answer_text"], cot=cot
        )

        def parse(text):
            v = parse_json(text)
            if v and all(
                isinstance(v.get(k), (int, float)) for k in ("ReasoningScore", "ReviewScore")
            ):
                return v
            return None

        return await self._ask("cot_filter", [{"type": "text", "text": prompt}], parse)
