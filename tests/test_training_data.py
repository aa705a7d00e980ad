"""Offline data pipeline from AVQA-style clips with ground-truth events (rule stand-ins for the
LLM stages): counts per stage, "not suitable", filters, balanced pools, resumability, torn lines,
output formats, and bad input named by file, id and field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cafe.audio import write_wav
from cafe.parsing import parse_sections
from cafe.records import InputError
from cafe.training.data.pipeline import run_pipeline
from cafe.training.data.rules import score_question, write_question


def _ev(label, on, off, required=False, **attrs):
    return {"label": label, "onset": on, "offset": off, "required": required, "attributes": attrs}


CLIPS = [
    # three barks and a horn: every dimension but pitch is suitable
    {
        "id": "c1",
        "events": [
            _ev("dog_bark", 0.0, 0.3, True),
            _ev("dog_bark", 1.0, 1.3),
            _ev("dog_bark", 2.0, 2.3),
            _ev("car_horn", 2.5, 3.5),
        ],
    },
    # one pitched tone: counting/timbre/pitch only (temporal needs two sources, rhythm three hits)
    {"id": "c2", "events": [_ev("tone", 0.5, 2.0, True, pitch="rising")]},
    # two sources, two events
    {"id": "c3", "events": [_ev("siren", 0.0, 1.0, True), _ev("bell", 1.2, 1.6)]},
]


@pytest.fixture
def clips_file(tmp_path):
    rows = []
    for c in CLIPS:
        write_wav(tmp_path / f"{c['id']}.wav", np.zeros(8000, dtype=np.float32))
        rows.append({"id": c["id"], "audio": f"{c['id']}.wav", "events": c["events"]})
    path = tmp_path / "clips.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Answerer:
    """Outcomes per dimension: temporal always right, timbre always wrong, others mixed."""

    def __init__(self):
        self.calls = 0

    def __call__(self, samples):
        self.calls += 1
        table = {"temporal": [True] * 4, "timbre": [False] * 4}
        return {s.id: table.get(s.meta["dimension"], [True, False, False, True]) for s in samples}


def _recipe(clips_file, sft_size=2, **data):
    return {
        "base_model": "unused-here",
        "data": {"source": "clips", "clips": str(clips_file), "sft_size": sft_size, **data},
    }


#: the four aspects of section 4.1 (the default) plus event counting, opted in
WITH_COUNTING = ["counting", "pitch", "rhythm", "temporal", "timbre"]


def test_rules_not_suitable_and_scores():
    c2 = {"id": "c2", "events": CLIPS[1]["events"]}
    assert write_question(c2, "temporal", ["bell"]) is None  # one source: nothing to order
    assert write_question(c2, "rhythm", ["bell"]) is None
    q = write_question(c2, "pitch", ["bell"])
    assert q["choices"]["ABCD".index(q["answer"])] == "rising"
    counting = write_question({"id": "c1", "events": CLIPS[0]["events"]}, "counting", [])
    assert counting["choices"]["ABCD".index(counting["answer"])] == "three"
    # depth: 2 + combines events + two sources + three or more events = 5
    assert score_question({"events": CLIPS[0]["events"]}, {"dimension": "counting"})["score"] == 5
    # a single event, timbre: 2 -> dropped below 4
    low = score_question({"events": CLIPS[1]["events"]}, {"dimension": "timbre"})
    assert low["score"] == 2 and low["decision"] == "drop" and low["analysis"]


def test_pipeline_offline_counts_and_outputs_with_counting_opted_in(clips_file, tmp_path):
    lines: list[str] = []
    answerer = Answerer()
    recipe = _recipe(clips_file, dimensions=WITH_COUNTING)
    out = run_pipeline(recipe, workdir=tmp_path / "w", answerer=answerer, echo=lines.append)
    text = "\n".join(lines)
    # 3 clips x 5 dimensions (counting opted in) = 15 asked; not suitable: c2 temporal+rhythm,
    # c3 rhythm+pitch, c1 pitch -> 5; written 10
    assert "questions [rule stand-in]: asked 15, written 10, not_suitable 5, failed 0" in text
    # kept >= 4: c1 counting/temporal/rhythm/timbre (5,5,5,4); c3 counting/temporal (4,4);
    # c3 timbre = 2+1 = 3 dropped; c2 counting 3, pitch 2, timbre 2 dropped -> 6 kept
    assert "question_filter [rule stand-in]: scored 10, kept 6" in text
    # temporal (c1, c3) always right, timbre (c1) always wrong -> 3 kept: c1 counting, c1 rhythm,
    # c3 counting
    assert "difficulty: answered 6, kept 3, always_right 2, always_wrong 1" in text
    # sft_size 2, balanced round robin over dimensions: one counting, one rhythm
    assert "pools: sft 2, rl 1, sft_counting 1, sft_rhythm 1" in text
    assert "cot_filter [rule stand-in]: scored 2, kept 2" in text
    sft = [json.loads(x) for x in out["sft"].read_text().splitlines()]
    rl = [json.loads(x) for x in out["rl"].read_text().splitlines()]
    assert len(sft) == 2 and len(rl) == 1
    target = sft[0]["messages"][1]["content"][0]["text"]
    assert parse_sections(target).format_ok
    assert sft[0]["messages"][0]["content"][0]["type"] == "audio"
    assert rl[0]["answer"] in rl[0]["choices"] and rl[0]["events"] and rl[0]["caption"]
    assert rl[0]["audio"].endswith(".wav") and rl[0]["prompt"][0]["role"] == "user"

    # resumable: a re-run appends nothing and asks the base model nothing
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "w").glob("*.jsonl")}
    lines.clear()
    run_pipeline(recipe, workdir=tmp_path / "w", answerer=answerer, echo=lines.append)
    assert answerer.calls == 1
    assert {p.name: p.stat().st_size for p in (tmp_path / "w").glob("*.jsonl")} == sizes

    # a torn last line (killed mid-write) is redone, not lost
    diff = tmp_path / "w" / "difficulty.jsonl"
    body = diff.read_text().splitlines()
    diff.write_text("\n".join(body[:-1]) + "\n" + body[-1][:10])
    run_pipeline(recipe, workdir=tmp_path / "w", answerer=answerer, echo=lines.append)
    assert answerer.calls == 2
    assert "difficulty: answered 6, kept 3" in "\n".join(lines)


def test_pipeline_defaults_to_the_four_aspects_of_section_4_1(clips_file, tmp_path):
    """No `dimensions` in the recipe: pitch, rhythm, temporal and timbre, no counting question.
    Every outcome mixed, so the difficulty filter keeps every question the filter kept."""
    from cafe.training.data.pipeline import DataConfig

    assert DataConfig(workdir=tmp_path).dimensions == ["pitch", "rhythm", "temporal", "timbre"]
    lines: list[str] = []
    out = run_pipeline(
        _recipe(clips_file),
        workdir=tmp_path / "w",
        answerer=lambda samples: {s.id: [True, False, True, False] for s in samples},
        echo=lines.append,
    )
    text = "\n".join(lines)
    # 3 clips x 4 dimensions = 12 asked; not suitable: c1 pitch, c2 rhythm+temporal, c3
    # pitch+rhythm -> 5; written 7
    assert "questions [rule stand-in]: asked 12, written 7, not_suitable 5, failed 0" in text
    # kept >= 4: c1 rhythm/temporal/timbre (5, 5, 4), c3 temporal (4); c3 timbre 3, c2 pitch 2,
    # c2 timbre 2 dropped
    assert "question_filter [rule stand-in]: scored 7, kept 4" in text
    assert "difficulty: answered 4, kept 4, always_right 0, always_wrong 0" in text
    # round robin over the dimensions, ids in order: c1-rhythm, then c1-temporal
    assert "pools: sft 2, rl 2, sft_rhythm 1, sft_temporal 1" in text
    rows = (tmp_path / "w" / "questions.jsonl").read_text().splitlines()
    assert sorted({json.loads(x)["dimension"] for x in rows}) == [
        "pitch", "rhythm", "temporal", "timbre",
    ]  # fmt: skip
    assert len(out["rl"].read_text().splitlines()) == 2


def test_unknown_or_no_dimension_is_refused_with_the_choices(tmp_path):
    from cafe.training.data.pipeline import DataConfig

    for dims, says in ((["timbre", "loudness"], "unknown 'loudness'"), ([], "none given")):
        with pytest.raises(ValueError) as err:
            DataConfig.from_recipe({"data": {"dimensions": dims}}, tmp_path)
        msg = str(err.value)
        assert "data.dimensions" in msg and says in msg
        assert "choose from counting, pitch, rhythm, temporal, timbre" in msg


def test_bad_clip_row_names_file_id_and_field(tmp_path):
    path = tmp_path / "clips.jsonl"
    path.write_text(json.dumps({"id": "x9", "caption": "a dog"}) + "\n")
    with pytest.raises(InputError) as err:
        run_pipeline(
            _recipe(path), workdir=tmp_path / "w", answerer=Answerer(), echo=lambda s: None
        )
    msg = str(err.value)
    assert "clips.jsonl" in msg and "x9" in msg and "audio" in msg


def test_cli_data_with_harness_difficulty(clips_file, tmp_path):
    """`cafe train data` end to end; the difficulty filter asks the harness's `random` baseline
    adapter (answers vary across tries) through the same request/scoring path as `cafe run`."""
    import yaml
    from click.testing import CliRunner

    from cafe.cli import main

    recipe = tmp_path / "r.yaml"
    data = {"source": "clips", "clips": str(clips_file), "sft_size": 2}
    data.update(difficulty_model="random", difficulty_n=6)
    recipe.write_text(yaml.safe_dump({"base_model": "random", "data": data}))
    res = CliRunner().invoke(
        main, ["train", "data", "--recipe", str(recipe), "--workdir", str(tmp_path / "w")]
    )
    assert res.exit_code == 0, res.output
    # the default four dimensions: as in test_pipeline_defaults_to_the_four_aspects_of_section_4_1
    assert "question_filter [rule stand-in]: scored 7, kept 4" in res.output
    rows = [json.loads(x) for x in (tmp_path / "w" / "difficulty.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(len(r["outcomes"]) == 6 for r in rows)
    kept = sum(any(r["outcomes"]) and not all(r["outcomes"]) for r in rows)
    assert f"difficulty: answered 4, kept {kept}," in res.output
    assert "SFT file:" in res.output

    bad = CliRunner().invoke(main, ["train", "data", "--recipe", "mpar2-7b-sfft"])
    assert bad.exit_code == 2 and "did you mean mpar2-7b-sft" in bad.output


def test_llm_stages_through_loopback_judge(clips_file, tmp_path):
    """The AVQA path: captioner, question writer, filter, CoT writer and CoT filter are LLM calls
    through the openai-compatible client to a loopback server; bad replies are retried."""
    from cafe.testing.loopback import OpenAILoopback

    cot = (
        "<thinking><perception>1. [0.00, 0.30]: a dog bark</perception><reasoning>1. Sub-question:"
        " what is heard? Answer: a dog bark</reasoning><review>1. Evidence check: ok. 2. Logic "
        "check: ok.</review></thinking><answer>{}</answer>"
    )
    seen = {"question": 0}

    def reply(body):
        content = body["messages"][-1]["content"]
        text = (
            content
            if isinstance(content, str)
            else " ".join(p.get("text", "") for p in content if p.get("type") == "text")
        )
        if "sound events in the order" in text:
            return (
                "<event1><description>dog, [0.0, 0.3]</description><caption>bark</caption></event1>"
            )
        if "one multiple-choice question" in text:
            seen["question"] += 1
            if seen["question"] == 1:
                return "I think a question could be..."  # unparseable: retried
            if "pitch contour" in text:
                return "not suitable"
            return json.dumps(
                {
                    "question": "What is heard?",
                    "choices": ["dog", "cat", "cow", "owl"],
                    "answer": "A",
                }
            )
        if "reasoning depth" in text:
            return json.dumps({"analysis": "needs listening", "score": 5, "decision": "keep"})
        if "You grade a reasoning chain" in text:
            return '{"ReasoningScore": 8, "ReviewScore": 9}'
        if "Break the question into a short chain" in text:
            seen["chain"] = seen.get("chain", 0) + 1
            return "Plan:\n1. Sub-question: what is heard?"  # the preamble line is dropped
        if "Write exactly this format" in text:
            assert (
                "Sub-questions to answer, in this order:\n1. Sub-question: what is heard?" in text
            )
            seen["cot"] = seen.get("cot", 0) + 1
            return cot.format("dog")
        return "?"

    rows = [json.loads(x) for x in clips_file.read_text().splitlines()]
    for r in rows:
        r.pop("events")  # AVQA: clips with no ground truth, captions from the LLM
    avqa = tmp_path / "avqa.jsonl"
    avqa.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with OpenAILoopback(reply=reply) as server:
        data = {
            "source": "clips",
            "clips": str(avqa),
            "sft_size": 2,
            "backend": "openai-compatible",
        }
        data.update(llm_model="qwen3-32b", llm_endpoints=[server.url], cache=str(tmp_path / "c.db"))
        data.update(dimensions=["counting", "pitch", "temporal"])
        data.update(difficulty_model="random", difficulty_n=8)
        recipe = {"data": data}
        lines: list[str] = []
        out = run_pipeline(recipe, workdir=tmp_path / "w", echo=lines.append)
        first = len(server.requests)
        text = "\n".join(lines)
        assert "captions: clips 3, captioned 3, failed 0" in text
        assert "questions: asked 9, written 6, not_suitable 3, failed 0" in text
        assert "question_filter: scored 6, kept 6" in text
        audio_parts = [
            p
            for b in server.requests
            for m in b["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p.get("type") == "input_audio"
        ]
        assert len(audio_parts) == 3  # each clip's audio went to the captioner
        # E.4 in two steps: one sub-question chain per CoT, then the CoT that follows it. The
        # captioner described every clip alike, so the prompts repeat: each distinct prompt is
        # asked once however the replies interleave (both SFT items share one chain and one
        # CoT; three question prompts, one of them asked again after the unparseable reply)
        assert seen["chain"] == seen["cot"] == 1
        assert seen["question"] == 3 + 1
        sft = [json.loads(x) for x in out["sft"].read_text().splitlines()]
        assert sft and sft[0]["messages"][1]["content"][0]["text"] == cot.format("dog")
        # a re-run is resumed from the stage files: no call at all
        run_pipeline(recipe, workdir=tmp_path / "w", echo=lines.append)
        assert len(server.requests) == first


def test_captioner_is_its_own_model_and_its_events_become_annotations(clips_file, tmp_path):
    """caption_model / caption_endpoints: the captioner (Gemini-2.5-Pro in the paper) is asked
    apart from the writer (Qwen3-32B): every clip's audio goes to the captioner's server and none
    to the writer's. The captioner's "<description>SOURCES, [START, END]" events become the
    clip's events, so the review judge gets real annotations instead of "(none)"."""
    from cafe.testing.loopback import OpenAILoopback
    from cafe.training.data.pipeline import DataConfig, Pipeline
    from cafe.training.reward_judge import annotations_text

    markup = (
        "<event1><description>dog, [0.0, 0.3]</description><caption>two sharp barks</caption>"
        "</event1><event2><description>car horn; [1.5 s, 2.25 s]</description><caption>a long "
        "honk</caption></event2><event3><description>wind</description><caption>x</caption>"
        "</event3>"
    )
    rows = [json.loads(x) for x in clips_file.read_text().splitlines()]
    for r in rows:
        r.pop("events")
        r.pop("caption", None)
    avqa = tmp_path / "avqa.jsonl"
    avqa.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with OpenAILoopback(reply=lambda b: markup) as cap, OpenAILoopback() as writer:
        cfg = DataConfig(
            workdir=tmp_path / "w", source="clips", clips=str(avqa),
            backend="openai-compatible", llm_model="qwen3-32b", llm_endpoints=[writer.url],
            caption_model="gemini-2.5-pro", caption_endpoints=[cap.url],
        )  # fmt: skip
        pipe = Pipeline(cfg, echo=lambda _: None)
        got = pipe.stage_captions(pipe.stage_clips())
    assert len(cap.requests) == len(rows) and writer.requests == []
    assert {b["model"] for b in cap.requests} == {"gemini-2.5-pro"}
    events = got[0]["events"]
    assert [(e["label"], e["onset"], e["offset"]) for e in events] == [
        ("dog", 0.0, 0.3),
        ("car horn", 1.5, 2.25),
    ]  # fmt: skip  (wind has no span: no time to annotate)
    assert got[0]["events_source"] == "captioner"
    assert annotations_text(events) == "[0.00, 0.30]: dog\n[1.50, 2.25]: car horn"
    assert got[0]["caption"].startswith("dog, [0.0, 0.3]: two sharp barks")


def test_sft_pool_balanced_over_dimensions_and_duration_bins(tmp_path):
    """Clips of 1, 2 and 3 s, two dimensions each: 6 candidates in 6 (dimension, bin) cells.
    With 3 duration bins and 3 SFT items the picks are a-counting (all counts 0), b-pitch (the
    first cell whose dimension and bin are both unpicked), c-counting (counting 1 + bin 0 ties
    pitch 1 + bin 0; counting's cell comes first): every duration once, dimensions 2 / 1. With one
    bin it is the round robin over dimensions: a-counting, a-pitch, b-counting."""
    import numpy as np

    from cafe.audio import write_wav
    from cafe.training.data.pipeline import (
        DataConfig,
        Pipeline,
        balanced_pick,
        duration_cells,
    )

    clips = []
    for cid, secs in (("a", 1), ("b", 2), ("c", 3)):
        path = tmp_path / f"{cid}.wav"
        write_wav(path, np.zeros(16000 * secs, dtype=np.float32))
        clips.append({"id": cid, "audio": str(path), "caption": "x", "events": []})
    qs = [
        {"id": f"{c}-{d}", "clip": c, "dimension": d} for c in "abc" for d in ("counting", "pitch")
    ]
    assert duration_cells(qs, clips, 3) == {
        "a-counting": 0, "a-pitch": 0, "b-counting": 1, "b-pitch": 1,
        "c-counting": 2, "c-pitch": 2,
    }  # fmt: skip
    assert duration_cells(qs, clips, 1) == {}
    for bins, want in ((3, ["a-counting", "b-pitch", "c-counting"]),
                       (1, ["a-counting", "a-pitch", "b-counting"])):  # fmt: skip
        cfg = DataConfig(workdir=tmp_path / f"w{bins}", sft_size=3, duration_bins=bins)
        lines: list[str] = []
        sft, rl = Pipeline(cfg, echo=lines.append).stage_pools(qs, clips)
        assert [q["id"] for q in sft] == want and len(rl) == 3
    assert lines[-1] == "pools: sft 3, rl 3, sft_counting 2, sft_pitch 1"
    cells = {("counting", 0): [{"id": "x"}], ("pitch", 0): []}
    assert balanced_pick(cells, 5) == ["x"]  # empty cells are skipped, no more than there is


def test_cot_without_a_sub_question_chain_fails_and_asks_no_cot(tmp_path):
    import asyncio

    from cafe.clients import make_client
    from cafe.testing.loopback import OpenAILoopback
    from cafe.training.data.llm import LLMStages

    with OpenAILoopback(reply=lambda b: "I would first listen.") as srv:
        stages = LLMStages(make_client("openai-compatible", "w", endpoints=[srv.url]), retries=2)
        q = {"question": "What?", "choices": ["dog", "cat"], "answer_text": "dog"}
        assert asyncio.run(stages.cot({"caption": "a dog barks"}, q)) is None
    texts = [b["messages"][-1]["content"] for b in srv.requests]  # text-only: a plain string
    assert len(texts) == 2 and all("Break the question into a short chain" in t for t in texts)
