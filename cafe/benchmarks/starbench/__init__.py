"""STAR-Bench (ICLR 2026; InternLM/StarBench, scorer ALMEval_code/datasets/starbench.py @
0daf8b0; data Hugging Face internlm/STAR-Bench): perception, spatial and temporal reasoning over
sound, each item asked under several option rotations or clip orders (``runs``), scored as AA
(right runs) and ACR (items right in every run) by the benchmark's own reading of a reply
(``rule``). `cafe score` reads its infer_results.jsonl and `cafe export` writes it (``files``).
``--data``: the dataset root (meta_info/ and the clips), or one meta_info JSON file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, OfficialFile, by_meta
from cafe.benchmarks.starbench import files, rule
from cafe.benchmarks.starbench.runs import TASK_SETS, gold_letter, letter, raw_option
from cafe.records import Prediction, Sample

AA_LABEL = (
    "STAR-Bench: AA = right runs / runs (the value), ACR = items right in every run (beside, "
    "as 'average ACR'), percent; "
)
#: how each task's total is made, for its label
HOW = {
    "pc": "the unweighted mean of its sub-categories' figures",
    "sr": "over every run",
    "tr": "over every run",
}
SUMMARY_LABEL = "STAR-Bench summary: the mean of the three tasks' totals (AA; ACR beside)"
ORDER_LABEL = (
    "consistency, a cafe choice-order figure (not STAR-Bench's) over the benchmark's own option "
    "rotations (perception, spatial): items whose runs all chose the same option; circular "
    "accuracy over those rotations is ACR itself; positional_bias: answers per shown position "
    "against a uniform pick (chi-square)"
)


class StarBench(Benchmark):
    name = "starbench"
    breakdowns = by_meta("alias", "category", "sub-category")
    prediction_keys = ("model_response",)
    prediction_id_keys = ("unique_id",)
    export_format = ExportFormat(
        "model_response", "audio_paths", default_field="raw", writer=files.write_results
    )
    default_prompt_style = "starbench"
    signature = ("id", "task", "question", "options", "audio_paths")
    official_rule = (
        "STAR-Bench's letter reading (a keyword then a letter, else a bracketed letter, an "
        "option's text or a bare capital; else 'Z'; lower-case letters wrong) on the whole "
        "reply; every item run once per option rotation (perception: one per option; spatial: "
        "3) or clip order (temporal: 3); AA over runs, ACR over items; perception macro over "
        "sub-categories; summary = mean of the 3 tasks; a file with a run missing or doubled "
        "is refused"
    )
    licence = "CC BY-NC 4.0 (dataset card); code MIT"
    version_items = {"v1.0": None}
    accuracy_label = (
        "STAR-Bench's letter reading on the answer section, every (item, run) pooled; not the "
        "official figure (AA / ACR per task: the 'official' section)"
    )
    lenient_label = (
        "lenient: the answer mapped to an option first (its letter or text), right when that "
        "option is the gold one; not the official figure"
    )

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        from cafe.benchmarks.starbench.runs import load
        from cafe.errors import CafeUsageError

        if data is None:
            raise CafeUsageError("STAR-Bench needs --data: the dataset root (meta_info/ and the "
                                 "clips, Hugging Face internlm/STAR-Bench)")  # fmt: skip
        return load(data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        if prediction is None or answer not in choices:
            return False
        return rule.read_letter(prediction, choices) == letter(choices.index(answer))

    def choice_is_correct(self, choice: str | None, answer: str, choices: list[str]) -> bool:
        return choice is not None and choice.strip() == answer.strip()

    def read_official_file(self, path: Path, samples: list[Sample]) -> OfficialFile | None:
        return OfficialFile(rows=files.read_results(path, samples))

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        """AA / ACR per task and the summary, over the file's rows (`cafe score`) or over the
        run's first repetition, each reply read whole (what `cafe export` writes)."""
        records = judged.get("file_records")
        ok = [s for s in samples if s.error is None]
        if records is not None:
            replies = {r["unique_id"]: r.get("model_response") for r in records}
            ok = [s for s in ok if s.id in replies]
        else:
            got = {p.sample_id: p for p in predictions if p.run_index == 0}
            replies = {s.id: _reply(got.get(s.id)) for s in ok}
        scored = [(s, _right(s, replies.get(s.id))) for s in ok]
        tasks: dict[str, Any] = {}
        for alias, task in TASK_SETS.items():
            runs_ = [rule.Run(s.meta["item_id"], s.meta.get("category"),
                              s.meta.get("sub-category"), right)
                     for s, right in scored if s.meta["alias"] == alias]  # fmt: skip
            if runs_:
                incomplete = _incomplete(ok, samples, alias)
                figs = rule.macro(runs_) if alias == "pc" else rule.pooled(runs_)
                tasks[alias] = {"title": task.title, **figs, **incomplete}
        totals = {a: t["total"] for a, t in tasks.items() if not t.get("absent_reason")}
        summ = rule.summary(totals)
        variants = {f"{t['title']} ({a})": _figure(t, AA_LABEL + HOW[a]) for a, t in tasks.items()}
        variants["choice order (cafe)"] = {"label": ORDER_LABEL, **choice_order(scored, replies)}
        headline = {"label": SUMMARY_LABEL, "total": None, "tasks": tasks,
                    "summary": summ}  # fmt: skip
        if summ["AA"] is None:
            headline["absent_reason"] = "the summary needs all three tasks scored in full"
        else:
            headline["total"] = {"acc": round(summ["AA"], 2), "items": sum(
                t["total"]["runs"] for t in tasks.values() if "runs" in t["total"])}  # fmt: skip
            headline["average"] = {"ACR": round(summ["ACR"], 2)}
        odd = sum(not isinstance(v, str) for v in replies.values())  # counted wrong
        out = {"rule": self.official_rule, "headline": headline, "variants": variants,
               "non_string_replies": odd}  # fmt: skip
        if records is not None:  # the script scores the stored reading unless asked to re-read
            by_id = {s.id: s for s in ok}
            out["stored_readings_differ"] = sum(
                r.get("prediction") != rule.read_letter(r["model_response"], by_id[u].choices)
                for r in records
                if (u := r["unique_id"]) in by_id and isinstance(r.get("model_response"), str)
            )
        return out


def _reply(p: Prediction | None) -> str:
    """What `cafe export` writes for a run: the whole reply; "" for none (read as "Z")."""
    return p.raw_output if p is not None and p.error is None and p.raw_output is not None else ""


def _right(s: Sample, reply: Any) -> bool:
    """The script's verdict on one row (a reply that is no string: wrong)."""
    return isinstance(reply, str) and rule.read_letter(reply, s.choices) == gold_letter(s)


def _incomplete(ok: list[Sample], samples: list[Sample], alias: str) -> dict[str, Any]:
    """A task with an item not run in full (a bad row, a --limit cut inside an item's runs)
    gets no figure, as the script gives none: the reason, naming the first run missing."""
    have = {s.id for s in ok}
    items = {str(s.meta.get("item_id")): s for s in samples if s.meta.get("alias") == alias}
    short = [f"{i}@{r}" for i, s in items.items()
             for r in range(TASK_SETS[alias].runs({"options": s.choices}))
             if f"{i}@{r}" not in have]  # fmt: skip
    if not short:
        return {}
    return {"absent_reason": f"{len(short)} run(s) not scored, first {short[0]} "
            "(the script refuses a task with a run missing)"}  # fmt: skip


def _figure(task: dict[str, Any], label: str) -> dict[str, Any]:
    """One task as an official-section figure: AA as the value, ACR beside."""
    t = task["total"]
    if task.get("absent_reason") or t.get("AA") is None:
        return {"label": label, "total": None, "absent_reason": task.get("absent_reason", "")}
    return {"label": label, "total": {"acc": t["AA"], "items": t.get("runs")},
            "average": {"ACR": t["ACR"]}}  # fmt: skip


def choice_order(scored: list[tuple[Sample, bool]], replies: dict[str, Any]) -> dict[str, Any]:
    """cafe's consistency and positional bias over the rotated tasks' runs (circular accuracy
    is their ACR). A reply read as no upper-case letter chose no option."""
    from cafe.benchmarks.choice_order import positional_bias

    picks: dict[str, list[int | None]] = {}
    bias = []
    for s, _ in scored:
        if s.meta["alias"] not in ("pc", "sr"):
            continue
        reply = replies.get(s.id)
        said = rule.read_letter(reply, s.choices) if isinstance(reply, str) else rule.NO_LETTER
        pos = said[1:-1] if said != rule.NO_LETTER else ""
        idx = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".find(pos) if pos else -1
        picks.setdefault(s.meta["item_id"], []).append(raw_option(s, idx) if idx >= 0 else None)
        if idx >= 0:
            bias.append((idx, len(s.choices)))
    if not picks:
        return {"total": None, "absent_reason": "no perception or spatial run"}
    same = [None not in v and len(set(v)) == 1 for v in picks.values()]
    acc = round(100 * sum(same) / len(same), 2)
    return {"total": {"acc": acc, "items": len(same)}, "consistency": acc,
            "positional_bias": positional_bias(bias)}  # fmt: skip
