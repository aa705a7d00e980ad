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

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.cache import text_entry
from cafe.clients.thinking import final_answer
from cafe.jsontext import strict_dumps
from cafe.judge.answer import AnswerJudge, Verdict
from cafe.judge.base import sha256_text
from cafe.judge.extraction import build_prompt
from cafe.locking import writes_folder
from cafe.records import Prediction, Sample
from cafe.store import RunStore, replace_file

SECTION = "official"
VERDICTS_FILE = "official_judgements.jsonl"
EMBEDDING_FILE = "official_embedding.jsonl"
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
    #: the reply budget sent (None: none sent, the server's default, as SAKURA's script)
    max_tokens: int | None = MAX_TOKENS
    #: a system message sent before the prompt (None: the prompt alone)
    system: str | None = None
    #: the text judged in place of a null or failed output (None: no call, the item's verdict
    #: fails; MMAU-Pro's script judges "" where the output is missing)
    null_output: str | None = None
    #: a sample -> the template's question / answer text (the benchmark's own form)
    fields: Callable[[Sample], dict[str, str]] = field(default=lambda s: {})
    #: a reply -> its value (SAKURA: True / False), None when it does not parse
    reader: Callable[[str | None], Any] = field(default=lambda text: read_judgement(text))
    #: which items the judge sees (the others get no call)
    applies: Callable[[Sample], bool] = field(default=lambda s: True)


def read_judgement(text: str | None) -> bool | None:
    """True / False from a reply's last "Judgement: ..." line; None when none parses."""
    reply = final_answer(text)
    found = _JUDGEMENT.findall(reply or "")
    if not found:
        return None
    return found[-1].lower() in ("correct", "right")


@dataclass
class Judged(Verdict):
    """A verdict with the value the benchmark's reader gave the reply."""

    value: Any = None


def output_hash(p: Prediction) -> str:
    return sha256_text(p.raw_output or "")[:16]


class VerdictJudge(AnswerJudge):
    """An AnswerJudge whose verdict is the benchmark's reading of the judge's reply (``value``;
    status ok), unparseable when the reader finds nothing. Items the spec does not apply to are
    decided without a call (status skipped)."""

    verdict_spec: VerdictSpec  # the benchmark's rule (``spec``: the JudgeSpec, as every judge)

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("template", None)
        super().__init__(*args, **kwargs)
        vs = self.verdict_spec
        self.template = vs.template.read_text(encoding="utf-8")
        self.template_hash = sha256_text(self.template)
        budget = vs.max_tokens
        if budget is None:  # none sent, unless a thinking judge needs its own budget
            self.max_tokens = self.max_tokens if self.thinking else None
        else:
            self.max_tokens = budget if not self.thinking else self.max_tokens + budget
        # the judge's identity as stored with its verdicts: this rule's task, template, budget
        self.spec = dataclasses.replace(
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
        if output is None and vs.null_output is None:
            return Judged(pred.sample_id, pred.run_index, None, "failed",
                          pred.error or "null output")  # fmt: skip
        fields = vs.fields(sample)
        prompt = build_prompt(self.template, question=fields.get("question", sample.question),
                              answer=fields.get("answer", sample.answer or ""),
                              output=vs.null_output if output is None else output)  # fmt: skip
        extra = {"top_p": vs.top_p} if vs.top_p is not None else {}
        if vs.system is not None:  # part of the request, so of its cache key
            extra["system"] = vs.system
        # the judge's spec (this rule's task, template, budget, temperature) keys the call, as
        # for every judge; top_p is this rule's own sampling setting, so it is in the request
        key = self.spec.call_key(prompt=prompt, **extra)
        hit = self.cache.get(key, text_entry)
        if hit is not None:
            text = hit["text"]
        else:
            self.calls += 1
            system = [{"role": "system", "content": vs.system}] if vs.system is not None else []
            sampling = {"top_p": vs.top_p} if vs.top_p is not None else {}
            reply = await self.client.achat([*system, {"role": "user", "content": prompt}],
                                            temperature=vs.temperature,
                                            max_tokens=self.max_tokens, **sampling)  # fmt: skip
            if reply.error or reply.text is None:
                return Judged(pred.sample_id, pred.run_index, None, "failed", reply.error)
            text = reply.text
            self.cache.put(key, {"text": text})
        value = self.verdict_spec.reader(text)
        if value is None:
            return Judged(pred.sample_id, pred.run_index, None, "unparseable", text)
        return Judged(pred.sample_id, pred.run_index, None, "ok", text, value=value)


def _read_kept(store: RunStore, name: str, preds: list[Prediction]) -> dict[tuple[str, int], Any]:
    """Rows an earlier `cafe judge-official` kept in RUN/<name>, for the predictions whose output
    is still the one judged (a re-run item's new output is not covered)."""
    path = store.path(name)
    if not path.exists():
        return {}
    now = {(p.sample_id, p.run_index): output_hash(p) for p in preds}
    out = {}
    for line in path.read_text(encoding="utf-8").split("\n"):  # JSON lines end at \n only
        if not line.strip():
            continue
        row = json.loads(line)
        key = (row["sample_id"], row["run_index"])
        if now.get(key) == row.get("output"):
            out[key] = row
    return out


def _write_kept(store: RunStore, name: str, rows: list[dict[str, Any]]) -> None:
    """One transaction (cafe.store.replace_file): a kill or a full disk never tears it."""
    from cafe.redaction import scrub_text

    text = "".join(strict_dumps(r, ensure_ascii=False) + "\n" for r in rows)
    replace_file(store.path(name), lambda f: f.write(scrub_text(text)))


def embed_run(store: RunStore, bench: Any, embedder: str) -> dict[tuple[str, int], Any]:
    """The embedding path: each applicable output's nearest choice, by ``embedder``; kept in
    RUN/official_embedding.jsonl. Raises EmbedderUnavailable when the model cannot load."""
    from cafe.benchmarks.embedding_match import nearest_choices

    by_id = {s.id: s for s in store.samples()}
    preds = [p for p in store.predictions()
             if p.sample_id in by_id and bench.embedding_applies(by_id[p.sample_id])]  # fmt: skip
    # a null or failed output is embedded as "", as the official script fills nulls
    todo = preds
    picks = nearest_choices(embedder, [(p.raw_output if p.error is None and p.raw_output
                                        is not None else "", by_id[p.sample_id].choices)
                                       for p in todo])  # fmt: skip
    rows = [{"sample_id": p.sample_id, "run_index": p.run_index, "output": output_hash(p),
             "choice": c, "embedder": embedder}
            for p, c in zip(todo, picks, strict=True)]  # fmt: skip
    _write_kept(store, EMBEDDING_FILE, rows)
    return {(r["sample_id"], r["run_index"]): r for r in rows}


@writes_folder("cafe judge-official")  # its files and section written by the one writer
def official_judge_run(
    run_dir: str | Path,
    judge: str | None,
    judge_model: str | None = None,
    endpoints: tuple[str, ...] = (),
    embedder: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the run's benchmark's official model paths (its LLM judge with ``judge``, its
    embedding match with ``embedder``) and write its "official" section. Results of an earlier
    call for the other path are kept (RUN/official_*.jsonl) while their outputs are unchanged."""
    from cafe.benchmarks.base import benchmark_class
    from cafe.judge.answer import judge_accuracy_run

    store = RunStore(run_dir)
    name = (store.read_manifest().get("bench") or {}).get("name") or ""
    bench = benchmark_class(name)()
    spec = bench.official_judge
    if judge is not None and spec is None:
        raise ValueError(f"{name or 'this run'}: its official rule has no LLM judge")
    if embedder is not None and bench.official_embedder is None:
        raise ValueError(f"{name or 'this run'}: its official rule has no embedding path")
    if judge is None and embedder is None:
        raise ValueError("nothing to run: pass --judge (the official LLM judge) or --embedder "
                         "(the official embedding match)")  # fmt: skip
    preds = store.predictions()
    extras: dict[str, Any] = {}
    embedded = _read_kept(store, EMBEDDING_FILE, preds)
    if embedder is not None:
        embedded = embed_run(store, bench, embedder)
    if embedded:
        extras["embedded"] = embedded
        extras["embedder"] = next(iter(embedded.values()))["embedder"]
    if judge is None:
        kept = _read_kept(store, VERDICTS_FILE, preds)
        if kept:
            extras["verdicts"] = {
                k: Judged(k[0], k[1], None, r["status"], r.get("raw_reply"), value=r.get("value"))
                for k, r in kept.items()
            }
            extras["judge"] = next(iter(kept.values())).get("judge")
        samples = store.samples()
        section = bench.official_section(samples, preds, (store.read_manifest() or {}).get("runs"),
                                         **extras)  # fmt: skip
        store.update_metrics(SECTION, section)
        return section
    assert spec is not None
    model = judge_model or spec.model
    cls = type("BoundVerdictJudge", (VerdictJudge,), {"verdict_spec": spec})
    by_pred = {(p.sample_id, p.run_index): p for p in preds}

    def build(samples, preds, verdicts, aj, breakdowns, runs, rule):  # type: ignore[no-untyped-def]
        rows = [{"sample_id": v.sample_id, "run_index": v.run_index, "status": v.status,
                 "value": getattr(v, "value", None), "raw_reply": v.raw, "judge": aj.identity,
                 "output": output_hash(by_pred[(v.sample_id, v.run_index)])}
                for v in verdicts if (v.sample_id, v.run_index) in by_pred]  # fmt: skip
        _write_kept(store, VERDICTS_FILE + ".new", rows)  # kept only once the section is
        by_key = {(v.sample_id, v.run_index): v for v in verdicts}
        section = bench.official_section(samples, preds, runs, verdicts=by_key,
                                         judge=aj.identity, **extras)  # fmt: skip
        statuses = dict.fromkeys(("ok", "none", "unparseable", "failed"), 0)
        for v in verdicts:
            statuses[v.status] = statuses.get(v.status, 0) + 1
        section["judge"] = {"judge": aj.identity, "template_hash": aj.template_hash,
                            "temperature": spec.temperature, "top_p": spec.top_p,
                            "thinking": aj.thinking}  # fmt: skip
        section["spec"] = aj.spec.to_dict()
        section["verdicts"] = statuses
        section["verdicts_file"] = VERDICTS_FILE
        return section

    section = judge_accuracy_run(run_dir, judge, model, endpoints, make_judge=cls,
                                 build_section=build, section_name=SECTION,
                                 selective=True, **options)  # fmt: skip
    new = store.path(VERDICTS_FILE + ".new")
    if "pending" in section:  # calls left in a batch are no verdicts: nothing kept from them
        new.unlink(missing_ok=True)
    elif new.exists():
        new.replace(store.path(VERDICTS_FILE))
    return section


def __getattr__(name: str) -> Any:
    # the command lives in the command-line layer (cafe.judge.cli); importable here
    if name == "judge_official_command":
        from cafe.judge.cli import judge_official_command

        return judge_official_command
    raise AttributeError(name)
