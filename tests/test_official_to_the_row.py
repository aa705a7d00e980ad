"""Official to the row (issue 35): what each official script counts, row for row, on files made
here. Expected figures are worked out by hand from the scripts (ckyang1124/SAKURA @ a1fdb146
evaluation/llm_judge.py and calculate_acc.py; sonalkum/MMAUPro @ 960e93a) and checked against
the independent transcriptions in tests/official_scripts_judged.py; where a copy of the official
repository is at hand ($CAFE_OFFICIAL_REPOS/<owner>+<name>/repo, a git mirror) its script runs
verbatim on the same file too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from official_scripts_judged import sakura_calculate_acc, sakura_extract_judgement
from sakura_helpers import write_folder

from cafe.benchmarks.official_judge import Judged
from cafe.benchmarks.sakura import SAKURA, official_judgement
from cafe.cli import main
from cafe.records import Prediction

REPOS = Path(os.environ.get("CAFE_OFFICIAL_REPOS", "/work/.mirror"))


def _official_script(repo: str, path: str, tmp: Path) -> Path | None:
    """The official script, verbatim from a local mirror of its repository; None without one."""
    git = REPOS / repo.replace("/", "+") / "repo"
    if not git.exists():
        return None
    out = tmp / Path(path).name
    out.write_bytes(subprocess.run(["git", "-C", str(git), "show", f"HEAD:{path}"],
                                   capture_output=True, check=True).stdout)  # fmt: skip
    return out


def _run_script(repo: str, path: str, args: list[str], tmp: Path, cwd: Path | None = None):
    """The official script's stdout, run verbatim with ``args`` (None without a copy of it)."""
    script = _official_script(repo, path, tmp)
    if script is None:
        return None
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          check=True, cwd=cwd).stdout  # fmt: skip


def _score(bench: str, data: Path, f: Path) -> dict:
    res = CliRunner().invoke(main, ["score", "--bench", bench, "--data", str(data),
                                    "--predictions", str(f), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _entry(explanation: str, judgement: str) -> dict:
    return {"Explanation": explanation, "Judgement": judgement, "instruction": "q",
            "model_response": "r", "label": "l"}  # fmt: skip


# stored (Explanation, Judgement) -> calculate_acc.py's verdict, by hand: right only when the
# stored judgement, lowercased and stripped, is "correct"; the explanation is never read
JUDGED = {
    "data/Animal/audio/a1.wav": (_entry("names the dog", "correct"), True),
    # an explanation quoting a closing tag: re-read through a thinking strip, nothing was left
    "data/Animal/audio/a2.wav": (_entry("the reply ends with </think> and a dog", "correct"), True),
    # a stored judgement with a blank line: re-parsed, the first paragraph read "correct"
    "data/Gender/audio/g1.wav": (_entry("x", "correct\n\nincorrect"), False),
}
JUDGED_MULTI = {
    # an explanation that itself holds a judgement paragraph: re-parsed, it was read first
    "data/Animal/audio/a1.wav": (_entry("says\nJudgement: correct\n\n", "incorrect"), False),
    # an opening tag that never closes: re-read through the strip, no judgement was left
    "data/Animal/audio/a2.wav": (_entry("the reply opens <think> and stops", "Correct "), True),
    "data/Gender/audio/g1.wav": (_entry("No extracted explanation", "No extracted judgement"),
                                 False),
}  # fmt: skip


def test_score_of_a_judgements_file_is_calculate_acc_on_the_stored_judgement(tmp_path, monkeypatch):
    """The bug: cafe re-parsed the stored judgement through the thinking strip and the pattern
    (1,570 of 3,797 where calculate_acc.py gives 1,454); now calculate_acc's rule on the text."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    for hop, rows in (("single", JUDGED), ("multi", JUDGED_MULTI)):
        doc = {"judge_model": "gpt-4o-2024-11-20", "type": hop,
               "results": {k: e for k, (e, _) in rows.items()}}  # fmt: skip
        f = tmp_path / f"x_{hop}_judgements.json"
        f.write_text(json.dumps(doc))
        right = sum(ok for _, ok in rows.values())
        assert sakura_calculate_acc(doc) == (right, 3)
        out = _run_script("ckyang1124/SAKURA", "evaluation/calculate_acc.py", ["-i", str(f)],
                          tmp_path)  # fmt: skip
        assert out is None or f"Correct count: {right}\n" in out and "Total count: 3\n" in out
        head = _score("sakura", root, f)["official"]["headline"]
        assert head["total"]["correct"] == right and head["total"]["total"] == 3, head
        cells = head["breakdowns"]["track_hop"]
        animal = {"single": (2, 2), "multi": (1, 2)}[hop]  # by hand, from the table above
        assert (cells[f"Animal/{hop}"]["correct"], cells[f"Animal/{hop}"]["total"]) == animal
        assert (cells[f"Gender/{hop}"]["correct"], cells[f"Gender/{hop}"]["total"]) == (0, 1)


THOUGHT = (
    "<think>Explanation: first thoughts\nJudgement: correct\n\n</think>"
    "Explanation: on reflection the reply names the cat\nJudgement: incorrect"
)


def test_a_judgement_inside_thinking_first_is_read_as_the_script_reads_it(tmp_path):
    """llm_judge.py's pattern takes the first match, thinking and all: the official figure
    counts it as the script does, the count beside it says how many, the lenient reading (the
    final answer) stays beside it, labelled."""
    assert sakura_extract_judgement(THOUGHT)["Judgement"] == "correct"
    assert official_judgement(THOUGHT) == "correct"
    samples = SAKURA().load(str(write_folder(tmp_path / "s"))).samples
    ids = ["Animal-a1-single", "Animal-a2-single"]
    preds = [Prediction(k, 0, "m", "plain", "h", "dog") for k in ids]
    replies = {ids[0]: THOUGHT, ids[1]: "Explanation: cow\nJudgement: correct"}
    verdicts = {(k, 0): Judged(k, 0, None, "ok", r) for k, r in replies.items()}
    sec = SAKURA().official_section(samples, preds, 1, verdicts=verdicts, judge="j")
    head = sec["headline"]
    assert head["total"]["correct"] == 2 and head["total"]["total"] == 2
    assert head["judged_in_thinking_first"] == 1
    assert "1 replies judged inside their thinking first" in head["label"]
    lenient = sec["variants"]["lenient_judgement"]
    assert lenient["total"]["correct"] == 1 and "NOT the official" in lenient["label"]


@pytest.mark.parametrize("reply", ["Explanation: x\nJudgement: correct", THOUGHT])
def test_the_official_reading_agrees_with_the_script_on_the_raw_reply(reply):
    assert official_judgement(reply) == sakura_extract_judgement(reply)["Judgement"]


# ---- MMAU and MMAR: the scripts read the file row by row --------------------------------------
def _script_figure(repo: str, path: str, f: Path, tmp: Path) -> str | None:
    """The official script's 'Total Accuracy' line, run verbatim on ``f`` (None without a copy)."""
    out = _run_script(repo, path, ["--input", str(f)], tmp)
    return None if out is None else next(x for x in out.splitlines() if x.startswith("Total Acc"))


def _wrong_choice(item: dict) -> str:
    return next(c for c in item["choices"] if c != item["answer"])


def test_mmar_rows_counted_as_the_script_counts_them(shared_data, tmp_path, monkeypatch):
    """Duplicate rows (each counted), a row for an id the metadata lacks (scored from its own
    answer and choices), a row holding only model_prediction (skipped by the script)."""
    from official_scripts import mmar_evaluate

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = Path(shared_data) / "mmar" / "MMAR-meta.jsonl"
    items = [json.loads(x) for x in meta.read_text().splitlines()[:4]]
    a, b, c, d = items
    rows = [
        {**a, "answer_prediction": a["answer"]},  # right
        {**a, "answer_prediction": _wrong_choice(a)},  # the same id again: wrong, counted
        {**b, "model_prediction": b["answer"]},  # skipped by the script (cafe reads it)
        {**d, "id": "not-in-mmar", "answer_prediction": d["answer"]},  # right, from the row
        {**c, "answer_prediction": c["answer"]},  # right
    ]
    f = tmp_path / "preds.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # by hand: rows 1, 2, 4, 5 scored: 3 right of 4
    assert (mmar_evaluate(f)["correct"], mmar_evaluate(f)["total"]) == (3, 4)
    line = _script_figure("ddlBoJack/MMAR", "code/evaluation.py", f, tmp_path)
    assert line is None or line == "Total Accuracy: 75.00% over 4 samples", line
    out = _score("mmar", meta, f)
    head = out["official"]["headline"]
    assert head["total"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert head["row_cases"] == {
        "duplicate rows (each counted)": 1,
        "rows for ids absent from the metadata (scored from the row)": 1,
        "rows holding only model_prediction (skipped by the script)": 1,
    }
    # cafe's reading beside it, labelled: a's last row (wrong), b read from model_prediction
    by_item = out["official"]["variants"]["by_item"]
    assert by_item["total"]["correct"] == 2 and "NOT the official" in by_item["label"]
    text = CliRunner().invoke(main, ["score", "--bench", "mmar", "--data", str(meta),
                                     "--predictions", str(f)]).output  # fmt: skip
    assert "duplicate rows (each counted) 1" in text, text


def test_mmau_rows_counted_as_the_script_counts_them(shared_data, tmp_path, monkeypatch):
    from official_scripts import mmau_evaluate

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = Path(shared_data) / "mmau" / "mmau-test-mini.json"
    items = json.loads(meta.read_text())[:3]
    a, b, c = items
    rows = [
        {**a, "model_output": _wrong_choice(a)},  # wrong
        {**a, "model_output": a["answer"]},  # the same id again: right, counted
        {**b, "id": "not-in-mmau", "model_output": b["answer"]},  # right, from the row
        # the row's own answer (another release's, say) is the one the script reads: right
        {**c, "model_output": _wrong_choice(c), "answer": _wrong_choice(c)},
    ]
    f = tmp_path / "preds.json"
    f.write_text(json.dumps(rows))
    assert (mmau_evaluate(f)["correct"], mmau_evaluate(f)["total"]) == (3, 4)
    line = _script_figure("Sakshi113/MMAU", "evaluation.py", f, tmp_path)
    assert line is None or line == "Total Accuracy: 75.00% over 4 samples", line
    head = _score("mmau", meta, f)["official"]["headline"]
    assert head["total"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert head["row_cases"] == {
        "duplicate rows (each counted)": 1,
        "rows for ids absent from the metadata (scored from the row)": 1,
        "rows whose answer differs from the metadata's (the row's is used)": 1,
    }


def test_a_file_the_script_reads_as_cafe_does_has_no_second_figure(shared_data, tmp_path):
    meta = Path(shared_data) / "mmau" / "mmau-test-mini.json"
    items = json.loads(meta.read_text())[:2]
    f = tmp_path / "preds.json"
    f.write_text(json.dumps([{**i, "model_output": i["answer"]} for i in items]))
    assert "official" not in _score("mmau", meta, f)


# ---- MMSU and AIR-Bench: each row scored from its own answer_gt ------------------------------
ANIMALS = ["dog", "cat", "cow", "owl"]


def _mmsu_row(sid: str, answer: str, reply: str, **over) -> dict:
    row = {"id": sid, "task_name": "t", "question": "Which?",
           **dict(zip(("choice_a", "choice_b", "choice_c", "choice_d"), ANIMALS, strict=True)),
           "answer_gt": answer, "category": "Perception", "sub-category": "Linguistics",
           "sub-sub-category": "x", "linguistics_sub_discipline": "y",
           "response": reply}  # fmt: skip
    return {**row, **over}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mmsu_agrees(meta: Path, preds: Path, tmp: Path, right: int, total: int, acc: float) -> dict:
    """mmsu_evaluation.py (verbatim where its mirror is) and cafe's official headline both count
    ``right`` of ``total`` on ``preds``; -> the headline."""
    out = _run_script("dingdongwang/MMSU", "mmsu_evaluation.py", [str(preds)], tmp)
    assert out is None or (f"Overall Accuracy: {right / total:.4f}" in out
                           and f"Total count: {total}" in out), out  # fmt: skip
    head = _score("mmsu", meta, preds)["official"]["headline"]
    assert head["total"] == {"correct": right, "total": total, "acc": acc}
    return head


def test_mmsu_rows_use_their_own_answer_gt_and_count_unknown_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "audio").mkdir()
    meta_rows = [{**_mmsu_row(s, "dog", ""), "audio": f"audio/{s}.wav"} for s in ("m1", "m2")]
    for r in meta_rows:
        r.pop("response")
    meta = _jsonl(tmp_path / "mmsu.jsonl", meta_rows)
    preds = _jsonl(tmp_path / "preds.jsonl", [
        _mmsu_row("m1", "cat", "B"),  # the row says cat: B is right as the script reads it
        _mmsu_row("m2", "dog", "A"),  # right
        _mmsu_row("m9", "owl", "D"),  # an id the metadata lacks: scored from the row, right
    ])  # fmt: skip
    head = _mmsu_agrees(meta, preds, tmp_path, 3, 3, 100.0)
    assert head["row_cases"] == {
        "rows whose answer_gt differs from the metadata's (the row's is used)": 1,
        "rows for ids absent from the metadata (scored from the row)": 1,
    }


def _air_row(sid: str, answer: str, reply: str, task: str | None = "T1") -> dict:
    return {"path": f"{sid}.wav", "question": "Which?",
            **dict(zip(("choice_a", "choice_b", "choice_c", "choice_d"), ANIMALS, strict=True)),
            "answer_gt": answer, "task_name": task, "dataset_name": "D1", "uniq_id": sid,
            "response": reply}  # fmt: skip


def test_airbench_rows_with_task_name_null_are_skipped_and_own_answers_used(tmp_path):
    meta_rows = [_air_row(s, "dog", "") for s in ("a1", "a2", "a3")]
    for r in meta_rows:
        r.pop("response")
    meta = tmp_path / "Foundation_meta.json"
    meta.write_text(json.dumps(meta_rows))
    run = tmp_path / "run"
    run.mkdir()
    results = _jsonl(run / "Foundation_result_modelx.jsonl", [
        _air_row("a1", "dog", "A"),  # right
        _air_row("a2", "cow", "C"),  # the row's own answer: right
        _air_row("a3", "dog", "B", task=None),  # task_name null: skipped by the script
    ])  # fmt: skip
    # it reads Foundation_result_modelx.jsonl where it runs
    out = _run_script("OFA-Sys/AIR-Bench", "score_foundation.py", [], tmp_path, cwd=run)
    assert out is None or "T1_D1: Sum=2, correct=2, acc=1.0" in out and "total_sum: 2" in out
    head = _score("airbench", meta, results)["official"]["headline"]
    assert head["total"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert head["row_cases"] == {
        "rows with task_name null (skipped by the script)": 1,
        "rows whose answer_gt differs from the metadata's (the row's is used)": 1,
    }


# ---- MMAU-Pro open questions: the judge's scores as the script's first match -------------------
SCORES_THOUGHT = (
    "<think>maybe CORRECTNESS: 1\nRELEVANCE: 1\nCOMPLETENESS: 1\nCLARITY: 1\nOVERALL: 1</think>"
    "CORRECTNESS: 5\nRELEVANCE: 5\nCOMPLETENESS: 5\nCLARITY: 5\nOVERALL: 5"
)


def test_mmau_pro_open_scores_inside_thinking_first_are_read_as_the_script_reads_them():
    from official_scripts_judged import mmau_pro_scores

    from cafe.benchmarks.mmau_pro import MMAUPro, official_overall
    from cafe.records import Sample

    # extract_scores_from_evaluation: re.search, first match, thinking and all -> OVERALL 1
    assert mmau_pro_scores(SCORES_THOUGHT) == 1.0 and official_overall(SCORES_THOUGHT) == 1.0
    samples = [Sample(s, "mmau-pro", "t", "Q?", [], None, ["x.wav"], {"category": "open"})
               for s in ("o1", "o2")]  # fmt: skip
    preds = [Prediction(s.id, 0, "m", "p", "h", "an answer") for s in samples]
    verdicts = {("o1", 0): Judged("o1", 0, None, "ok", SCORES_THOUGHT),
                ("o2", 0): Judged("o2", 0, None, "ok", "OVERALL: 4")}  # fmt: skip
    sec = MMAUPro().official_section(samples, preds, 1, verdicts=verdicts, judge="j")
    head = sec["headline"]
    # by hand: (1/5 + 4/5) / 2 = 50.00; the final answers' reading: (5/5 + 4/5) / 2 = 90.00
    assert head["total"] == {"acc": 50.0, "items": 2}
    assert head["open_replies_scored_in_thinking"] == 1
    final = sec["variants"]["final_answer"]
    assert final["total"] == {"acc": 90.0, "items": 2} and "NOT the official" in final["label"]
    from cafe.benchmarks.official import format_official

    assert "open replies scored in thinking 1" in format_official(sec)


def test_a_sakura_response_that_is_the_label_placeholder_shows_the_judge_the_label(
    tmp_path, monkeypatch
):
    """llm_judge.py fills the response into its prompt, then the label: a response that is
    literally [GROUND_TRUTH_ANSWER] reaches the judge as the label."""
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    run = tmp_path / "run"
    prompts: list[str] = []

    def judge(body):
        prompts.append(body["messages"][-1]["content"])
        return "Explanation: x\nJudgement: correct"

    with OpenAILoopback(reply=lambda b: "[GROUND_TRUTH_ANSWER]") as model, \
         OpenAILoopback(reply=judge) as judge_srv:  # fmt: skip
        for args in (
            ["run", "--model", "openai-compatible", "--endpoint", model.url, "-o", "model=m",
             "--bench", "sakura", "--data", str(root), "--out", str(run), "--no-progress"],
            ["judge-official", str(run), "--judge", "openai-compatible", "--judge-endpoint",
             judge_srv.url, "--cache", str(tmp_path / "j.sqlite")],
        ):  # fmt: skip
            res = CliRunner().invoke(main, args)
            assert res.exit_code == 0, res.output
    assert len(prompts) == 6 and not any("[GROUND_TRUTH_ANSWER]" in p for p in prompts)
    a1s = next(p for p in prompts if "[a1s]" in p)
    assert a1s.count("(a) dog") >= 3  # the options, the label, and the response as the label
    g1s = next(p for p in prompts if "[g1s]" in p)
    assert g1s.count(" (a) Female") >= 2  # the label as saved, leading space kept, twice


def _calculate_acc_agrees(doc: dict, f: Path, root: Path, right: int, total: int) -> dict:
    """``doc`` written to ``f``: calculate_acc.py (transcribed, and verbatim where its mirror is)
    and cafe's official headline both count ``right`` of ``total``; -> the headline."""
    f.write_text(json.dumps(doc))
    assert sakura_calculate_acc(doc) == (right, total)
    out = _run_script("ckyang1124/SAKURA", "evaluation/calculate_acc.py", ["-i", str(f)],
                      f.parent)  # fmt: skip
    assert out is None or (f"Correct count: {right}\n" in out
                           and f"Total count: {total}\n" in out), out  # fmt: skip
    head = _score("sakura", root, f)["official"]["headline"]
    assert head["total"]["correct"] == right and head["total"]["total"] == total, head
    return head


def test_a_judgements_entry_for_a_clip_the_data_lacks_counts_as_calculate_acc_counts_it(tmp_path):
    root = write_folder(tmp_path / "s")
    doc = {"type": "single", "results": {
        "data/Animal/audio/a1.wav": _entry("dog", "correct"),
        "data/Animal/audio/zebra9.wav": _entry("a zebra", "correct"),  # not in the data
        "data/Gender/audio/g1.wav": _entry("no", "incorrect"),
    }}  # fmt: skip
    head = _calculate_acc_agrees(doc, tmp_path / "x_single_judgements.json", root, 2, 3)
    cell = head["breakdowns"]["track_hop"]["Animal/single"]
    assert (cell["correct"], cell["total"]) == (2, 2)
    assert list(head["row_cases"].values()) == [1]


# ---- issue 45: the official scripts on whole files, class by class ----------------------------
def _script_status(repo: str, path: str, args: list[str], tmp: Path, cwd: Path | None = None):
    """(exit status, stdout) of the official script run verbatim (None without a copy): for
    files the script stops on."""
    script = _official_script(repo, path, tmp)
    if script is None:
        return None
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          cwd=cwd)  # fmt: skip
    return done.returncode, done.stdout


# bench -> (repository, script, metadata under shared data, the script's prediction key)
ROW_SCRIPTS = {
    "mmau": ("Sakshi113/MMAU", "evaluation.py", "mmau/mmau-test-mini.json", "model_output"),
    "mmar": ("ddlBoJack/MMAR", "code/evaluation.py", "mmar/MMAR-meta.jsonl", "answer_prediction"),
}


def _meta_items(shared_data: str, bench: str) -> tuple[Path, list[dict]]:
    meta = Path(shared_data) / ROW_SCRIPTS[bench][2]
    text = meta.read_text()
    rows = json.loads(text) if meta.suffix == ".json" else [json.loads(x) for x in
                                                             text.splitlines()[:5]]  # fmt: skip
    return meta, rows[:5]


def _script_total(bench: str, f: Path, tmp: Path) -> str | None:
    repo, path, _, _ = ROW_SCRIPTS[bench]
    return _script_figure(repo, path, f, tmp)


def _transcribed(bench: str, f: Path) -> tuple[int, int]:
    from official_scripts import mmar_evaluate, mmau_evaluate

    got = {"mmau": mmau_evaluate, "mmar": mmar_evaluate}[bench](f)
    return got["correct"], got["total"]


@pytest.mark.parametrize("bench", ["mmau", "mmar"])
def test_class_a_a_rows_own_choices_count_with_no_other_row_case(
    bench, shared_data, tmp_path, monkeypatch
):
    """A: a one-row file whose row holds choices=[answer], output "<answer> or <wrong>": the
    script reads the row's choices (no distractor: right, 1/1); cafe read the metadata's (0/1)
    because no other row case made it read the file row by row."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta, (a, *_) = _meta_items(shared_data, bench)
    key = ROW_SCRIPTS[bench][3]
    row = {**a, "choices": [a["answer"]], key: f"{a['answer']} or {_wrong_choice(a)}"}
    f = tmp_path / "preds.json"
    f.write_text(json.dumps([row]))
    assert _transcribed(bench, f) == (1, 1)
    line = _script_total(bench, f, tmp_path)
    assert line is None or line == "Total Accuracy: 100.00% over 1 samples", line
    head = _score(bench, meta, f)["official"]["headline"]
    assert head["total"] == {"correct": 1, "total": 1, "acc": 100.0}
    assert head["row_cases"] == {
        "rows whose choices differ from the metadata's (the row's are used)": 1}  # fmt: skip


@pytest.mark.parametrize("bench", ["mmau", "mmar"])
def test_class_a_rows_without_or_renaming_sub_category_are_in_no_sub_category_cell(
    bench, shared_data, tmp_path, monkeypatch
):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta, (a, b, c, *_) = _meta_items(shared_data, bench)
    key = ROW_SCRIPTS[bench][3]
    b2 = {k: v for k, v in b.items() if k != "sub-category"}  # missing
    c2 = {("sub_category" if k == "sub-category" else k): v for k, v in c.items()}  # renamed
    rows = [{**a, key: a["answer"]}, {**b2, key: b["answer"]}, {**c2, key: _wrong_choice(c)}]
    f = tmp_path / "preds.json"
    f.write_text(json.dumps(rows))
    # by hand: a and b right, c wrong (2/3); only a counts in a sub-category cell
    assert _transcribed(bench, f) == (2, 3)
    out = _run_script(ROW_SCRIPTS[bench][0], ROW_SCRIPTS[bench][1], ["--input", str(f)], tmp_path)
    assert out is None or (f"{a['sub-category']} : 100.00% over 1 samples" in out
                           and "Total Accuracy: 66.67% over 3 samples" in out), out  # fmt: skip
    head = _score(bench, meta, f)["official"]["headline"]
    assert head["total"] == {"correct": 2, "total": 3, "acc": 66.67}
    assert head["breakdowns"]["sub-category"] == {
        a["sub-category"]: {"correct": 1, "total": 1, "acc": 100.0}}  # fmt: skip
    assert head["row_cases"] == {
        "rows without sub-category (in no sub-category cell, as the script counts them)": 2
    }


@pytest.mark.parametrize("bench", ["mmau", "mmar"])
def test_class_b_an_int_sub_category_and_choices_as_a_string_are_counted(
    bench, shared_data, tmp_path, monkeypatch
):
    """B: the script keys a cell by sub-category 5 and iterates a string of choices character
    by character; an output equal to the answer is right either way (2/2). cafe stopped."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta, (a, b, *_) = _meta_items(shared_data, bench)
    key = ROW_SCRIPTS[bench][3]
    rows = [{**a, "sub-category": 5, key: a["answer"]},
            {**b, "choices": ", ".join(b["choices"]), key: b["answer"]}]  # fmt: skip
    f = tmp_path / "preds.json"
    f.write_text(json.dumps(rows))
    assert _transcribed(bench, f) == (2, 2)
    out = _run_script(ROW_SCRIPTS[bench][0], ROW_SCRIPTS[bench][1], ["--input", str(f)], tmp_path)
    assert out is None or ("5 : 100.00% over 1 samples" in out
                           and "Total Accuracy: 100.00% over 2 samples" in out), out  # fmt: skip
    head = _score(bench, meta, f)["official"]["headline"]
    assert head["total"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert head["breakdowns"]["sub-category"]["5"] == {"correct": 1, "total": 1, "acc": 100.0}
    assert "stopped" not in head


@pytest.mark.parametrize("bench", ["mmau", "mmar"])
def test_a_row_the_row_script_stops_on_leaves_no_official_figure(
    bench, shared_data, tmp_path, monkeypatch
):
    """choices 5 with an output that has a word: the script iterates it and stops (TypeError),
    printing no figure; cafe names the row and the reason, gives none, the rest beside it."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta, (a, b, *_) = _meta_items(shared_data, bench)
    key = ROW_SCRIPTS[bench][3]
    rows = [{**a, key: a["answer"]}, {**b, "choices": 5, key: b["answer"]}]
    f = tmp_path / "preds.json"
    f.write_text(json.dumps(rows))
    ran = _script_status(ROW_SCRIPTS[bench][0], ROW_SCRIPTS[bench][1], ["--input", str(f)],
                         tmp_path)  # fmt: skip
    assert ran is None or ran[0] != 0 and "Total Accuracy" not in ran[1], ran
    official = _score(bench, meta, f)["official"]
    head = official["headline"]
    assert head["total"] is None and "stops on 1 row(s)" in head["absent_reason"]
    assert head["stopped"]["items"] == [f"{b['id']} (row 2)"]
    assert head["stopped"]["reasons"] == {"choices of type int (TypeError)": 1}
    lenient = official["variants"]["script_stops_left_out"]
    assert lenient["total"] == {"correct": 1, "total": 1, "acc": 100.0}
    assert "NOT the official figure" in lenient["label"]
    text = CliRunner().invoke(main, ["score", "--bench", bench, "--data", str(meta),
                                     "--predictions", str(f)]).output  # fmt: skip
    assert "headline: absent (the official script stops on 1 row(s)" in text, text
    assert f"{b['id']} (row 2)" in text


def _mmsu_meta(tmp: Path) -> Path:
    (tmp / "audio").mkdir(exist_ok=True)
    rows = [{**_mmsu_row(s, "dog", ""), "audio": f"audio/{s}.wav"} for s in ("m1", "m2", "m3")]
    for r in rows:
        r.pop("response")
    return _jsonl(tmp / "mmsu.jsonl", rows)


def _no_id(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("id", "uniq_id")}


def test_class_c_mmsu_rows_without_an_id_are_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = _mmsu_meta(tmp_path)
    preds = _jsonl(tmp_path / "preds.jsonl", [
        _mmsu_row("m1", "dog", "A"),  # right
        _no_id(_mmsu_row("m2", "dog", "A")),  # no id: the script counts it, right
        _no_id(_mmsu_row("m3", "dog", "C")),  # no id: counted, wrong
    ])  # fmt: skip
    head = _mmsu_agrees(meta, preds, tmp_path, 2, 3, 66.67)
    assert head["row_cases"] == {"rows without an id (counted by the script)": 2}


def test_class_c_airbench_rows_without_a_uniq_id_are_counted(tmp_path):
    meta = tmp_path / "Foundation_meta.json"
    meta.write_text(json.dumps([{k: v for k, v in _air_row(s, "dog", "").items()
                                 if k != "response"} for s in ("a1", "a2", "a3")]))  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    results = _jsonl(run / "Foundation_result_modelx.jsonl", [
        _air_row("a1", "dog", "A"),  # right
        _no_id(_air_row("a2", "dog", "A")),  # no uniq_id: counted, right
        _no_id(_air_row("a3", "dog", "B")),  # no uniq_id: counted, wrong
    ])  # fmt: skip
    out = _run_script("OFA-Sys/AIR-Bench", "score_foundation.py", [], tmp_path, cwd=run)
    assert out is None or "T1_D1: Sum=3, correct=2," in out and "total_sum: 3" in out, out
    head = _score("airbench", meta, results)["official"]["headline"]
    assert head["total"] == {"correct": 2, "total": 3, "acc": 66.67}
    assert head["row_cases"] == {"rows without an id (counted by the script)": 2}


def test_class_d_mmsu_rows_without_or_with_an_int_answer_gt_score_wrong(tmp_path, monkeypatch):
    """D: answer_gt missing reads as "" and an int never equals an option's text: both wrong
    as the script scores them; cafe used the metadata's answer (dog, A: right)."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = _mmsu_meta(tmp_path)
    missing = {k: v for k, v in _mmsu_row("m2", "dog", "A").items() if k != "answer_gt"}
    preds = _jsonl(tmp_path / "preds.jsonl", [
        _mmsu_row("m1", "dog", "A"),  # right
        missing,  # wrong
        _mmsu_row("m3", 0, "A"),  # answer_gt 0: wrong
    ])  # fmt: skip
    head = _mmsu_agrees(meta, preds, tmp_path, 1, 3, 33.33)
    assert head["row_cases"] == {
        "rows whose answer_gt is missing or not text (compared as the script compares it)": 2
    }


def test_class_e_a_bom_at_the_start_of_an_mmsu_file_drops_line_1(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = _mmsu_meta(tmp_path)
    preds = tmp_path / "preds.jsonl"
    rows = [_mmsu_row("m1", "dog", "A"), _mmsu_row("m2", "dog", "B")]  # right, wrong
    preds.write_text("\ufeff" + "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    head = _mmsu_agrees(meta, preds, tmp_path, 0, 1, 0.0)
    assert head["row_cases"] == {
        "line 1 begins with a byte-order mark (the script cannot parse it: skipped)": 1
    }


def _air_without(field: str) -> dict:
    return {k: v for k, v in _air_row("a3", "dog", "A").items() if k != field}


# the file's text around two good rows (a1 right, a2 wrong) -> (where the script stops, why)
AIR_STOPS = {
    "no answer_gt": (lambda good: good + json.dumps(_air_without("answer_gt")) + "\n",
                     "a3 (line 3)", "no answer_gt: the script stops (KeyError)"),
    "no choice_a": (lambda good: good + json.dumps(_air_without("choice_a")) + "\n",
                    "a3 (line 3)", "no choice_a: the script stops (KeyError)"),
    "no task_name": (lambda good: good + json.dumps(_air_without("task_name")) + "\n",
                     "a3 (line 3)", "no task_name: the script stops (KeyError)"),
    "an int answer_gt": (lambda good: good + json.dumps(_air_row("a3", 2, "A")) + "\n",
                         "a3", "answer_gt equals no option: the official script stops here "
                         "(exit 1)"),
    "a blank line": (lambda good: good + "\n", "line 3",
                     "blank line: the script stops (JSONDecodeError)"),
    "a broken line": (lambda good: good + "{not json\n", "line 3",
                      "not JSON (Expecting property name enclosed in double quotes): the script "
                      "stops (JSONDecodeError)"),
    "a BOM": (lambda good: "\ufeff" + good, "line 1",
              "not JSON (Unexpected UTF-8 BOM (decode using utf-8-sig)): the script stops "
              "(JSONDecodeError)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(AIR_STOPS))
def test_class_f_where_score_foundation_stops_cafe_names_it_and_gives_no_figure(tmp_path, case):
    make, where, why = AIR_STOPS[case]
    meta = tmp_path / "Foundation_meta.json"
    meta.write_text(json.dumps([{k: v for k, v in _air_row(s, "dog", "").items()
                                 if k != "response"} for s in ("a1", "a2", "a3")]))  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    good = "".join(json.dumps(r) + "\n" for r in (_air_row("a1", "dog", "A"),
                                                  _air_row("a2", "dog", "C")))  # fmt: skip
    results = run / "Foundation_result_modelx.jsonl"
    results.write_text(make(good), encoding="utf-8")
    ran = _script_status("OFA-Sys/AIR-Bench", "score_foundation.py", [], tmp_path, cwd=run)
    assert ran is None or ran[0] != 0 and "total_sum" not in ran[1], ran
    official = _score("airbench", meta, results)["official"]
    head = official["headline"]
    assert head["total"] is None and "stops on 1 row(s)" in head["absent_reason"], head
    assert head["stopped"]["items"] == [where] and head["stopped"]["reasons"] == {why: 1}
    lenient = official["variants"]["script_stops_left_out"]["total"]
    # by hand: a1 right, a2 wrong; with a BOM, line 1 (a1) is the stop
    assert lenient == ({"correct": 0, "total": 1, "acc": 0.0} if case == "a BOM"
                       else {"correct": 1, "total": 2, "acc": 50.0})  # fmt: skip
    text = CliRunner().invoke(main, ["score", "--bench", "airbench", "--data", str(meta),
                                     "--predictions", str(results)]).output  # fmt: skip
    assert "headline: absent (the official script stops" in text and where in text, text


def _judgements(entries: dict) -> dict:
    """llm_judge.py's output: no attribute, no type; the hop is in the file's name."""
    return {"judge_model": "gpt-4o-2024-11-20", "temperature": 0.0, "top_p": 0.9,
            "max_tokens": None, "results": entries}  # fmt: skip


def test_class_g_sakura_judgements_in_llm_judges_layout_count_every_entry(tmp_path, monkeypatch):
    """G: calculate_acc.py counts every entry of <Track>_<hop>_judgements.json by its
    Judgement alone; cafe dropped an entry whose instruction differs from the data's or is
    missing, one for a clip the data lacks, and one without model_response."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    no_instruction = {k: v for k, v in _entry("x", "incorrect").items() if k != "instruction"}
    no_response = {k: v for k, v in _entry("x", "correct").items() if k != "model_response"}
    doc = _judgements({
        "data/Animal/audio/a1.wav": _entry("dog", "correct"),  # instruction "q": not the data's
        "data/Animal/audio/a2.wav": no_instruction,  # incorrect
        "data/Animal/audio/zebra9.wav": _entry("a zebra", "correct"),  # a clip the data lacks
        "data/Gender/audio/g1.wav": no_response,  # correct
    })  # fmt: skip
    head = _calculate_acc_agrees(doc, tmp_path / "Animal_single_judgements.json", root, 3, 4)
    cells = head["breakdowns"]["track_hop"]
    assert (cells["Animal/single"]["correct"], cells["Animal/single"]["total"]) == (2, 3)
    assert (cells["Gender/single"]["correct"], cells["Gender/single"]["total"]) == (1, 1)


def test_class_g_an_entry_without_a_judgement_stops_calculate_acc_and_leaves_no_figure(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    bare = {k: v for k, v in _entry("x", "correct").items() if k != "Judgement"}
    doc = _judgements({"data/Animal/audio/a1.wav": _entry("dog", "correct"),
                       "data/Animal/audio/a2.wav": bare})  # fmt: skip
    f = tmp_path / "Animal_multi_judgements.json"
    f.write_text(json.dumps(doc))
    ran = _script_status("ckyang1124/SAKURA", "evaluation/calculate_acc.py", ["-i", str(f)],
                         tmp_path)  # fmt: skip
    assert ran is None or ran[0] != 0 and "Accuracy" not in ran[1], ran
    official = _score("sakura", root, f)["official"]
    head = official["headline"]
    assert head["total"] is None and "stops on 1 row(s)" in head["absent_reason"]
    where = "data/Animal/audio/a2.wav (Animal_multi_judgements.json)"
    assert head["stopped"]["items"] == [where]
    lenient = official["variants"]["script_stops_left_out"]["total"]
    assert (lenient["correct"], lenient["total"]) == (1, 2)  # a2 without a verdict: wrong


def test_an_mmsu_file_of_ids_and_replies_only_is_counted_as_the_script_counts_it(
    tmp_path, monkeypatch
):
    """Rows of only id and response: mmsu_evaluation.py reads answer_gt and every option as "",
    so any letter is right (2/2 here); cafe gives that figure as the script's and says why."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = _mmsu_meta(tmp_path)
    preds = _jsonl(tmp_path / "preds.jsonl", [{"id": "m1", "response": "A"},
                                              {"id": "m2", "response": "C"}])  # fmt: skip
    head = _mmsu_agrees(meta, preds, tmp_path, 2, 2, 100.0)
    assert list(head["row_cases"].values()) == [2]
    assert "any letter A-D is right" in next(iter(head["row_cases"]))


def test_choices_the_script_never_iterates_are_read_as_it_reads_them(shared_data, tmp_path):
    """An output with no word is wrong before the script reads the choices: choices 5 there is
    no stop (MMAU evaluation.py: 0/1, no traceback)."""
    meta, (a, *_) = _meta_items(shared_data, "mmau")
    f = tmp_path / "preds.json"
    f.write_text(json.dumps([{**a, "choices": 5, "model_output": "..."}]))
    line = _script_total("mmau", f, tmp_path)
    assert line is None or line == "Total Accuracy: 0.00% over 1 samples", line
    head = _score("mmau", meta, f)["official"]["headline"]
    assert head["total"] == {"correct": 0, "total": 1, "acc": 0.0} and "stopped" not in head
