"""The official matching rule, the accuracy section, and `cafe score` against independent
transcriptions of the official MMAU / MMAR scripts on the real metadata."""

from __future__ import annotations

import json
import os
import re
import string

import pytest
from click.testing import CliRunner
from official_scripts import mmar_evaluate, mmau_evaluate

from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.cli import score_command
from cafe.benchmarks.scoring import accuracy_section, score_file, score_loaded
from cafe.benchmarks.string_match import is_correct, tokens
from cafe.records import Prediction, Sample

CHOICES = ["Man", "Woman", "Child", "Robot"]


def test_tokens_lowercase_word_set():
    assert tokens("The Dog, the DOG! barks-twice") == {"the", "dog", "barks", "twice"}
    assert tokens("") == set()
    assert tokens("日本 語") == {"日本", "語"}


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("Man", True),
        ("man.", True),
        ("The answer is: Man", True),  # extra words not in other choices are fine
        ("B", False),  # a bare letter carries no answer token
        ("Man or Woman", False),
        ("Woman", False),
        ("", False),
        ("   ", False),
        (None, False),
    ],
)
def test_is_correct_basic(prediction, expected):
    assert is_correct(prediction, "Man", CHOICES) is expected


def test_shared_tokens_and_equal_token_choices():
    choices = ["Dog barking", "Dog howling", "Cat meowing"]
    # "dog" is shared with the answer, so it is not a distractor token
    assert is_correct("dog barking", "Dog barking", choices)
    assert not is_correct("dog", "Dog barking", choices)  # misses "barking"
    assert not is_correct("dog barking howling", "Dog barking", choices)
    # a choice whose token set equals the answer's adds nothing (duplicate choices)
    assert is_correct("fourteen", "fourteen", ["four", "nine", "fourteen", "Fourteen."])
    # answer tokens inside a longer choice: that choice's extra tokens are distractors
    assert is_correct("two", "two", ["two", "two or three"])
    assert not is_correct("two or three", "two", ["two", "two or three"])


def _sample(sid, answer, choices, **meta):
    return Sample(sid, "t", "v", "q", choices, answer, [], meta=meta)


def _pred(sid, run, answer, error=None):
    return Prediction(sid, run, "m", "s", "h", answer, answer=answer, error=error)


def test_accuracy_section_hand_computed():
    samples = [
        _sample("a", "Man", CHOICES, task="sound", tags=["x", "y"]),
        _sample("b", "Child", CHOICES, task="sound", tags=["y"]),
        _sample("c", "Robot", CHOICES, task="music", tags="x"),
        _sample("d", None, CHOICES, task="music", tags="x"),  # no answer: unscorable
    ]
    preds = [
        # run 0: a right, b wrong, c unparsed
        _pred("a", 0, "Man"),
        _pred("b", 0, "Woman"),
        _pred("c", 0, None),
        # run 1: a right, b right, c failed
        _pred("a", 1, "man"),
        _pred("b", 1, "child"),
        _pred("c", 1, None, error="audio: file not found"),
        _pred("d", 1, "Man"),
    ]
    sec = accuracy_section(
        samples, preds, {"task": lambda s: s.meta["task"], "tags": lambda s: s.meta["tags"]}
    )
    # 3 scorable items x 2 runs = 6; correct = 1 + 2 = 3
    assert sec["total"] == {"correct": 3, "total": 6, "acc": 50.0}
    assert sec["unanswered"] == 2 and sec["failed"] == 1 and sec["unscorable"] == 1
    assert sec["official_denominator"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert sec["parse_rate"] == round(100 * 4 / 6, 2)
    assert sec["breakdowns"]["task"]["sound"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert sec["breakdowns"]["task"]["music"] == {"correct": 0, "total": 2, "acc": 0.0}
    # list values count under each: x = a (2 right) + c (0); y = a (2) + b (1)
    assert sec["breakdowns"]["tags"]["x"] == {"correct": 2, "total": 4, "acc": 50.0}
    assert sec["breakdowns"]["tags"]["y"] == {"correct": 3, "total": 4, "acc": 75.0}
    # the official pair: c's two (item, run)s have no answer and leave every denominator
    assert sec["official_breakdowns"]["task"]["sound"] == {"correct": 3, "total": 4, "acc": 75.0}
    # 0 of 0 is no figure
    assert sec["official_breakdowns"]["task"]["music"] == {"correct": 0, "total": 0, "acc": None}
    assert sec["official_breakdowns"]["tags"]["x"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert sec["official_breakdowns"]["tags"]["y"] == {"correct": 3, "total": 4, "acc": 75.0}
    assert "skipped" in sec["official_label"]
    runs = sec["runs"]
    assert runs["n"] == 2 and runs["per_run"] == [33.33, 66.67]
    assert runs["mean"] == 50.0
    assert runs["std"] == round((2 * (100 / 6) ** 2) ** 0.5, 2)  # sample std of 33.3 / 66.7


def test_missing_prediction_counts_wrong_and_failed_sample():
    samples = [_sample("a", "Man", CHOICES), _sample("b", "Man", CHOICES)]
    samples[1].error = "answer: answer is not among the choices"
    sec = accuracy_section(samples, [_pred("a", 0, "Man")], {})
    assert sec["total"] == {"correct": 1, "total": 2, "acc": 50.0}
    assert sec["unanswered"] == 1 and sec["failed"] == 1
    assert sec["official_denominator"]["total"] == 1
    # a run that produced nothing at all still counts when the run count is given
    sec = accuracy_section(samples, [_pred("a", 0, "Man")], {}, runs=2)
    assert sec["total"] == {"correct": 1, "total": 4, "acc": 25.0}
    assert sec["runs"]["per_run"] == [50.0, 0.0] and sec["runs"]["n"] == 2


# --- agreement with the official scripts on the real metadata ----------------------------------

WORDS = ["maybe", "sound", "clearly", "xylophone"]


def _strategies(item, i):
    """Prediction per strategy name for one metadata item (None = key missing)."""
    choices, answer = item["choices"], item["answer"]
    idx = next((k for k, c in enumerate(choices) if c == answer), 0)
    other = choices[(idx + 1) % len(choices)]
    other_words = sorted(tokens(other) - tokens(answer)) or ["zzz"]
    return {
        "answer": answer,
        "letter": string.ascii_uppercase[idx],
        "letter_paren": f"({string.ascii_uppercase[idx]}) {answer}",
        "joined": ", ".join(choices),
        "answer_and_other": f"{answer} or {other}",
        "distractor_word": f"{answer} {other_words[i % len(other_words)]}",
        "extra_word": f"{WORDS[i % len(WORDS)]}: {answer}",
        "other_choice": other,
        "empty": "",
        "missing": None,
        "mixed": [answer, "", None, other, f"{answer}!", answer.upper(), "A"][i % 7],
    }


REAL = [
    ("mmau", "mmau/mmau-test-mini.json"),
    ("mmau", "mmau/mmau-test-mini-original.json"),
    ("mmar", "mmar/MMAR-meta.jsonl"),
    ("mmar", "mmar/MMAR-meta-v1.json"),
]
KEY = {"mmau": "model_output", "mmar": "answer_prediction"}
GROUPS = {
    "mmau": ("task", "difficulty", "sub-category"),
    "mmar": ("modality", "category", "sub-category"),
}


def _read(path):
    with open(path) as f:
        if path.endswith(".jsonl"):
            return [json.loads(line) for line in f if line.strip()]
        return json.load(f)


@pytest.mark.parametrize(("bench", "rel"), REAL)
def test_score_agrees_with_official_scripts(shared_data, tmp_path, bench, rel):
    meta_path = os.path.join(shared_data, rel)
    items = _read(meta_path)
    per_item = [_strategies(item, i) for i, item in enumerate(items)]
    b = BENCHMARKS.get(bench)()
    loaded = b.load(meta_path)
    # the scripts read only these fields; dropping the long ones (rubric…) keeps the test fast
    used = {"id", "answer", "choices", *GROUPS[bench]}
    items = [{k: v for k, v in it.items() if k in used} for it in items]
    ext = ".jsonl" if bench == "mmar" else ".json"  # each script's own input format
    for name in per_item[0]:
        out = []
        for item, strat in zip(items, per_item, strict=True):
            row = dict(item)
            if strat[name] is not None:
                row[KEY[bench]] = strat[name]
            out.append(row)
        pred_path = tmp_path / f"{name}{ext}"
        with open(pred_path, "w") as f:
            if ext == ".jsonl":
                f.writelines(json.dumps(r) + "\n" for r in out)
            else:
                json.dump(out, f)
        official = (mmau_evaluate if bench == "mmau" else mmar_evaluate)(pred_path)
        section, _ = score_loaded(b, loaded, pred_path)
        ours = section["official_denominator"]
        assert (ours["correct"], ours["total"]) == (official["correct"], official["total"]), name
        missing = sum(1 for s in per_item if s[name] is None)
        assert section["unanswered"] == missing
        assert section["total"] == {
            "correct": official["correct"],
            "total": len(items),
            "acc": round(100 * official["correct"] / len(items), 2),
        }
        for group in GROUPS[bench]:
            for value, (corr, tot) in official["groups"][group].items():
                assert section["breakdowns"][group][value]["correct"] == corr, (name, value)
                # the official pair of every breakdown cell: items without a prediction skipped
                got = section["official_breakdowns"][group][value]
                assert (got["correct"], got["total"]) == (corr, tot), (name, group, value)
        # item for item
        for item, strat in zip(items, per_item, strict=True):
            if strat[name] is not None:
                assert (
                    is_correct(strat[name], item["answer"], item["choices"])
                    == official["matches"][item["id"]]
                ), (name, item["id"])
    # anchors counted by hand from the rule (SPEC §9), independent of both scorers: the answer
    # text itself always scores (every answer has a word); a bare letter scores only where the
    # answer's whole token set is that one letter; an empty or missing prediction never scores
    correct = {}
    for name in ("answer", "letter", "empty", "missing"):
        section, _ = score_loaded(b, loaded, tmp_path / f"{name}{ext}")
        correct[name] = section["total"]["correct"]
    letter_words = sum(
        set(re.findall(r"\w+", it["answer"].lower())) == {strat["letter"].lower()}
        for it, strat in zip(items, per_item, strict=True)
    )
    assert correct == {"answer": len(items), "letter": letter_words, "empty": 0, "missing": 0}


def test_answer_strategy_figures(shared_data, tmp_path):
    """Hand-checkable anchors on the real files: predicting the answer text scores 100% on
    MMAU test-mini v05.15.25 and a bare letter scores (almost) nothing."""
    meta = os.path.join(shared_data, "mmau/mmau-test-mini.json")
    items = _read(meta)
    p = tmp_path / "p.json"
    p.write_text(json.dumps([{"id": it["id"], "model_output": it["answer"]} for it in items]))
    assert score_file("mmau", meta, str(p))[0]["total"]["acc"] == 100.0
    letters = [
        {"id": it["id"], "model_output": "ABCDEFGH"[it["choices"].index(it["answer"])]}
        for it in items
    ]
    p.write_text(json.dumps(letters))
    sec = score_file("mmau", meta, str(p))[0]
    # a letter scores only where it is itself a word of the answer ("a" / "b" ...)
    expected = sum(
        is_correct(x["model_output"], it["answer"], it["choices"])
        for x, it in zip(letters, items, strict=True)
    )
    assert sec["total"]["correct"] == expected < 20
    # counted without the scorer: 2 answers of v05.15.25 are just their own letter ("a" as A, ...)
    by_hand = [
        it["id"]
        for x, it in zip(letters, items, strict=True)
        if set(re.findall(r"\w+", it["answer"].lower())) == {x["model_output"].lower()}
    ]
    assert sec["total"]["correct"] == len(by_hand) == 2


def test_score_cli_json_and_table(shared_data, tmp_path):
    meta = os.path.join(shared_data, "mmar/MMAR-meta.jsonl")
    items = _read(meta)
    rows = [{"id": it["id"], "model_prediction": it["answer"]} for it in items[:10]]
    rows.append({"id": items[10]["id"], "answer_prediction": "nonsense"})
    rows.append({"id": "not-a-real-id", "answer_prediction": "x"})
    p = tmp_path / "preds.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{torn\n")
    res = CliRunner().invoke(
        score_command, ["--bench", "mmar", "--data", meta, "--predictions", str(p), "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["total"] == {"correct": 10, "total": 1000, "acc": 1.0}
    assert out["official_denominator"] == {"correct": 10, "total": 11, "acc": 90.91}
    assert out["unanswered"] == 989
    assert out["bench"]["version"] == "v2"
    assert sum(c["total"] for c in out["breakdowns"]["modality"].values()) == 1000
    assert set(out["breakdowns"]["isolation"]) == {"isolated", "mixed"}
    assert "not-a-real-id" in res.stderr and "line 13" in res.stderr
    res = CliRunner().invoke(
        score_command, ["--bench", "mmar", "--data", meta, "--predictions", str(p)]
    )
    assert res.exit_code == 0
    assert "total, official denominator" in res.stdout and "Cultural Layer" in res.stdout
    # the old --meta spelling: the same table, and a note saying what to use
    old = CliRunner().invoke(
        score_command, ["--bench", "mmar", "--meta", meta, "--predictions", str(p)]
    )
    assert old.exit_code == 0 and old.stdout == res.stdout
    assert "note: --meta is deprecated, use --data\n" in old.stderr


def test_score_cli_refuses_answerless_metadata(tmp_path):
    items = [
        {
            "id": f"t{i}",
            "audio_id": f"./test-audios/t{i}.wav",
            "question": "q?",
            "choices": ["a b", "c d"],
            "task": "sound",
            "difficulty": "easy",
            "sub-category": "x",
            "category": "Reasoning",
            "split": "test",
        }
        for i in range(3)
    ]
    meta = tmp_path / "mmau-test.json"
    meta.write_text(json.dumps(items))
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps([{"id": "t0", "model_output": "a b"}]))
    res = CliRunner().invoke(
        score_command, ["--bench", "mmau", "--data", str(meta), "--predictions", str(preds)]
    )
    assert res.exit_code == 1
    assert "has no answers (mmau test)" in res.output and "cannot be scored" in res.output


OCTAVE = "BV16j411E7Z9_00-00-13_00-00-34"  # v1 answer "Octave interval leap", not a choice


def test_mmar_v1_answers_outside_the_choices_run_and_are_scored_on_the_answer_text(
    shared_data, tmp_path
):
    """MMAR v1's five answers that are not among their choices: the runner keeps them (no
    failure before the model is asked) and `cafe score` applies the official rule to the answer
    text, as the official script does, with one data warning per item. For "Octave interval
    leap" the other choices' words minus the answer's are {simulates, bell, chromatic, ...}:
    "Octave interval leap" matches, "Octave interval leap simulates bell" (v2's answer) does
    not; "Colombian" misses "american" of v1's "American\\nColombian"."""
    from cafe.runner.plan import check_samples

    meta = os.path.join(shared_data, "mmar", "MMAR-meta-v1.json")
    loaded = BENCHMARKS.get("mmar")().load(meta)
    samples, problems = check_samples(loaded)
    warned = [s.id for s in samples if s.meta.get("data_warning")]
    assert len(warned) == 5 and not [s for s in samples if s.error] and problems == []
    rows = [
        {"id": OCTAVE, "answer_prediction": "Octave interval leap"},
        {"id": "BV1NtQuYTELJ_00-00-00_00-00-26", "answer_prediction": "Colombian"},
        {"id": "BV1P4411677K_0-00_0-20", "answer_prediction": "professional performance level"},
    ]
    by_id = {it["id"]: it for it in _read(meta)}
    rows = [{**by_id[r["id"]], **r} for r in rows]  # the official script reads the whole item
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    official = mmar_evaluate(p)
    section, probs = score_file("mmar", meta, str(p))
    assert official["matches"] == {
        OCTAVE: True, "BV1NtQuYTELJ_00-00-00_00-00-26": False, "BV1P4411677K_0-00_0-20": False
    }  # fmt: skip
    assert section["official_denominator"] == {"correct": 1, "total": 3, "acc": 33.33}
    flagged = [pr for pr in probs if pr.message.startswith("data warning")]
    assert sorted(pr.sample_id for pr in flagged) == sorted(warned)
    rows[0]["answer_prediction"] = "Octave interval leap simulates bell"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert score_file("mmar", meta, str(p))[0]["official_denominator"]["correct"] == 0


def _official_file(path, rows):
    path.write_text(json.dumps(rows))
    return str(path)


def test_version_is_the_release_the_predictions_match(shared_data, tmp_path):
    """An MMAU folder holds both test-mini releases: original-release predictions (whole items,
    as the official script reads them, predicting the answer) are scored against the original,
    not silently against v05.15.25 (where 102+ of their ids are unknown and answers differ)."""
    folder = os.path.join(shared_data, "mmau")
    for version, name in (("original", "mmau-test-mini-original.json"),
                          ("v05.15.25", "mmau-test-mini.json")):  # fmt: skip
        items = _read(os.path.join(folder, name))
        rows = [{**it, "model_output": it["answer"]} for it in items]
        preds = _official_file(tmp_path / f"{version}.json", rows)
        section, _ = score_file("mmau", folder, preds)
        assert section["bench"]["version"] == version
        assert section["total"]["acc"] == 100.0
        fit = section["bench"]["chosen_by"]["fit"]
        assert fit[version] == {"unknown_ids": 0, "different_answers": 0}
        other = next(v for v in fit if v != version)
        assert fit[other]["unknown_ids"] > 100 and fit[other]["different_answers"] > 0
    res = CliRunner().invoke(
        score_command, ["--bench", "mmau", "--data", folder, "--predictions", preds]
    )
    assert res.exit_code == 0 and "note: scored against mmau v05.15.25, the release" in res.stderr


def test_predictions_that_fit_two_releases_are_refused_naming_both(shared_data, tmp_path):
    """MMAR v1 and v2 share their 1000 ids; predictions without answers cannot tell them apart:
    refused, naming both; with the items' v1 answers they are v1's."""
    folder = os.path.join(shared_data, "mmar")
    items = _read(os.path.join(folder, "MMAR-meta-v1.json"))
    bare = _official_file(tmp_path / "bare.json",
                          [{"id": it["id"], "answer_prediction": "x"} for it in items])  # fmt: skip
    res = CliRunner().invoke(
        score_command, ["--bench", "mmar", "--data", folder, "--predictions", bare]
    )
    assert res.exit_code != 0
    assert "fits v1 and v2 equally" in res.output and "--version v1 or --version v2" in res.output
    full = _official_file(tmp_path / "full.json",
                          [{**it, "answer_prediction": it["answer"]} for it in items])  # fmt: skip
    section, _ = score_file("mmar", folder, full)
    assert section["bench"]["version"] == "v1"
    # v2 fixed 6 answers; one of them differs from v1 only by a trailing space (not a difference)
    assert section["bench"]["chosen_by"]["fit"]["v2"] == {"unknown_ids": 0, "different_answers": 5}
    assert score_file("mmar", folder, bare, version="v2")[0]["bench"]["version"] == "v2"
    # forced onto the other release, the v1 items' answers are said to differ (5 of them)
    section, problems = score_file("mmar", folder, full, version="v2")
    assert section["different_answers"] == 5
    assert any("5 item(s) carry an answer different from mmar v2's" in str(p) for p in problems)


def test_null_and_non_string_predictions_are_counted_and_named(shared_data, tmp_path):
    meta = os.path.join(shared_data, "mmau", "mmau-test-mini.json")
    items = _read(meta)[:4]
    rows = [
        {"id": items[0]["id"], "model_output": items[0]["answer"]},
        {"id": items[1]["id"], "model_output": None},
        {"id": items[2]["id"], "model_output": 3},
        {"id": items[3]["id"], "model_output": ["a list"]},
    ]
    preds = _official_file(tmp_path / "p.json", rows)
    section, problems = score_file("mmau", meta, preds)
    assert section["non_string_predictions"] == 3
    assert section["official_denominator"] == {"correct": 1, "total": 1, "acc": 100.0}
    named = {p.sample_id: p.message for p in problems if p.message.startswith("prediction is")}
    assert named == {
        items[1]["id"]: "prediction is null: counted unanswered",
        items[2]["id"]: "prediction is not a string (int): counted unanswered",
        items[3]["id"]: "prediction is not a string (list): counted unanswered",
    }
    res = CliRunner().invoke(
        score_command, ["--bench", "mmau", "--data", meta, "--predictions", preds]
    )
    assert "3 null or non-string prediction(s) counted unanswered" in res.stderr


def test_a_file_with_another_known_key_gets_one_line_naming_key(shared_data, tmp_path):
    """The MMAU README names the field model_prediction; the official script reads model_output:
    one line says so and names --key, instead of a warning per item."""
    meta = os.path.join(shared_data, "mmau", "mmau-test-mini.json")
    items = _read(meta)
    rows = [{"id": it["id"], "model_prediction": it["answer"]} for it in items]
    preds = _official_file(tmp_path / "p.json", rows)
    res = CliRunner().invoke(
        score_command, ["--bench", "mmau", "--data", meta, "--predictions", preds]
    )
    assert res.exit_code == 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1
    assert "1000 item(s) have 'model_prediction': pass --key model_prediction" in lines[0]
    again = CliRunner().invoke(
        score_command,
        ["--bench", "mmau", "--data", meta, "--predictions", preds, "--key", "model_prediction",
         "--json"],
    )  # fmt: skip
    assert json.loads(again.stdout)["total"]["acc"] == 100.0


def test_an_average_over_no_row_prints_absent_not_none():
    from cafe.benchmarks.official import format_official
    from cafe.reports.run_report import official_md

    fig = {"total": {"correct": 0, "total": 0, "acc": None}, "average": {"tasks": None, "d": 5.0}}
    section = {"rule": "r", "headline": fig}
    assert "average tasks absent, d 5.0" in format_official(section)
    assert "tasks absent, d 5.0" in "\n".join(official_md(section))
    assert "None" not in format_official(section) + "\n".join(official_md(section))
