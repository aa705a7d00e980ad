"""SAKURA: the real metadata's facts (4 tracks x 500 clips x 2 hops, inline options, the 300
Emotion answers with a leading space), every real item through the chance baseline with no
failed or unmapped item, the Hugging Face copy's columns, bad items named, the official rule's
stand-in (option match) hand-computed through `cafe score` and `cafe export`, the official LLM
judge through a loopback server (cached, unparsed replies kept and counted wrong), and CAFE and
listening controls on a SAKURA-shaped folder with generated clips."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from sakura_helpers import placeholder_copy, write_folder

from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.sakura import SAKURA
from cafe.cli import main
from cafe.parsing import split_options
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

HEADLINE_NOT_RUN = "official rule (LLM judge): not run; `cafe judge-official RUN` runs it"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def cafe(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def test_registered_with_its_facts():
    assert BENCHMARKS.get("sakura") is SAKURA
    info = SAKURA.info()
    assert info["versions"] == {"v1": 4000} and "LLM judge" in info["rule"]
    assert "no" in info["licence"]


def test_split_options_keeps_parentheses_inside_an_option():
    q, opts = split_options("Pick one: (a) a dog (barking) (b) a cat (c) none")
    assert q == "Pick one:" and opts == ["a dog (barking)", "a cat", "none"]
    assert split_options("No options here (a) only one") is None


def test_real_metadata_facts(shared_data):
    loaded = SAKURA().load(str(Path(shared_data) / "sakura"))
    s = loaded.samples
    assert loaded.version == "v1" and loaded.problems == [] and len(s) == 4000
    assert all(x.error is None for x in s) and len({x.id for x in s}) == 4000
    assert Counter(x.meta["track_hop"] for x in s) == {
        f"{t}/{h}": 500
        for t in ("Animal", "Emotion", "Gender", "Language")
        for h in ("single", "multi")
    }
    sizes = Counter((x.meta["track"], len(x.choices)) for x in s)
    assert sizes == {("Animal", 4): 1000, ("Emotion", 4): 1000, ("Gender", 2): 1000,
                     ("Language", 4): 1000}  # fmt: skip
    assert all(x.answer in x.choices for x in s)
    spaced = [x for x in s if "answer has surrounding spaces" in x.meta.get("quirks", [])]
    assert len(spaced) == 300 and {x.meta["track_hop"] for x in spaced} == {"Emotion/single"}
    assert all("gender" in x.meta for x in s if x.meta["track"] == "Language")
    dog = next(x for x in s if x.id == "Animal-dog28-single")
    assert dog.choices == ["dog", "crow", "cow", "rooster"] and dog.answer == "dog"
    assert dog.question.endswith("in the recording?")
    assert dog.audio == [str(Path(shared_data) / "sakura" / "Animal" / "audio" / "dog28.wav")]


def test_every_real_item_in_the_chance_baseline(shared_data, tmp_path):
    """`cafe run --model random --bench sakura --data DIR` on all 4,000 real questions (each
    clip a silent placeholder: the real audio is not here): nothing failed or unmapped."""
    data = placeholder_copy(Path(shared_data) / "sakura", tmp_path / "sakura")
    run = tmp_path / "run"
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(data),
         "--out", str(run), "--no-progress")  # fmt: skip
    m = metrics(run)
    acc = m["accuracy"]
    assert acc["total"]["total"] == 4000 and acc["failed"] == 0 and acc["unanswered"] == 0
    assert acc["parse_status"]["ok"] == 4000 and "NOT the official figure" in acc["rule"]
    official = m["official"]
    assert official["headline"] == {"label": HEADLINE_NOT_RUN, "total": None}
    match = official["variants"]["option_match"]
    assert match["total"] == acc["total"] and match["dropped"] == 0
    assert set(match["breakdowns"]["track_hop"]) == set(acc["breakdowns"]["track_hop"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["bench"]["version"] == "v1"


def test_bad_items_are_named_and_the_rest_load(tmp_path):
    root = write_folder(tmp_path / "s")
    meta_file = root / "data" / "Animal" / "metadata.json"
    meta = json.loads(meta_file.read_text())
    meta["data/Animal/audio/a2.wav"]["single_answer"] = "(d) cat"  # (d) is owl
    meta["data/Animal/audio/a2.wav"]["multi_instruction"] = "Where does it live?"  # no options
    meta_file.write_text(json.dumps(meta))
    loaded = SAKURA().load(str(root))
    lines = {str(p) for p in loaded.problems}
    assert f"{meta_file}: sample Animal-a2-single: field single_answer: answer is not among " \
        "the choices" in lines  # fmt: skip
    assert any("Animal-a2-multi: field multi_instruction: no inline options" in x for x in lines)
    assert any("unknown file hash" in x for x in lines)  # hand-made: not the release
    ok = [x for x in loaded.samples if x.error is None]
    assert len(loaded.samples) == 6 and len(ok) == 4 and loaded.version == "unknown"


def test_hugging_face_copy_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    src = write_folder(tmp_path / "src")
    meta = json.loads((src / "data" / "Animal" / "metadata.json").read_text())
    rows = [{"file": Path(k).name,
             "audio": {"bytes": (src / k).read_bytes(), "path": Path(k).name},
             **v} for k, v in meta.items()]  # fmt: skip
    out = tmp_path / "hf" / "AnimalQA" / "data"
    out.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "test-00000-of-00001.parquet")
    loaded = SAKURA().load(str(tmp_path / "hf"))
    assert [x.id for x in loaded.samples] == [
        "Animal-a1-single", "Animal-a1-multi", "Animal-a2-single", "Animal-a2-multi"]  # fmt: skip
    assert all(x.error is None for x in loaded.samples)
    clip = Path(loaded.samples[0].audio[0])
    assert clip.read_bytes() == (src / "data/Animal/audio/a1.wav").read_bytes()
    assert loaded.samples[1].answer == "Claws" and loaded.samples[1].meta["track"] == "Animal"


# hand-made predictions: id -> response (None: no prediction key at all)
RESPONSES = {
    "Animal-a1-single": "dog",  # right
    "Animal-a1-multi": "(c)",  # right: the letter of Claws
    "Animal-a2-single": "dog or cow",  # two options: wrong
    "Animal-a2-multi": None,  # unanswered: wrong, stays in the denominator
    "Gender-g1-single": "Male",  # wrong
    "Gender-g1-multi": "Ms.",  # right
}


def test_score_and_export_hand_computed(tmp_path):
    root = write_folder(tmp_path / "s")
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": k, **({"response": v} if v else {})}) + "\n"
                             for k, v in RESPONSES.items()))  # fmt: skip
    out = json.loads(cafe("score", "--bench", "sakura", "--data", str(root),
                          "--predictions", str(preds), "--json"))  # fmt: skip
    match = out["official"]["variants"]["option_match"]
    assert "NOT the official figure" in match["label"]
    assert out["official"]["headline"]["total"] is None
    # by hand: 3 of 6; Animal 2/4, Gender 1/2; single: Animal 1/2, Gender 0/1; multi: 1/2, 1/1
    assert match["total"] == {"correct": 3, "total": 6, "acc": 50.0}
    cells = match["breakdowns"]["track_hop"]
    assert [cells[k]["acc"] for k in ("Animal/single", "Animal/multi", "Gender/single",
                                      "Gender/multi")] == [50.0, 50.0, 0.0, 100.0]  # fmt: skip
    # SAKURA's average: the mean of the tracks, per hop and overall
    assert match["average"] == {"single": 25.0, "multi": 75.0, "all": 50.0}
    assert out["total"] == match["total"] and out["unanswered"] == 1

    # a run, exported as the official judge's input (one file per track x hop), scores the same
    # item for item
    run = tmp_path / "run"
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(root), "--out", str(run),
         "--no-progress")  # fmt: skip
    exported = tmp_path / "export"
    cafe("export", str(run), "--out", str(exported))
    assert sorted(p.name for p in exported.iterdir()) == [
        "Animal_multi.json",
        "Animal_single.json",
        "Gender_multi.json",
        "Gender_single.json",
    ]
    doc = json.loads((exported / "Gender_single.json").read_text())
    assert doc["attribute"] == "Gender" and doc["type"] == "single"
    entry = doc["results"]["data/Gender/audio/g1.wav"]
    assert entry["instruction"] == "Please identify the gender [g1s]. (a) Female (b) Male"
    assert entry["label"] == " (a) Female"  # as saved, leading space kept
    raw = {p.sample_id: p.raw_output for p in RunStore(run).predictions()}
    assert entry["response"] == raw["Gender-g1-single"]  # the whole response
    again = json.loads(cafe("score", "--bench", "sakura", "--data", str(root),
                            "--predictions", str(exported), "--json"))  # fmt: skip
    assert again["total"] == metrics(run)["accuracy"]["total"]


# sample id -> the judge's reply (the instruction's [tag] tells the prompts apart)
JUDGE = {
    "a1s": "Explanation: it names the dog.\nJudgement: correct",
    "a1m": "Explanation: wrong feature.\nJudgement: incorrect",
    "a2s": "Explanation: cow.\nJudgement: **Correct**",  # officially wrong: the markup stays
    "a2m": "I am not sure what to say.",  # no judgement line: kept, counted wrong
    "g1s": "Explanation: says female.\nJudgement: correct",
    "g1m": "Explanation: Mr. is another option.\nJudgement: incorrect",
}


def test_official_llm_judge_through_a_loopback_server(tmp_path):
    root = write_folder(tmp_path / "s")
    run = tmp_path / "run"
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(root), "--out", str(run),
         "--no-progress")  # fmt: skip
    assert metrics(run)["official"]["headline"]["total"] is None
    from cafe.reports.leaderboard import LeaderboardError, row_from_run

    # not judged yet: the row has no accuracy (the labelled variant does not stand in for it)
    with pytest.raises(LeaderboardError, match="official accuracy is absent: .*not run"):
        row_from_run(run, group="LALM")

    def reply(body):
        # the official request: temperature 0, top_p 0.9, no reply budget; a system message
        assert body["temperature"] == 0 and body["top_p"] == 0.9 and "max_tokens" not in body
        system, user = body["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        prompt = user["content"]
        tag = next(t for t in JUDGE if f"[{t}]" in prompt)
        if tag == "a1s":  # the question with its inline options, the raw answer, the reply
            assert "(a) dog (b) cat (c) cow (d) owl" in prompt and "\n(a) dog\n" in prompt
            assert "<answer>" in prompt
        if tag == "g1s":
            assert "\n (a) Female\n" in prompt  # the label as saved: its leading space kept
        return JUDGE[tag]

    args = ["judge-official", str(run), "--judge", "openai-compatible",
            "--judge-endpoint", "URL", "--cache", str(tmp_path / "j.sqlite")]  # fmt: skip
    with OpenAILoopback(reply=reply) as srv:
        args[args.index("URL")] = srv.url
        cafe(*args)
        assert len(srv.requests) == 6
        assert {r["model"] for r in srv.requests} == {"gpt-4o-2024-11-20"}  # the official judge
        official = metrics(run)["official"]
        # by hand, the official pattern: a1s, g1s correct; a2s ("**Correct**") and a2m
        # (unmatched) stay in the denominator as wrong -> 2 of 6; single: Animal 50, Gender
        # 100 -> 75; multi 0; tracks: Animal 25, Gender 50 -> 37.5
        head = official["headline"]
        assert head["total"] == {"correct": 2, "total": 6, "acc": 33.33}
        assert head["average"] == {"single": 75.0, "multi": 0.0, "all": 37.5}
        assert "openai-compatible:gpt-4o-2024-11-20" in head["label"]
        assert head["kept_out"]["null_response"] == 0 and head["dropped"] == 0
        # the friendlier reading beside it, labelled: a2s counts there -> 3 of 6
        lenient = official["variants"]["lenient_judgement"]
        assert lenient["total"]["correct"] == 3 and "NOT the official" in lenient["label"]
        assert official["verdicts"] == {"ok": 5, "none": 0, "unparseable": 1, "failed": 0}
        assert "option_match" in official["variants"]
        rows = [json.loads(x) for x in (run / "official_judgements.jsonl").read_text().splitlines()]
        unparsed = [r for r in rows if r["status"] == "unparseable"]
        assert [r["sample_id"] for r in unparsed] == ["Animal-a2-multi"]
        assert unparsed[0]["raw_reply"] == JUDGE["a2m"]  # kept for manual review
        # again: every verdict from the cache, the same figure
        cafe(*args)
        assert len(srv.requests) == 6
        assert metrics(run)["official"]["headline"]["total"]["correct"] == 2
    # the run report's table and the leaderboard row carry the judged figure, the variant
    # beside it labelled
    cafe("report", str(run), "--no-figures")
    summary = (run / "report" / "summary.md").read_text()
    assert "## Official figure and its labelled variants" in summary
    assert "| official | **33.33** (2/6) |" in summary and "| option_match |" in summary
    assert "NOT the official figure" in summary
    row = row_from_run(run, group="LALM")
    assert row.metrics["acc"] == 33.33 and "LLM judge" in row.source["official_rule"]
    assert "NOT the official" in row.source["accuracy_variant"]["label"]
    # resuming the finished run keeps the judged figure (its predictions did not change)
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(root), "--out", str(run),
         "--no-progress")  # fmt: skip
    assert metrics(run)["official"]["headline"]["total"]["correct"] == 2


def test_cafe_judge_and_listening_controls(tmp_path):
    root = write_folder(tmp_path / "s")
    run = tmp_path / "run"
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(root), "--out", str(run),
         "--no-progress", "--runs", "2")  # fmt: skip
    ids = [json.loads(x)["id"] for x in (run / "samples.jsonl").read_text().splitlines()]
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": i, "caption": "A tone."}) + "\n"
                            for i in ids))  # fmt: skip
    # every output: one matched event and one invented -> Acc_per 50, Err_per 50
    lists = {"required_events": ["tone"], "all_caption_events": ["tone"],
             "all_reasoning_events": ["tone", "horn"], "matched_events": ["tone"],
             "error_matched": ["horn"], "error_use": [], "neutral_events": [],
             "missed_events": []}  # fmt: skip
    with OpenAILoopback(reply=lambda body: json.dumps(lists)) as srv:
        cafe("judge", str(run), "--judge", "openai-compatible", "--judge-model", "m",
             "--judge-endpoint", srv.url, "--captions", str(caps), "--no-progress",
             "--cache", str(tmp_path / "c.sqlite"))  # fmt: skip
        # 6 items x 2 runs; a run that wrote the same output as the other asks the same
        # prompt, which is one call (cafe.caller shares identical prompts)
        preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
        assert len(preds) == 12
        assert len(srv.requests) == len({(p["sample_id"], p["raw_output"]) for p in preds})
    sec = metrics(run)["cafe"]
    assert sec["acc_per"] == pytest.approx(50.0) and sec["err_per"] == pytest.approx(50.0)
    assert set(sec["breakdowns"]["track_hop"]) == {
        "Animal/single", "Animal/multi", "Gender/single", "Gender/multi"}  # fmt: skip
    cafe("decay", str(run))  # perception decay over the benchmark's items
    assert "decay" in metrics(run)
    # listening controls: the chance baseline never listens, so every gap is exactly zero
    cafe("listen", str(run), "--judge", "none", "--no-progress")
    listening = metrics(run)["listening"]
    for name in ("silence", "noise", "shuffled", "text-only"):
        c = listening["controls"][name]
        assert c["gap"] == 0.0 and c["n"] == 6, (name, c)  # items, over 2 runs each
    control = json.loads((run.with_name("run-ctl-silence") / "metrics.json").read_text())
    assert control["official"]["variants"]["option_match"]["total"]["total"] == 12


def test_official_judge_through_the_batch_api_left_and_collected(tmp_path):
    from cafe.judge.verdict import VERDICTS_FILE
    from cafe.steps.judged import official_judge_run
    from cafe.testing.batch_loopback import BatchPlan

    root = write_folder(tmp_path / "s")
    run = tmp_path / "run"
    cafe("run", "--model", "random", "--bench", "sakura", "--data", str(root), "--out", str(run),
         "--no-progress")  # fmt: skip

    def reply(body):
        assert body["top_p"] == 0.9  # the official sampling, in every batch line too
        return JUDGE[next(t for t in JUDGE if f"[{t}]" in body["messages"][-1]["content"])]

    fast = {"poll_s": 0.02, "collect_s": 0.2}
    with OpenAILoopback(reply=reply, batch_plans=[BatchPlan(polls=3), BatchPlan()]) as srv:
        go = dict(endpoints=(srv.url,), cache=tmp_path / "b.sqlite", batch=True)
        sec = official_judge_run(run, "openai-compatible", **go,
                                 batch_options={**fast, "wait": False})  # fmt: skip
        # submitted and still running: no verdicts, the headline stays "not run"
        assert sec["pending"] == 6 and not (run / VERDICTS_FILE).exists()
        assert metrics(run)["official"]["headline"]["total"] is None
        sec = official_judge_run(run, "openai-compatible", **go, batch_options=fast)
        assert srv.requests == [] and srv.batches.created == 1  # the same batch, collected
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 6
    head = metrics(run)["official"]["headline"]
    assert head["total"] == {"correct": 2, "total": 6, "acc": 33.33}  # the direct test's count
    assert len((run / VERDICTS_FILE).read_text().splitlines()) == 6
