"""Big Bench Audio (Artificial Analysis; Hugging Face ArtificialAnalysis/big_bench_audio, MIT):
1,000 spoken BIG-Bench Hard questions, 250 in each of formal_fallacies, navigate,
object_counting and web_of_lies. Rows: audio (the spoken question), category, official_answer,
id; the question's words are not in the data. ``--data``: a local HF copy (parquet or
save_to_disk), the dataset folder (metadata.jsonl or metadata.csv with ``file_name``), or a JSON
/ JSONL file of such rows (``audio`` or ``file_name`` a path relative to it).

Official rule (the release post's "Evaluation Methodology"; no script is published): a spoken
reply is transcribed first, then an LLM evaluator given the question, the official answer and the
candidate answer replies CORRECT or INCORRECT; accuracy is the mean of three runs. Here the
evaluator is `cafe judge-official RUN --judge KIND --judge-model NAME` with our own prompt
carrying the same rule (templates/bigbenchaudio_evaluator.txt). The evaluator model is yours (the
post names none) and is named in the figure. Since no question text exists, the evaluator sees
what kind of question it was (the category's task, CATEGORY_TASKS), the official answer and the
candidate. A reply that is neither label is asked again (EVALUATOR_RETRIES) and then counted as
failed: named, and left out of the denominator, never scored."""

from __future__ import annotations

import asyncio
import csv
import statistics
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark, OfficialFile, by_meta
from cafe.records import InputError, Prediction, Problem, Sample

NAME = "bigbenchaudio"
#: the category -> what the evaluator is told the question was (no question text is published)
CATEGORY_TASKS = {
    "formal_fallacies": "a formal fallacies question: is an argument, given its premises, "
    "deductively valid or invalid?",
    "navigate": "a navigation question: after following the instructions, does one return to "
    "the starting point (yes or no)?",
    "object_counting": "an object counting question: how many items of a kind does the speaker "
    "have?",
    "web_of_lies": "a web of lies question: from statements about who lies and who tells the "
    "truth, does a given person tell the truth (yes or no)?",
}
#: the text the model gets with the clip (the spoken clip is the question)
QUESTION = "Answer the question asked in the audio."
RUNS = 3  # the release post's figures are the mean of three runs
EVALUATOR_RETRIES = 2  # a reply that is neither label is asked again twice, then failed
REMINDER = "\n\nYour reply must be the single word CORRECT or the single word INCORRECT."
LABELS = {"CORRECT": True, "INCORRECT": False}
_MARKUP = " \t\r\n*_`'\".:!"

#: the results file (`cafe export`, `cafe score`): the dataset's row, the candidate answer; a
#: file may add ``run`` (0, 1, 2: several runs in one file), ``evaluator_reply`` (the
#: evaluator's reply to that row) and ``evaluator`` (which evaluator)
LAYOUT = ("id", "category", "official_answer", "file_name", "candidate_answer")
PREDICTION_KEY = "candidate_answer"


def read_label(text: str | None) -> bool | None:
    """The evaluator's reply: True for CORRECT, False for INCORRECT, in any case and with markup
    or a full stop around it; None for anything else (empty, both, a label inside prose)."""
    from cafe.clients.thinking import final_answer

    word = (final_answer(text) or "").strip(_MARKUP).upper()
    return LABELS.get(word)


def evaluator_spec() -> Any:
    """The evaluator call, declared once (cafe.benchmarks.official_judge.VerdictSpec): our
    prompt, the category's task in the question's place, the official answer, the whole reply;
    greedy, a short reply budget; a reply neither label asked again with a reminder."""
    from cafe.benchmarks.official_judge import VerdictSpec

    return VerdictSpec(
        name="bigbenchaudio-evaluator",
        template=Path(__file__).with_name("templates") / "bigbenchaudio_evaluator.txt",
        model="",  # the post names none: the user's --judge-model
        temperature=0.0,
        max_tokens=16,
        fields=lambda s: {"question": question_seen(s), "answer": s.answer or ""},
        reader=read_label,
        retries=EVALUATOR_RETRIES,
        reminder=REMINDER,
    )


def question_seen(sample: Sample) -> str:
    """What the evaluator is told in the question's place: the category's task."""
    cat = str(sample.meta.get("category"))
    return CATEGORY_TASKS.get(cat, f"a question of the category {cat!r}")


# ---- loading ---------------------------------------------------------------------------------


def _rows(data: Path) -> tuple[list[tuple[int, Any]], Path, str | None, list[Problem], tuple]:
    """(position, row) pairs, the folder paths are relative to, sha256, problems, extra roots."""
    from cafe.benchmarks import hf_copy
    from cafe.benchmarks.metadata import read_rows, sha256_file

    if not data.exists():
        raise InputError(Problem(str(data), "bigbenchaudio data not found"))
    if hf_copy.is_hf_copy(data):
        rows, base, _ = hf_copy.load_rows(data, "audio")
        return list(enumerate(rows, 1)), base, None, [], (hf_copy.audio_dir(data),)
    path = data
    if data.is_dir():
        found = [data / n for n in ("metadata.jsonl", "metadata.json", "metadata.csv")]
        found = [f for f in found if f.is_file()] or sorted(
            [*data.glob("*.json"), *data.glob("*.jsonl")]
        )
        if len(found) != 1:
            msg = "no metadata.jsonl / .csv, HF copy or single JSON / JSONL file in this folder"
            raise InputError(Problem(str(data), msg))
        path = found[0]
    if path.suffix == ".csv":
        try:
            with path.open(encoding="utf-8-sig", newline="") as f:
                rows = list(enumerate(csv.DictReader(f), 1))
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise InputError(Problem(str(path), f"cannot read metadata ({e})")) from None
        return rows, path.parent, sha256_file(path), [], ()
    got, problems = read_rows(path)
    return got, path.parent, sha256_file(path), problems, ()


def load(data: str | Path, version: str | None, audio_root: str | None) -> LoadedBenchmark:
    from cafe.audio import contained_audio
    from cafe.benchmarks.metadata import (
        _unique_id,
        check_signature,
        fingerprint_version,
        unknown_release,
    )

    source = Path(data).expanduser()
    rows, base, sha, problems, extra = _rows(source)
    check_signature(NAME, [r for _, r in rows], str(source))
    if audio_root is not None:
        base = Path(audio_root).expanduser()
    if not version:  # no release hash is known: the content fingerprint tells files apart
        version = fingerprint_version([r for _, r in rows], ("audio", "file_name"))
        problems.append(unknown_release(str(source), version))
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    taken = {str(r["id"]) for _, r in rows if isinstance(r, dict) and r.get("id") is not None}
    for pos, row in rows:
        if not isinstance(row, dict) or row.get("id") in (None, ""):
            problems.append(Problem(str(source), f"item {pos} has no id", field="id"))
            continue
        errors: list[tuple[str, str]] = []
        sid = _unique_id(str(row["id"]), pos, seen, taken, errors)
        audio: list[str] = []
        field = "audio" if row.get("audio") not in (None, "") else "file_name"
        path, outside = contained_audio(
            row.get(field), [base, *extra], file=str(source), sample_id=sid, field=field
        )  # type: ignore[arg-type]
        if outside is not None:
            errors.append((field, outside.message))
        else:
            audio.append(str(path))
        answer = given = row.get("official_answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)  # object_counting's answers may be stored as numbers
        if not isinstance(answer, str) or not answer.strip():
            errors.append(("official_answer", "missing field"))
            answer = None
        category = row.get("category")
        if not isinstance(category, str) or not category:
            errors.append(("category", "missing field"))
        # the row's own fields as given, for the results file `cafe export` writes (LAYOUT)
        meta = {"category": category, "id": row["id"], "official_answer": given}
        if isinstance(row.get("file_name"), str):
            meta["file_name"] = row["file_name"]
        s = Sample(sid, NAME, version, QUESTION, [], answer, audio, meta)
        for f, m in errors:
            problems.append(Problem(str(source), m, sid, f))
        s.error = "; ".join(f"{f}: {m}" for f, m in errors) or None
        samples.append(s)
    return LoadedBenchmark(samples, version, str(source), sha, problems)


# ---- the official figure -----------------------------------------------------------------------

CORRECT, INCORRECT, UNANSWERED = "correct", "incorrect", "unanswered"
JUDGE_FAILED, NOT_JUDGED = "judge_failed", "not_judged"
NOT_RUN = (
    "official rule (LLM evaluator): not run; `cafe judge-official RUN --judge KIND "
    "--judge-model NAME` runs it"
)
COUNTED_WRONG_LABEL = (
    "evaluator failures counted wrong: the replies that were neither label after their "
    "retries counted INCORRECT; a lower bound, NOT the official figure"
)


def outcomes_of_run(
    samples: list[Sample], predictions: list[Prediction], runs: int | None, verdicts: Any
) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(item, run) -> (outcome, evaluator reply) for a run folder: no usable reply is
    unanswered (wrong, no call); else the evaluator's verdict, failed when it read none."""
    from cafe.benchmarks.official import run_ids

    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    out: dict[tuple[str, int], tuple[str, str | None]] = {}
    for s in samples:
        for r in run_ids(predictions, runs):
            p = by_key.get((s.id, r))
            if p is None or p.error is not None or p.raw_output is None:
                out[(s.id, r)] = (UNANSWERED, None)
                continue
            v = (verdicts or {}).get((s.id, r))
            if v is None:
                out[(s.id, r)] = (NOT_JUDGED, None)
            elif v.status == "ok":
                out[(s.id, r)] = (CORRECT if v.value else INCORRECT, v.raw)
            else:  # unparseable after its retries, or a call that failed
                out[(s.id, r)] = (JUDGE_FAILED, v.raw)
    return out


def outcomes_of_file(
    samples: list[Sample], records: list[dict[str, Any]]
) -> tuple[dict[tuple[str, int], tuple[str, str | None]], str | None]:
    """(item, run) -> (outcome, evaluator reply) for a results file, and the evaluator it names:
    each row's ``evaluator_reply`` read by the rule (a row without one is not judged)."""
    known = {s.id for s in samples}
    out: dict[tuple[str, int], tuple[str, str | None]] = {}
    evaluator = None
    for row in records:
        sid, run = str(row.get("id")), row.get("run", 0)
        if sid not in known or not isinstance(run, int):
            continue
        evaluator = evaluator or row.get("evaluator")
        answer = row.get(PREDICTION_KEY)
        reply = row.get("evaluator_reply")
        if not isinstance(answer, str):
            out[(sid, run)] = (UNANSWERED, None)
        elif not isinstance(reply, str):
            out[(sid, run)] = (NOT_JUDGED, None)
        else:
            label = read_label(reply)
            out[(sid, run)] = (JUDGE_FAILED if label is None else
                               CORRECT if label else INCORRECT, reply)  # fmt: skip
    runs = sorted({r for _, r in out}) or [0]
    for s in samples:  # an item the file lacks is unanswered in each of its runs
        for r in runs:
            out.setdefault((s.id, r), (UNANSWERED, None))
    return out, evaluator


def _acc(cells: list[str]) -> float | None:
    """Percent correct over the pairs with a verdict (unrounded); None over none."""
    scored = [c for c in cells if c != JUDGE_FAILED]
    return 100 * sum(c == CORRECT for c in scored) / len(scored) if scored else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def figures(
    samples: list[Sample], outcomes: dict[tuple[str, int], tuple[str, str | None]],
    failed_as_wrong: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Each run's accuracy and their mean, per category too. Unanswered pairs count wrong;
    evaluator failures are left out of every denominator (``failed_as_wrong``: counted wrong)."""
    cats = {s.id: str(s.meta.get("category")) for s in samples if s.answer is not None}
    runs = sorted({r for _, r in outcomes})
    by_run: dict[int, list[str]] = {r: [] for r in runs}
    by_cat: dict[str, dict[int, list[str]]] = {}
    for (sid, r), (o, _) in outcomes.items():
        if sid not in cats:
            continue
        o = INCORRECT if failed_as_wrong and o == JUDGE_FAILED else o
        o = INCORRECT if o == UNANSWERED else o
        by_run[r].append(o)
        by_cat.setdefault(cats[sid], {x: [] for x in runs})[r].append(o)

    def cell(per_run: dict[int, list[str]]) -> dict[str, Any]:
        # no pooled correct / total: with failures left out, runs differ in denominator and
        # a pooled fraction is not the mean of the runs
        accs = [_acc(per_run[r]) for r in runs]
        got = [a for a in accs if a is not None]
        return {"acc": _round(statistics.fmean(got)) if got else None,
                "runs": [_round(a) for a in accs],
                "items": sum(c != JUDGE_FAILED for v in per_run.values() for c in v)}  # fmt: skip

    total = cell(by_run)
    return {
        "total": total if total["acc"] is not None else None,
        # MMAU-Pro's shape, which reports show as a table: per category, its mean of the runs
        "categories": {
            k: {
                "path": f"mean of {len(runs)} runs",
                "n": c["items"],
                "score": c["acc"],
                "runs": c["runs"],
            }
            for k, c in ((k, cell(by_cat[k])) for k in sorted(by_cat))
        },
        "runs": len(runs),
    }


def official_figures(
    samples: list[Sample], outcomes: dict[tuple[str, int], tuple[str, str | None]],
    evaluator: str | None, rule: str,
) -> dict[str, Any]:  # fmt: skip
    """The "official" section from every pair's outcome: absent until every answered pair has
    the evaluator's verdict; then the mean of the runs, with the failures named."""
    counts = {k: 0 for k in (CORRECT, INCORRECT, UNANSWERED, JUDGE_FAILED, NOT_JUDGED)}
    for o, _ in outcomes.values():
        counts[o] += 1
    if counts[NOT_JUDGED] or evaluator is None and counts[CORRECT] + counts[INCORRECT] == 0:
        why = f"{counts[NOT_JUDGED]} answered (item, run) pairs without the evaluator's verdict; "
        return {"rule": rule, "headline": {"label": why + NOT_RUN, "total": None},
                "outcomes": counts}  # fmt: skip
    evaluator = evaluator or "not named in the file"
    failed = sorted(f"{sid}#run{r}" for (sid, r), (o, _) in outcomes.items() if o == JUDGE_FAILED)
    head = figures(samples, outcomes)
    n = head["runs"]
    label = (f"official rule: LLM evaluator {evaluator}, CORRECT / INCORRECT against the official "
             f"answer; accuracy per run, mean of {n} run(s)")  # fmt: skip
    if n != RUNS:
        label += f" (the release post's figures are the mean of {RUNS})"
    label += "; the evaluator saw the category's task, not the question's words (none published)"
    if failed:
        label += (f"; {len(failed)} pairs whose evaluator replies were neither label after "
                  f"{EVALUATOR_RETRIES} retries left out of the denominator (named)")  # fmt: skip
    headline = {"label": label, **head, "evaluator": evaluator, "judge_failed": failed,
                "unanswered": counts[UNANSWERED]}  # fmt: skip
    variants = {}
    if failed:
        variants["failed_counted_wrong"] = {"label": COUNTED_WRONG_LABEL,
                                            **figures(samples, outcomes, True)}  # fmt: skip
    return {"rule": rule, "headline": headline, "variants": variants, "outcomes": counts}


class BigBenchAudio(Benchmark):
    """Big Bench Audio: open spoken questions; breakdown category; the official figure is the
    LLM evaluator's (`cafe judge-official`), the mean of the runs (``cafe run --runs 3``)."""

    name = NAME
    breakdowns = by_meta("category")
    signature = ("category", "official_answer")
    prediction_keys = (PREDICTION_KEY, "response", "model_output", "prediction")
    export_format = ExportFormat(PREDICTION_KEY, "file_name", default_field="raw", layout=LAYOUT)
    official_rule = (
        "LLM evaluator (the release post's rule; its model is yours, named in the figure): the "
        "reply (a spoken one transcribed first) CORRECT when consistent with the official answer "
        "(a self-contradicting reply by its first answer, a worked one by its final answer, "
        "numbers in digits or words, names misspelt); replies neither label retried then failed "
        "and left out, named; accuracy per run, mean of 3 runs, per category"
    )
    licence = "MIT (Hugging Face card)"
    version_items = {"test": 1000}
    default_prompt_style = "bigbenchaudio"
    open_items = True
    accuracy_label = (
        "string match of the official answer's words in the reply; NOT the official figure (an "
        "LLM evaluator: see the 'official' section)"
    )

    @property
    def official_judge(self) -> Any:
        return evaluator_spec()

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        if data is None:
            from cafe.benchmarks.metadata import default_data

            data = str(default_data(NAME))
        return load(data, version, self.audio_root)

    def read_official_file(self, path: Path, samples: list[Sample]) -> OfficialFile | None:
        """The results file (JSON list or JSONL): the accuracy section reads its first run's
        rows; the official figure every run's (``run``), with the evaluator's replies."""
        from cafe.benchmarks.scoring import read_records

        rows, problems = read_records(path)
        runs = {r.get("run", 0) for r in rows}
        bad = sorted({str(r.get("id")) for r in rows if not isinstance(r.get("run", 0), int)})
        problems += [Problem(str(path), "run is not a whole number; row ignored", sid, "run")
                     for sid in bad]  # fmt: skip
        first = min((r for r in runs if isinstance(r, int)), default=0)
        seen: set[tuple[str, Any]] = set()
        for r in rows:  # the first run's repeats are named by the common reading
            key = (str(r.get("id")), r.get("run", 0))
            if key in seen and key[1] != first:
                problems.append(Problem(str(path), f"run {key[1]} repeated; the last row is "
                                        "used", key[0], "run"))  # fmt: skip
            seen.add(key)
        return OfficialFile([r for r in rows if r.get("run", 0) == first],
                            judged={"all_rows": rows}, problems=problems)  # fmt: skip

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        records = judged.get("all_rows", judged.get("file_records"))
        if records is not None:  # `cafe score`: the results file's rows, evaluator replies too
            outcomes, evaluator = outcomes_of_file(samples, records)
        else:
            verdicts = judged.get("verdicts")
            outcomes = outcomes_of_run(samples, predictions, runs, verdicts)
            evaluator = judged.get("judge") if verdicts is not None else None
        return official_figures(samples, outcomes, evaluator, self.official_rule)


# ---- a results file made elsewhere: spoken replies transcribed, then the evaluator -----------

#: the Whisper that transcribes spoken replies by default: the CPU cascade's front
WHISPER_CARD = "whisper-tiny-smollm2"


def whisper_front(options: dict[str, Any] | None = None) -> Any:
    """The cascade's speech recognizer (cafe.adapters.fronts) behind the front cache
    (``fronts.sqlite``): ``options`` a front's options, or the WHISPER_CARD cascade's front."""
    from cafe.adapters.fronts import FRONTS, CachedFront
    from cafe.cache import Cache, cache_file

    if options is None:
        from cafe.adapters.resolve import resolve_model

        options = dict(resolve_model(WHISPER_CARD).card.options["front"])
    kind = options.get("kind", "faster-whisper")
    return CachedFront(FRONTS[kind](options), Cache(cache_file("fronts.sqlite")))


def evaluate_results(
    data: str | Path,
    results: str | Path,
    out: str | Path,
    judge: str,
    judge_model: str,
    endpoints: tuple[str, ...] = (),
    *,
    front: dict[str, Any] | None = None,
    concurrency: int = 8,
    client: Any = None,
) -> dict[str, Any]:
    """A results file judged as `cafe judge-official` judges a run, written to ``out`` for
    `cafe score`: a spoken reply (``candidate_audio``, a path inside the results file's
    folder, where a row has no ``candidate_answer``) is transcribed first (whisper_front; the
    transcript becomes the candidate, ``transcribed_by`` names the front); then each row without
    an ``evaluator_reply`` gets the evaluator's (the same evaluator_spec, its retries and the
    judge call cache ``judge.sqlite``). A row whose call failed keeps no reply: run it again.
    -> counts and problems (one line each, naming file, item and field)."""
    from cafe.audio import contained_audio
    from cafe.benchmarks.scoring import read_records
    from cafe.cache import Cache, cache_file
    from cafe.execution import run_sync
    from cafe.jsontext import strict_dumps
    from cafe.judge.verdict import VerdictJudge
    from cafe.safe_files import replace_file

    results = Path(results)
    samples = {s.id: s for s in BigBenchAudio().load(str(data)).samples if s.error is None}
    rows, problems = read_records(results)
    spoken = [r for r in rows if not isinstance(r.get(PREDICTION_KEY), str)
              and isinstance(r.get("candidate_audio"), str)]  # fmt: skip
    if spoken:
        whisper = whisper_front(front)
        for r in spoken:
            path, bad = contained_audio(r["candidate_audio"], [results.parent],
                                        file=str(results), sample_id=str(r.get("id")),
                                        field="candidate_audio")  # fmt: skip
            if bad is not None:
                problems.append(bad)
                continue
            got = whisper.describe([str(path)])
            r[PREDICTION_KEY], r["transcribed_by"] = got.text, got.front
    todo = [(samples[str(r.get("id"))], r) for r in rows
            if str(r.get("id")) in samples and isinstance(r.get(PREDICTION_KEY), str)
            and not isinstance(r.get("evaluator_reply"), str)]  # fmt: skip
    bound = type("BoundVerdictJudge", (VerdictJudge,), {"verdict_spec": evaluator_spec()})
    evaluator = bound(judge, judge_model, list(endpoints), cache=Cache(cache_file("judge.sqlite")),
                      concurrency=concurrency, client=client)  # fmt: skip

    async def every() -> list[Any]:
        try:
            return list(
                await asyncio.gather(
                    *(
                        evaluator.verdict(
                            s, Prediction(s.id, r.get("run", 0), "file", "", "", r[PREDICTION_KEY])
                        )
                        for s, r in todo
                    )
                )
            )
        finally:
            await evaluator.client.aclose()

    failed = 0
    for (s, r), v in zip(todo, run_sync(every()), strict=True):
        if v.status == "failed":  # no reply to keep: asked again next time
            failed += 1
            problems.append(Problem(str(results), f"evaluator call failed: {v.raw}", s.id,
                                    "evaluator_reply"))  # fmt: skip
            continue
        r["evaluator_reply"], r["evaluator"] = v.raw, evaluator.identity
    text = "".join(strict_dumps(r, ensure_ascii=False) + "\n" for r in rows)
    replace_file(out, lambda f: f.write(text))
    return {"rows": len(rows), "transcribed": sum("transcribed_by" in r for r in spoken),
            "judged": len(todo) - failed, "failed_calls": failed, "calls": evaluator.calls,
            "problems": problems}  # fmt: skip
