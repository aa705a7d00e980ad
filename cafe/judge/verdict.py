"""A benchmark's official rule when that rule is an LLM judge (SAKURA): the judge sees the
question with its options, the answer and the model's reply, and replies
"Explanation: ...\\nJudgement: correct|incorrect".

`cafe judge-official RUN` runs the judge the run's benchmark declares (``official_judge``, a
VerdictSpec: template, default model, sampling) through the answer judge's machinery (call
cache, batch transport, cost ledger; cafe.judge.answer.judge_accuracy_run) and writes the
benchmark's "official" metrics section with the judged figure as its headline. Every reply is
kept in RUN/official_judgements.jsonl; a reply that does not parse stays there for manual review
and counts as wrong, as the official scripts count it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from cafe.cache import make_key
from cafe.cli_options import command
from cafe.clients.thinking import final_answer
from cafe.judge.answer import AnswerJudge, Verdict
from cafe.judge.base import sha256_text
from cafe.judge.batching import batch_click_options, batch_options, echo_costs
from cafe.judge.extraction import build_prompt
from cafe.records import Prediction, Sample
from cafe.store import RunStore

SECTION = "official"
VERDICTS_FILE = "official_judgements.jsonl"
MAX_TOKENS = 512  # an explanation, then the judgement line
_JUDGEMENT = re.compile(r"judge?ment\s*[:：]\s*\**\s*(correct|incorrect|wrong|right)\b", re.I)


@dataclass(frozen=True)
class VerdictSpec:
    """What a benchmark says about its official LLM judge."""

    name: str  # cache task name
    template: Path  # {question} (with its options), {answer}, {output}
    model: str  # the judge model the official script uses (the default)
    temperature: float = 0.0
    top_p: float | None = None
    #: a sample -> the template's question / answer text (the benchmark's own form)
    fields: Callable[[Sample], dict[str, str]] = field(default=lambda s: {})


def read_judgement(text: str | None) -> bool | None:
    """True / False from a reply's last "Judgement: ..." line; None when none parses."""
    reply = final_answer(text)
    found = _JUDGEMENT.findall(reply or "")
    if not found:
        return None
    return found[-1].lower() in ("correct", "right")


class VerdictJudge(AnswerJudge):
    """An AnswerJudge whose verdict is the benchmark's judgement of the reply: choice is the
    answer when judged correct, None when judged incorrect (status ok); unparseable otherwise."""

    spec: VerdictSpec

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("template", None)
        super().__init__(*args, **kwargs)
        self.template = self.spec.template.read_text(encoding="utf-8")
        self.template_hash = sha256_text(self.template)
        self.max_tokens = MAX_TOKENS if not self.thinking else self.max_tokens + MAX_TOKENS

    async def verdict(self, sample: Sample, pred: Prediction) -> Verdict:
        if pred.raw_output is None or pred.error:
            return Verdict(pred.sample_id, pred.run_index, None, "failed", pred.error)
        fields = self.spec.fields(sample)
        prompt = build_prompt(self.template, question=fields.get("question", sample.question),
                              answer=fields.get("answer", sample.answer or ""),
                              output=pred.raw_output)  # fmt: skip
        extra = {"top_p": self.spec.top_p} if self.spec.top_p is not None else {}
        key = make_key(task=self.spec.name, judge=self.identity, prompt=prompt,
                       template=self.template_hash, max_tokens=self.max_tokens,
                       temperature=self.spec.temperature, thinking=self.thinking,
                       **extra)  # fmt: skip
        hit = self.cache.get(key)
        if hit is not None:
            text = hit["text"]
        else:
            self.calls += 1
            reply = await self.client.achat([{"role": "user", "content": prompt}],
                                            temperature=self.spec.temperature,
                                            max_tokens=self.max_tokens, **extra)  # fmt: skip
            if reply.error or reply.text is None:
                return Verdict(pred.sample_id, pred.run_index, None, "failed", reply.error)
            text = reply.text
            self.cache.put(key, {"text": text})
        judged = read_judgement(text)
        if judged is None:
            return Verdict(pred.sample_id, pred.run_index, None, "unparseable", text)
        choice = sample.answer if judged else None
        return Verdict(pred.sample_id, pred.run_index, choice, "ok", text)


def official_judge_run(
    run_dir: str | Path,
    judge: str,
    judge_model: str | None = None,
    endpoints: tuple[str, ...] = (),
    **options: Any,
) -> dict[str, Any]:
    """Run the run's benchmark's official LLM judge and write its "official" section."""
    from cafe.benchmarks.base import benchmark_class
    from cafe.judge.answer import judge_accuracy_run

    store = RunStore(run_dir)
    name = (store.read_manifest().get("bench") or {}).get("name") or ""
    bench = benchmark_class(name)()
    spec = bench.official_judge
    if spec is None:
        raise ValueError(f"{name or 'this run'}: its official rule is no LLM judge (the "
                         "'official' or 'accuracy' section already holds its figure)")  # fmt: skip
    model = judge_model or spec.model
    cls = type("BoundVerdictJudge", (VerdictJudge,), {"spec": spec})

    def build(samples, preds, verdicts, aj, breakdowns, runs, rule):  # type: ignore[no-untyped-def]
        rows = [{"sample_id": v.sample_id, "run_index": v.run_index, "status": v.status,
                 "correct": v.status == "ok" and v.choice is not None, "raw_reply": v.raw}
                for v in verdicts]  # fmt: skip
        store.path(VERDICTS_FILE).write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
        by_key = {(v.sample_id, v.run_index): v for v in verdicts}
        section = bench.official_section(samples, preds, runs, verdicts=by_key,
                                         judge=aj.identity)  # fmt: skip
        statuses = dict.fromkeys(("ok", "none", "unparseable", "failed"), 0)
        for v in verdicts:
            statuses[v.status] += 1
        section["judge"] = {"judge": aj.identity, "template_hash": aj.template_hash,
                            "temperature": spec.temperature, "top_p": spec.top_p,
                            "thinking": aj.thinking}  # fmt: skip
        section["verdicts"] = statuses
        section["verdicts_file"] = VERDICTS_FILE
        return section

    return judge_accuracy_run(run_dir, judge, model, endpoints, make_judge=cls,
                              build_section=build, section_name=SECTION, **options)  # fmt: skip


@command("judge-official")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--judge", "judge", required=True,
              help="Chat client kind: openai-compatible, openai or gemini.")  # fmt: skip
@click.option("--judge-model", default=None,
              help="Judge model (default: the official script's).")  # fmt: skip
@click.option("--judge-endpoint", "endpoints", multiple=True, help="Judge server base URL.")
@click.option("--judge-concurrency", "concurrency", type=click.IntRange(min=1), default=16,
              show_default=True, help="Judge calls in flight at once.")  # fmt: skip
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False), default=None,
              help="SQLite call cache (default $CAFE_CACHE/judge.sqlite).")  # fmt: skip
@batch_click_options
def judge_official_command(run_dir, judge, judge_model, endpoints, concurrency, cache_path,
                           batch=False, batch_retry="resubmit", batch_poll=30.0,
                           batch_no_wait=False, prices=None) -> None:  # fmt: skip
    """The official LLM-judged figure of RUN_DIR, for a benchmark whose official rule is an LLM
    judge (SAKURA): written to metrics.json "official" as its headline, beside the labelled
    deterministic figures; every judge reply in RUN_DIR/official_judgements.jsonl."""
    try:
        sec = official_judge_run(run_dir, judge, judge_model, tuple(endpoints),
                                 concurrency=concurrency, cache=cache_path, batch=batch,
                                 prices=prices, batch_options=batch_options(
                                     batch_retry, batch_poll, batch_no_wait))  # fmt: skip
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise click.ClickException(str(e)) from None
    h = sec["headline"]
    if h.get("total"):
        t = h["total"]
        click.echo(f"{h['label']}\n  total {t['acc']:.2f} ({t['correct']}/{t['total']}); "
                   f"verdicts {sec['verdicts']}")  # fmt: skip
    echo_costs(sec["calls"], None)
