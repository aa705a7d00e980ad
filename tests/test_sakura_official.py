"""SAKURA's official figure item for item with its scripts (ckyang1124/SAKURA @ a1fdb146,
evaluation/llm_judge.py and calculate_acc.py): every judge-reply shape read as the official
pattern reads it (checked against an independent transcription and by hand), the friendlier
reading beside it, labelled; null responses and items without a prediction kept out of the
official figure and named, counted wrong only in the labelled variant."""

from __future__ import annotations

import pytest
from official_scripts_judged import sakura_calculate_acc, sakura_extract_judgement
from sakura_helpers import write_folder

from cafe.benchmarks.official_judge import Judged, read_judgement
from cafe.benchmarks.sakura import SAKURA, judged_correct, official_judgement
from cafe.records import Prediction

# reply -> (officially right, the lenient reading right); worked out by hand from the pattern
# `Explanation: (.*?)\nJudgement: (.*?)(?:\n\n|$)` (case-sensitive, DOTALL, first match) and
# calculate_acc's `judgement.lower().strip() == "correct"`
SHAPES = {
    "Explanation: it names the dog.\nJudgement: correct": (True, True),
    "Explanation: x\nJudgement: Correct": (True, True),  # lowercased before the comparison
    "Explanation: x\nJudgement:  CORRECT \n\nmore": (True, True),  # stripped; ends at \n\n
    "Explanation: x\nJudgement: correct\n": (True, True),  # $ before a final newline
    "Explanation: line one\nline two\nJudgement: correct": (True, True),  # DOTALL
    "Explanation: x\nJudgement: incorrect": (False, False),
    # the ten friendlier shapes: each officially WRONG
    "Explanation: x\nJudgment: correct": (False, True),  # US spelling: no match
    "Explanation: x\n**Judgement:** correct": (False, True),  # markup: no match
    "Explanation: x\nJudgement: **correct**": (False, True),  # captured with its markup
    "Explanation: x\nJudgement:correct": (False, True),  # no space after the colon
    "explanation: x\njudgement: correct": (False, True),  # lowercase labels
    "EXPLANATION: x\nJUDGEMENT: CORRECT": (False, True),  # uppercase labels
    "Judgement: correct": (False, True),  # no Explanation line
    "Explanation: x\nJudgement: right": (False, True),  # not the word "correct"
    "Explanation: x\nJudgement: Correct.": (False, True),  # the full stop stays
    "Explanation: x\nJudgement: correct\nI am sure.": (False, True),  # no blank line after it
    "Explanation:x\nJudgement: correct": (False, True),  # no space after Explanation's colon
    # first match wins officially; the lenient reading takes the last label
    "Explanation: a\nJudgement: correct\n\nExplanation: b\nJudgement: incorrect": (True, False),
    # a label inside the explanation is not on its own line: the real one is read
    "Explanation: it says Judgement: correct\nJudgement: incorrect": (False, False),
    "I cannot judge this.": (False, False),
    "": (False, False),
}


@pytest.mark.parametrize("reply", list(SHAPES))
def test_reply_shapes_as_the_official_script(reply):
    official, lenient = SHAPES[reply]
    assert judged_correct(official_judgement(reply)) is official
    # the transcription of llm_judge.py + calculate_acc.py agrees on every shape
    script = sakura_extract_judgement(reply)["Judgement"]
    assert sakura_calculate_acc({"results": {"k": {"Judgement": script}}}) == (int(official), 1)
    if official_judgement(reply) is not None:
        assert official_judgement(reply) == script
    assert (read_judgement(reply) is True) is lenient


def test_null_and_missing_responses_kept_out_and_named(tmp_path):
    """Six items: one null response (the official script crashes building its prompt), one
    with no prediction (in no results file), four judged."""
    samples = SAKURA().load(str(write_folder(tmp_path / "s"))).samples
    outputs = {"Animal-a1-single": "dog", "Animal-a1-multi": None, "Animal-a2-single": "cow",
               "Gender-g1-single": "Female", "Gender-g1-multi": "Mr."}  # fmt: skip
    preds = [Prediction(k, 0, "m", "plain", "h", v, answer_text=v) for k, v in outputs.items()]
    replies = {
        "Animal-a1-single": "Explanation: dog.\nJudgement: correct",
        "Animal-a2-single": "Explanation: cow.\nJudgment: correct",  # lenient only
        "Gender-g1-single": "Explanation: female.\nJudgement: correct",
        "Gender-g1-multi": "Explanation: Mr. is wrong.\nJudgement: incorrect",
    }
    verdicts = {(k, 0): Judged(k, 0, None, "ok", r) for k, r in replies.items()}
    verdicts[("Animal-a1-multi", 0)] = Judged("Animal-a1-multi", 0, None, "failed", "null output")
    sec = SAKURA().official_section(samples, preds, 1, verdicts=verdicts, judge="j")
    head = sec["headline"]
    # by hand: 2 right of the 4 judged; Animal-a1-multi (null) and Animal-a2-multi (absent) out
    assert head["total"] == {"correct": 2, "total": 4, "acc": 50.0} and head["dropped"] == 2
    assert head["kept_out"] == {"null_response": 1, "not_in_predictions": 1,
                                "null_response_items": ["Animal-a1-multi"]}  # fmt: skip
    cells = head["breakdowns"]["track_hop"]
    assert {k: (c["correct"], c["total"]) for k, c in cells.items()} == {
        "Animal/single": (1, 2), "Gender/single": (1, 1), "Gender/multi": (0, 1)}  # fmt: skip
    # tracks: Animal 1/2 = 50, Gender 1/2 = 50; per hop: single (50 + 100) / 2, multi 0
    assert head["average"] == {"single": 75.0, "multi": 0.0, "all": 50.0}
    lenient = sec["variants"]["lenient_judgement"]
    assert lenient["total"] == {"correct": 3, "total": 4, "acc": 75.0}
    wrong = sec["variants"]["counted_wrong"]
    assert wrong["total"] == {"correct": 2, "total": 6, "acc": 33.33}
    assert "NOT the official" in wrong["label"] and "NOT the official" in lenient["label"]
    # said where the figure is printed
    from cafe.benchmarks.official import format_official

    line = format_official(sec).splitlines()[1]
    assert "50.00 (2/4); dropped 2; kept out (null response) 1" in line
    assert "kept out (not in predictions) 1" in line


def _cafe(*args: str, code: int = 0) -> str:
    from click.testing import CliRunner

    from cafe.cli import main

    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == code, res.output
    return res.stdout if code == 0 else res.output


def test_score_reads_the_official_judge_input_and_output(tmp_path, monkeypatch):
    """`cafe score` on SAKURA's own files: the judge's input ({"results": {clip: {instruction,
    response, label}}}) and the judgements file llm_judge.py writes, whose figure is
    calculate_acc.py's."""
    import json

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    meta = json.loads((root / "data" / "Animal" / "metadata.json").read_text())
    a1, a2 = "data/Animal/audio/a1.wav", "data/Animal/audio/a2.wav"
    # no "type": the hop is the item whose instruction the entry repeats
    results = {"attribute": "Animal", "results": {
        a1: {"instruction": meta[a1]["single_instruction"], "response": "dog", "label": "(a) dog"},
        a2: {"instruction": meta[a2]["single_instruction"], "response": None, "label": "(c) cow"},
    }}  # fmt: skip
    f = tmp_path / "Animal_single.json"
    f.write_text(json.dumps(results))
    out = json.loads(_cafe("score", "--bench", "sakura", "--data", str(root), "--predictions",
                           str(f), "--json"))  # fmt: skip
    match = out["official"]["variants"]["option_match"]
    # a1 right; a2's null response is unanswered (wrong in cafe's counts)
    assert match["breakdowns"]["track_hop"]["Animal/single"] == {"correct": 1, "total": 2,
                                                                 "acc": 50.0}  # fmt: skip
    assert out["non_string_predictions"] == 1
    # the judgements file (llm_judge.py's output): the official figure is calculate_acc.py's
    judged = {"judge_model": "gpt-4o-2024-11-20", "temperature": 0.0, "top_p": 0.9,
              "max_tokens": 1024, "results": {
        a1: {"Explanation": "names the dog", "Judgement": "correct", "instruction": "q",
             "model_response": "dog", "label": "(a) dog"},
        a2: {"Explanation": "x", "Judgement": "**correct**", "instruction": "q",
             "model_response": "cow!", "label": "(c) cow"},
        "data/Gender/audio/g1.wav": {"Explanation": "No extracted explanation",
                                     "Judgement": "No extracted judgement", "instruction": "q",
                                     "model_response": "female", "label": " (a) Female"},
    }}  # fmt: skip
    jf = tmp_path / "Animal_single_judgements.json"
    jf.write_text(json.dumps({**judged, "type": "single"}))
    head = json.loads(_cafe("score", "--bench", "sakura", "--data", str(root), "--predictions",
                            str(jf), "--json"))["official"]["headline"]  # fmt: skip
    assert sakura_calculate_acc(judged) == (1, 3)
    assert head["total"] == {"correct": 1, "total": 3, "acc": 33.33}
    assert "judgements file" in head["label"]
    assert head["kept_out"]["not_in_predictions"] == 3  # the items no file holds


def test_a_file_naming_no_item_is_an_error_naming_the_key(tmp_path):
    import json

    root = write_folder(tmp_path / "s")
    f = tmp_path / "r.json"
    f.write_text(
        json.dumps(
            {
                "type": "single",
                "results": {
                    "data/Animal/audio/zebra9.wav": {
                        "instruction": "q",
                        "response": "x",
                        "label": "y",
                    }
                },
            }
        )
    )
    out = _cafe("score", "--bench", "sakura", "--data", str(root), "--predictions", str(f),
                code=1)  # fmt: skip
    assert "'data/Animal/audio/zebra9.wav' -> 'Animal-zebra9-single'" in out
    assert "no results key names a SAKURA item" in out


def test_no_judged_item_is_no_figure(tmp_path):
    samples = SAKURA().load(str(write_folder(tmp_path / "s"))).samples
    preds = [Prediction(s.id, 0, "m", "p", "h", None, error="model failed") for s in samples]
    verdicts = {(s.id, 0): Judged(s.id, 0, None, "failed", "null output") for s in samples}
    head = SAKURA().official_section(samples, preds, 1, verdicts=verdicts, judge="j")["headline"]
    assert head["total"] is None and head["label"].startswith("absent: no judged item")
    assert head["kept_out"]["null_response"] == 6
