"""MMSU and AIR-Bench foundation: hand-made rows in their exact column layouts, the official
letter rule hand-computed through `cafe score` (format failures dropped from the headline, counted
wrong beside it, the option match beside that, each labelled), the official breakdowns and
averages, export, bad rows named, and CAFE and listening controls on folders with generated
clips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cafe.audio import write_wav
from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.letters import letter_of
from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback

ANIMALS = ["dog", "cat", "cow", "owl"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def cafe(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def _clip(path: Path, i: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tone = 0.1 * np.sin(2 * np.pi * 220.0 * (i + 1) * np.arange(1600) / 16000)
    write_wav(path, tone.astype("float32"))


def mmsu_rows(root: Path, items: list[tuple[str, int, str, str]]) -> Path:
    """MMSU rows (id, answer index, category, sub-category) with a clip each -> the JSON file."""
    rows = []
    for i, (sid, ans, cat, sub) in enumerate(items):
        _clip(root / "audio" / f"{sid}.wav", i)
        rows.append({"id": sid, "audio": f"audio/{sid}.wav", "task_name": "animal_id",
                     "question": f"Which animal [{sid}]?",
                     **{f"choice_{x}": a for x, a in zip("abcd", ANIMALS, strict=True)},
                     "answer_gt": ANIMALS[ans], "category": cat, "sub-category": sub,
                     "sub-sub-category": "x", "linguistics_sub_discipline": "y"})  # fmt: skip
    path = root / "mmsu.json"
    path.write_text(json.dumps(rows))
    return path


def air_rows(root: Path, items: list[tuple[str, int, str, str]]) -> Path:
    """AIR-Bench foundation rows (uniq_id, answer index, task, dataset), clips under
    <task>_<dataset>/ -> Foundation_meta.json."""
    rows = []
    for i, (sid, ans, task, ds) in enumerate(items):
        _clip(root / f"{task}_{ds}" / f"{sid}.wav", i)
        rows.append({"path": f"{sid}.wav", "question": f"Which animal [{sid}]?",
                     **{f"choice_{x}": a for x, a in zip("abcd", ANIMALS, strict=True)},
                     "answer_gt": ANIMALS[ans], "task_name": task, "dataset_name": ds,
                     "uniq_id": sid})  # fmt: skip
    path = root / "Foundation_meta.json"
    path.write_text(json.dumps(rows))
    return path


def predictions(path: Path, responses: dict[str, str], meta: Path) -> Path:
    """The official scripts' input: each metadata row with its ``response`` (as their inference
    scripts write it; the scripts read every field from the row)."""
    rows = {str(r.get("id", r.get("uniq_id"))): r for r in json.loads(meta.read_text())}
    path.write_text("".join(json.dumps({**rows[k], "id": k, "response": v}) + "\n"
                            for k, v in responses.items()))  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("response", "letter"),
    [("A", "A"), ("The answer is B.", "B"), ("(C)", "C"), ("B\nbecause", "B"), ("", ""),
     ("None", ""), ("I think owl", None), ("Answer: C.", "A"), ("  D  ", "D")],
)  # fmt: skip
def test_letter_of_as_the_official_scripts(response, letter):
    # "Answer: C." -> A: the first character wins, as in the official scripts
    assert letter_of(response) == letter


MMSU_ITEMS = [
    ("m1", 0, "Perception", "Linguistics"),
    ("m2", 1, "Perception", "Linguistics"),
    ("m3", 2, "Perception", "Linguistics"),
    ("m4", 3, "Perception", "Paralinguistics"),
    ("m5", 0, "Perception", "Paralinguistics"),
    ("m6", 1, "Reasoning", "Linguistics"),
    ("m7", 1, "Reasoning", "Linguistics"),
]
MMSU_RESPONSES = {
    "m1": "A",  # right
    "m2": "The answer is B.",  # right: the second-to-last character
    "m3": "A\n",  # wrong (dog, not cow)
    "m4": "I think owl",  # format failure: dropped (the option match calls it right)
    "m5": "",  # empty: wrong, kept
    "m6": "None",  # wrong, kept
    "m7": "(B)",  # right
}


def test_mmsu_official_rule_hand_computed(tmp_path):
    meta = mmsu_rows(tmp_path / "mmsu", MMSU_ITEMS)
    preds = predictions(tmp_path / "p.jsonl", MMSU_RESPONSES, meta)
    out = json.loads(cafe("score", "--bench", "mmsu", "--data", str(meta),
                          "--predictions", str(preds), "--json"))  # fmt: skip
    head = out["official"]["headline"]
    # by hand: m4 dropped; m1, m2, m7 right of 6
    assert head["total"] == {"correct": 3, "total": 6, "acc": 50.0} and head["format_failures"] == 1
    pairs = head["breakdowns"]["category_sub"]
    assert pairs["Perception/Linguistics"] == {"correct": 2, "total": 3, "acc": 66.67}
    assert pairs["Perception/Paralinguistics"] == {"correct": 0, "total": 1, "acc": 0.0}
    assert pairs["Reasoning/Linguistics"] == {"correct": 1, "total": 2, "acc": 50.0}
    assert head["breakdowns"]["category"]["Perception"]["acc"] == 50.0
    variants = out["official"]["variants"]
    assert variants["counted_wrong"]["total"] == {"correct": 3, "total": 7, "acc": 42.86}
    assert variants["option_match"]["total"] == {"correct": 4, "total": 7, "acc": 57.14}
    assert "not the official figure" in variants["counted_wrong"]["label"]
    # the accuracy headline is the rule with failures counted wrong, and says so
    assert out["total"] == variants["counted_wrong"]["total"] and "counted wrong" in out["rule"]


AIR_ITEMS = [
    ("a1", 0, "Speaker_Gender", "CommonVoice"),
    ("a2", 1, "Speaker_Gender", "CommonVoice"),
    ("a3", 2, "Speaker_Gender", "VoxCeleb"),
    ("a6", 2, "Speaker_Gender", "VoxCeleb"),
    ("a4", 3, "Sound_AQA", "Clotho"),
    ("a5", 3, "Sound_AQA", "Clotho"),
]
AIR_RESPONSES = {
    "a1": "A",  # right
    "a2": "C",  # wrong
    "a3": "Answer: C.",  # the first character: A, wrong
    "a6": "C",  # right
    "a4": "xyz",  # format failure: excluded
    "a5": "D",  # right
}


def test_airbench_official_rule_hand_computed(tmp_path):
    meta = air_rows(tmp_path / "air", AIR_ITEMS)
    loaded = BENCHMARKS.get("airbench")().load(str(meta.parent))
    assert loaded.samples[0].audio == [str(meta.parent / "Speaker_Gender_CommonVoice" / "a1.wav")]
    preds = predictions(tmp_path / "p.jsonl", AIR_RESPONSES, meta)
    out = json.loads(cafe("score", "--bench", "airbench", "--data", str(meta),
                          "--predictions", str(preds), "--json"))  # fmt: skip
    head = out["official"]["headline"]
    assert head["total"] == {"correct": 3, "total": 5, "acc": 60.0} and head["dropped"] == 1
    cells = head["breakdowns"]["task_dataset"]
    assert {k: c["acc"] for k, c in cells.items()} == {
        "Sound_AQA/Clotho": 100.0, "Speaker_Gender/CommonVoice": 50.0,
        "Speaker_Gender/VoxCeleb": 50.0}  # fmt: skip
    # the README's average: the mean of the task rows (50 and 100), not the micro 60
    assert head["average"] == {"tasks": 75.0}
    assert out["official"]["variants"]["counted_wrong"]["total"]["acc"] == 50.0


def test_bad_rows_are_named_and_the_rest_load(tmp_path):
    meta = mmsu_rows(tmp_path / "mmsu", MMSU_ITEMS[:3])
    rows = json.loads(meta.read_text())
    rows[1]["answer_gt"] = "horse"
    del rows[2]["category"]
    rows.append({"question": "no id"})
    meta.write_text(json.dumps(rows))
    loaded = BENCHMARKS.get("mmsu")().load(str(meta))
    lines = [str(p) for p in loaded.problems]
    assert f"{meta}: sample m2: field answer_gt: answer is not among the choices" in lines
    assert f"{meta}: sample m3: field category: missing field" in lines
    assert f"{meta}: field id: item 4 has no id" in lines
    assert [s.id for s in loaded.samples if s.error is None] == ["m1"]


@pytest.mark.parametrize("bench", ["mmsu", "airbench"])
def test_run_export_cafe_and_listening_controls(tmp_path, bench):
    if bench == "mmsu":
        meta = mmsu_rows(tmp_path / "d", MMSU_ITEMS[:4])
    else:
        meta = air_rows(tmp_path / "d", AIR_ITEMS[:4])
    run = tmp_path / "run"
    # the letter-answering chance baseline: "(B)" is read by the letter rule
    cafe("run", "--model", "random", "-o", "letters=true", "--bench", bench, "--data", str(meta),
         "--out", str(run), "--no-progress")  # fmt: skip
    m = json.loads((run / "metrics.json").read_text())
    head = m["official"]["headline"]
    assert head["dropped"] == 0 and head["total"]["total"] == 4  # every "(X)" parses
    assert head["total"] == m["official"]["variants"]["counted_wrong"]["total"]
    assert m["accuracy"]["total"] == head["total"]
    from cafe.reports.leaderboard import row_from_run

    row = row_from_run(run, group="Baseline")
    assert (
        row.metrics["acc"] == head["total"]["acc"] and "letter rule" in row.source["official_rule"]
    )
    # export -> score reproduces the run's official figure item for item
    exported = tmp_path / "export.json"
    cafe("export", str(run), "--out", str(exported))
    items = json.loads(exported.read_text())
    assert all("response" in i and "answer_gt" in i and "choice_a" in i for i in items)
    again = json.loads(cafe("score", "--bench", bench, "--data", str(meta),
                            "--predictions", str(exported), "--json"))  # fmt: skip
    assert again["official"]["headline"]["total"] == head["total"]
    ids = [json.loads(x)["id"] for x in (run / "samples.jsonl").read_text().splitlines()]
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": i, "caption": "A tone."}) + "\n"
                            for i in ids))  # fmt: skip
    lists = {"required_events": ["tone", "hum"], "all_caption_events": ["tone", "hum"],
             "all_reasoning_events": ["tone"], "matched_events": ["tone"],
             "error_matched": [], "error_use": [], "neutral_events": [],
             "missed_events": ["hum"]}  # fmt: skip
    with OpenAILoopback(reply=lambda body: json.dumps(lists)) as srv:
        cafe("judge", str(run), "--judge", "openai-compatible", "--judge-model", "m",
             "--judge-endpoint", srv.url, "--captions", str(caps), "--no-progress",
             "--cache", str(tmp_path / "c.sqlite"))  # fmt: skip
        assert len(srv.requests) == 4
    sec = json.loads((run / "metrics.json").read_text())["cafe"]
    # every output: one matched event of one reported, one of two required missed
    assert sec["acc_per"] == pytest.approx(100.0) and sec["err_omit"] == pytest.approx(50.0)
    cafe("listen", str(run), "--judge", "none", "--no-progress")
    listening = json.loads((run / "metrics.json").read_text())["listening"]
    assert all(listening["controls"][c]["gap"] == 0.0 for c in ("silence", "noise", "shuffled"))
