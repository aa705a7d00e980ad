"""A benchmark's official rule when that rule is an LLM judge (SAKURA): the judge sees the
question with its options, the answer and the model's reply, and replies
"Explanation: ...\\nJudgement: correct|incorrect".

`cafe judge-official RUN` runs the judge the benchmark declares (``official_judge``, a
VerdictSpec: template, default model, sampling) through the answer judge's machinery and writes
the "official" section with the judged figure as its headline. Every reply is kept in
RUN/official_judgements.jsonl; one that does not parse stays there for manual review and counts
as wrong, as the official scripts count it."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from cafe.benchmarks.embedding_match import nearest_choices
from cafe.benchmarks.official_judge import Judged, VerdictSpec
from cafe.errors import CafeUsageError
from cafe.judge.answer import AnswerJudge
from cafe.judge.extraction import build_prompt
from cafe.prompts import sha256_text
from cafe.records import Prediction, Sample, Verdict

VERDICTS_FILE = "official_judgements.jsonl"
EMBEDDING_FILE = "official_embedding.jsonl"


def output_hash(p: Prediction) -> str:
    return sha256_text(p.raw_output or "")[:16]


class VerdictJudge(AnswerJudge):
    """An AnswerJudge whose verdict is the benchmark's reading of the judge's reply (``value``;
    status ok), unparseable when the reader finds nothing. Items the spec does not apply to are
    decided without a call (status skipped)."""

    verdict_spec: VerdictSpec  # the benchmark's rule (``spec``: the JudgeSpec, as every judge)

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("template", None)
        if not (args[1] if len(args) > 1 else kwargs.get("model")):  # no official one: yours
            raise CafeUsageError(f"{self.verdict_spec.name}: the benchmark names no judge model "
                                 "of its own: pass --judge-model NAME")  # fmt: skip
        super().__init__(*args, **kwargs)
        vs = self.verdict_spec
        self.template = vs.template.read_text(encoding="utf-8")
        self.templates = {name: path.read_text(encoding="utf-8") for name, path in vs.templates}
        # every template the judge may use is part of its identity (one: that template's hash)
        self.template_hash = sha256_text("\n\n".join([self.template, *self.templates.values()]))
        if not self.thinking:  # the rule's budget (none: none sent)
            self.max_tokens = vs.max_tokens
        elif vs.max_tokens is not None:  # a thinking judge's own budget, plus the rule's
            self.max_tokens += vs.max_tokens
        # the judge's identity as stored with its verdicts: this rule's task, template, budget
        self.spec = self.caller.identity = dataclasses.replace(
            self.spec, task=vs.name, template_hash=self.template_hash,
            max_tokens=self.max_tokens, temperature=vs.temperature,
        )  # fmt: skip

    def decide(self, sample: Sample, pred: Prediction) -> Verdict | None:  # type: ignore[override]
        if self.verdict_spec.applies(sample):
            return None
        return Judged(pred.sample_id, pred.run_index, None, "skipped", None, source="rule")

    async def verdict(self, sample: Sample, pred: Prediction) -> Verdict:
        vs = self.verdict_spec
        output = pred.raw_output if pred.raw_output is not None and not pred.error else None
        ids = (pred.sample_id, pred.run_index, None)
        if output is None and vs.null_output is None:
            return Judged(*ids, "failed", pred.error or "null output")
        fields = vs.fields(sample)
        name = vs.template_for(sample)
        template = self.template if name is None else self.templates[name]
        prompt = build_prompt(template, question=fields.get("question", sample.question),
                              answer=fields.get("answer", sample.answer or ""),
                              output=vs.null_output if output is None
                              else vs.output_form(sample, output))  # fmt: skip
        # top_p and the system prompt are this rule's own: in the request, so in its cache key
        sampling = {"top_p": vs.top_p} if vs.top_p is not None else {}
        system = [{"role": "system", "content": vs.system}] if vs.system is not None else []
        extra = {**sampling, **({"system": vs.system} if system else {})}

        def parse(text: str | None) -> tuple[Any, str | None]:
            value = vs.reader(text)
            return (value, None) if value is not None else (None, "unparseable")

        def request(attempt: int, _: str | None, **also: int) -> tuple[Any, dict[str, Any]]:
            text_in = prompt if attempt == 0 else prompt + vs.reminder
            again = {"attempt": attempt} if attempt > 1 else {}  # each retry its own key
            messages = [*system, {"role": "user", "content": text_in}]
            return messages, {"prompt": text_in, **extra, **again, **also}

        how = {"temperature": vs.temperature, "max_tokens": self.max_tokens, **sampling}
        ask = partial(self.caller.ask_retrying, parse=parse, **how)
        if vs.samples is not None:  # several replies, each its own call: their texts the value
            texts: list[str] = []
            for k in range(vs.samples):
                got, _ = await ask(0, partial(request, sample=k))  # ``sample``: in the key
                if not got.ok:  # one failed sample fails the verdict (its siblings stay cached)
                    return Judged(*ids, "failed" if got.error else "unparseable",
                                  got.error or got.text)  # fmt: skip
                texts.append((got.text or "").strip())
            return Judged(*ids, "ok", "\n---\n".join(texts), value=texts)
        got, raws = await ask(vs.retries, request)
        if got.error is not None:
            return Judged(*ids, "failed", got.error)
        if got.ok:  # the raw reply is the one read (earlier attempts: counted)
            return Judged(*ids, "ok", got.text, value=got.value, attempts=len(raws))
        return Judged(*ids, "unparseable", "\n---\n".join(raws), attempts=len(raws))


def kept_rows(rows: list[dict[str, Any]], preds: list[Prediction]) -> dict[tuple[str, int], Any]:
    """Rows an earlier `cafe judge-official` kept (RUN/official_*.jsonl), for the predictions
    whose output is still the one judged (a re-run item's new output is not covered)."""
    now = {(p.sample_id, p.run_index): output_hash(p) for p in preds}
    return {
        (r["sample_id"], r["run_index"]): r
        for r in rows
        if now.get((r["sample_id"], r["run_index"])) == r.get("output")
    }


def embedding_rows(
    samples: list[Sample], preds: list[Prediction], bench: Any, embedder: str
) -> list[dict[str, Any]]:
    """The embedding path: each applicable output's nearest choice, by ``embedder`` (the rows
    of RUN/official_embedding.jsonl). Raises EmbedderUnavailable when the model cannot load."""
    by_id = {s.id: s for s in samples}
    todo = [p for p in preds
            if p.sample_id in by_id and bench.embedding_applies(by_id[p.sample_id])]  # fmt: skip
    # a null or failed output is embedded as "", as the official script fills nulls
    picks = nearest_choices(embedder, [((p.raw_output or "") if p.error is None else "",
                                        by_id[p.sample_id].choices) for p in todo])  # fmt: skip
    return [{"sample_id": p.sample_id, "run_index": p.run_index, "output": output_hash(p),
             "choice": c, "embedder": embedder}
            for p, c in zip(todo, picks, strict=True)]  # fmt: skip
