"""MMAR rubric scoring against a loopback OpenAI-compatible judge that replies with scripted
JSON lists: valid replies, a reply of the wrong length, a score outside the criterion's choices,
code fences and prose, and a judge that never gives a valid reply. Scores equal hand counts of
the trimmed means; re-scoring makes no call."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from cafe.judge.rubric import RubricTemplate, build_prompt, criteria_of, score_reply
from cafe.metrics.stats import trimmed_mean
from cafe.records import Prediction, Sample
from cafe.steps.cli import rubric_command
from cafe.steps.rubric import rubric_run
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

RUBRIC = [
    {"name": "Cue: bell", "scoring_point": "1 if it hears the bell", "note": "", "choices": [0, 1]},
    {"name": "Order", "scoring_point": "1 if the order is right", "note": "", "choices": [0, 1]},
    {"name": "Answer", "scoring_point": "2 if fully justified", "note": "", "choices": [0, 1, 2]},
]
NAMES = [c["name"] for c in RUBRIC]


def reply(*scores, names=NAMES) -> str:
    return json.dumps(
        [
            {"name": n, "score": s, "justification": "because"}
            for n, s in zip(names, scores, strict=False)
        ]
    )


# per item: the judge's successive replies (whichever rater asks next gets the next one)
SCRIPT = {
    # five valid raters: 4/4, 3/4, 2/4, 1/4, 0/4 -> drop 0 and 1 -> (3 + 2 + 1) / 3 / 4 = 0.5
    "a": [reply(1, 1, 2), reply(1, 0, 2), reply(1, 1, 0), reply(0, 0, 1), reply(0, 0, 0)],
    # two invalid first (wrong length; score 2 outside [0, 1]), each retried; then fenced and
    # chatty valid replies 4, 4, 2, 2, 3 -> sorted 2 2 3 4 4 -> (2 + 3 + 4) / 3 / 4 = 0.75
    "b": [
        reply(1, 1),
        reply(2, 1, 2),
        "```json\n" + reply(1, 1, 2) + "\n```",
        "Here is my evaluation:\n" + reply(1, 1, 2) + "\nThanks.",
        reply(1, 1, 0),
        reply(0, 1, 1),
        reply(1, 0, 2, names=["bell", "Order", "Answer"]),  # renamed: noted, still valid
    ],
    # never valid: invalid after the retries, every raw reply kept
    "d": ["I would rather not grade this."],
}


def scripted():
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def answer(body: dict) -> str:
        assert body["temperature"] == 0 and body["seed"] == 42
        system, user = body["messages"]
        assert system["role"] == "system" and "grader" in system["content"]
        key = next(k for k in SCRIPT if f"[{k}]" in user["content"])
        with lock:
            n = seen.get(key, 0)
            seen[key] = n + 1
        return SCRIPT[key][min(n, len(SCRIPT[key]) - 1)]

    return answer


def build_run(root):
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}, "bench": {"name": "mmar", "version": "v2"}})
    meta = {"rubric": RUBRIC, "thinking": "The bell rings before the dog.", "cue": ["bell"]}
    samples = [
        Sample(k, "mmar", "v2", f"What comes first [{k}]?", ["bell", "dog"], "bell", [],
               meta={**meta, "modality": "sound" if k in "ab" else "speech",
                     "category": "Perception Layer", "sub-category": "Order"})
        for k in "abcd"
    ]  # fmt: skip
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    answers = {"a": "bell", "b": "bell", "c": "dog", "d": "bell"}
    preds = [
        Prediction(k, 0, "m", "lalm", "h", f"{a}. Reasoning: I hear a {a} first [{k}].",
                   sections={"reasoning": f"I hear a {a} first [{k}]."}, answer=a,
                   correct=a == "bell")
        for k, a in answers.items()
    ]  # fmt: skip
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    return store


def args(store, url, cache):
    return [str(store.root), "--judge", "openai-compatible", "--judge-model", "judge-m",
            "--judge-endpoint", url, "--cache", str(cache), "--no-progress",
            "--judge-concurrency", "4"]  # fmt: skip


def test_trimmed_mean_hand_counts():
    assert trimmed_mean([1.0, 0.75, 0.5, 0.25, 0.0]) == pytest.approx(0.5)
    assert trimmed_mean([0.5, 1.0, 1.0, 0.5, 0.75]) == pytest.approx((0.5 + 0.75 + 1.0) / 3)
    assert trimmed_mean([0.2, 0.9]) == pytest.approx(0.55)  # too few to trim: plain mean
    assert trimmed_mean([0.0, 0.1, 0.5, 0.9, 1.0], trim=2) == pytest.approx(0.5)
    assert trimmed_mean([0.0, 1.0, 1.0], trim=0) == pytest.approx(2 / 3)
    assert trimmed_mean([]) is None


def test_reply_validation():
    crit = criteria_of(Sample("x", "mmar", "v2", "q", ["a"], "a", [], meta={"rubric": RUBRIC}))
    assert score_reply(reply(1, 0, 1), crit)[:2] == (pytest.approx(0.5), None)
    assert score_reply("```\n" + reply(1, 1, 2) + "\n```", crit)[0] == 1.0
    assert "expected 3 criteria, got 2" in score_reply(reply(1, 1), crit)[1]
    assert "not in [0, 1]" in score_reply(reply(2, 0, 0), crit)[1]
    assert "not a number" in score_reply(reply(True, 0, 0), crit)[1]
    assert "needs 'name' and 'score'" in score_reply('[{"name": "x"}, {}, {}]', crit)[1]
    assert "no JSON list" in score_reply('{"score": 1}', crit)[1]
    score, reason, notes = score_reply(reply(1, 1, 2, names=["x", "Order", "Answer"]), crit)
    assert (score, reason) == (1.0, None) and "judge named 'x'" in notes[0]


def test_prompt_holds_what_the_protocol_shows():
    s = Sample("x", "mmar", "v2", "Which first?", ["bell", "dog"], "bell", [],
               meta={"rubric": RUBRIC, "thinking": "Bell, then dog."})  # fmt: skip
    text = build_prompt(RubricTemplate.load(), s, criteria_of(s), "I hear a bell.", "bell")
    for piece in (
        "Which first?",
        "Correct answer: bell",
        "Bell, then dog.",
        "Cue: bell",
        "1 if the order is right",
        "[0, 1, 2]",
        "I hear a bell. The answer is bell.",
    ):
        assert piece in text, piece  # fmt: skip
    assert '{"name": "Answer", "score": <one of [0, 1, 2]>' in text


def test_bad_rubric_names_item_and_field():
    s = Sample("x9", "mmar", "v2", "q", ["a"], "a", [], meta={"rubric": [{"name": "c"}]})
    with pytest.raises(ValueError, match="sample x9: field rubric: criterion 0"):
        criteria_of(s)


def test_rubric_scores_equal_hand_counts_and_rescoring_is_free(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "judge.sqlite"
    with OpenAILoopback(reply=scripted()) as srv:
        res = CliRunner().invoke(rubric_command, args(store, srv.url, cache))
        assert res.exit_code == 0, res.output
        # a 5, b 7 (2 retried), c 0 (wrong answer: never rated), d 5 raters x 4 attempts
        assert len(srv.requests) == 5 + 7 + 20
        sec = json.loads(store.path("metrics.json").read_text())["rubric"]
        assert sec["judge"]["judge"] == "openai-compatible:judge-m"
        assert (sec["judge"]["raters"], sec["judge"]["trim"], sec["judge"]["seed"]) == (5, 1, 42)
        # a 0.5, b 0.75, c 0 (wrong); d's raters stayed invalid after their retries: left out
        # of every denominator and listed, as the authors' scorer leaves it out -> over 3 items
        assert sec["score"] == pytest.approx(round(100 * (0.5 + 0.75) / 3, 2))
        assert sec["acc"] == pytest.approx(round(100 * 2 / 3, 2)) and sec["total"] == 3
        assert sec["not_evaluated"] == ["d#run0"]
        assert sec["score_rated_only"] == pytest.approx(100 * (0.5 + 0.75) / 2)
        assert sec["status"]["ok"] == 2 and sec["status"]["wrong"] == 1
        assert sec["status"]["invalid"] == 1
        assert sec["invalid_replies"] == 2 + 20
        assert sec["breakdowns"]["modality"]["sound"] == {"score": 62.5, "acc": 100.0, "total": 2}
        assert sec["breakdowns"]["modality"]["speech"] == {"score": 0.0, "acc": 0.0, "total": 1}
        assert sec["breakdowns"]["sub-category"]["Order"]["total"] == 3
        assert "not evaluated (in no denominator): d#run0" in res.output
        rows = {r["sample_id"]: r for r in map(json.loads, store.path(sec["file"]).open()) if r}
        assert sorted(rows["a"]["rater_scores"]) == [0.0, 0.25, 0.5, 0.75, 1.0]
        assert sorted(rows["b"]["rater_scores"]) == [0.5, 0.5, 0.75, 1.0, 1.0]
        assert rows["b"]["invalid_replies"] == 2 and any(
            "judge named" in n for n in rows["b"]["notes"]
        )
        assert sum(len(r) for r in rows["b"]["raw_replies"]) == 7  # every raw reply kept
        assert rows["c"]["status"] == "wrong" and rows["c"]["raw_replies"] == []
        assert rows["d"]["status"] == "invalid" and rows["d"]["score"] is None
        assert sum(r.count("rather not") for rs in rows["d"]["raw_replies"] for r in rs) == 20
        # again: nothing left to rate; from scratch: every reply replays from the cache
        assert CliRunner().invoke(rubric_command, args(store, srv.url, cache)).exit_code == 0
        store.path(sec["file"]).unlink()
        again = rubric_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                           cache=cache, progress=False)  # fmt: skip
        assert len(srv.requests) == 32 and again["calls"]["sent"] == 0
        assert again["score"] == sec["score"] and again["status"] == sec["status"]


def test_failed_judge_calls_are_retried_next_run_and_counted(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "judge.sqlite"
    with OpenAILoopback(reply=scripted(), faults=lambda i, body: "500") as srv:
        sec = rubric_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                         cache=cache, progress=False, max_attempts=1)  # fmt: skip
    assert sec["status"]["failed"] == 3 and sec["status"]["wrong"] == 1
    # counted, never dropped; and (issue 21) no score the judge did not give: absent, not 0.0
    assert sec["score"] is None and sec["total"] == 4 and sec["ci95"] is None
    with OpenAILoopback(reply=scripted()) as srv:
        sec = rubric_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                         cache=cache, progress=False)  # fmt: skip
    assert sec["status"]["failed"] == 0 and sec["status"]["ok"] == 2


def test_run_without_rubrics_is_one_clear_error(tmp_path):
    store = build_run(tmp_path / "run")
    lines = store.path("samples.jsonl").read_text().splitlines()
    bare = [json.loads(x) for x in lines]
    for d in bare:
        d["meta"].pop("rubric")
    store.path("samples.jsonl").write_text("".join(json.dumps(d) + "\n" for d in bare))
    res = CliRunner().invoke(rubric_command, [str(store.root), "--no-progress"])
    assert res.exit_code != 0 and "no sample carries a rubric" in res.output


def test_items_left_unrated_are_printed_then_the_command_exits_1(tmp_path, capsys):
    """A judge failing a's calls (HTTP 500, one attempt): the section is written with a failed;
    `cafe rubric` prints its summary, then exits 1 naming the count and the records file (a
    score left absent must not look like success)."""
    from cafe.errors import CafeError
    from cafe.steps.rubric import RubricStep

    store = build_run(tmp_path / "run")
    with OpenAILoopback(
        reply=scripted(), faults=lambda i, body: "500" if "[a]" in str(body) else None
    ) as srv:
        sec = rubric_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                         cache=tmp_path / "j.sqlite", progress=False, max_attempts=1)  # fmt: skip
    assert sec == json.loads(store.path("metrics.json").read_text())["rubric"]
    # a failed, b ok, c wrong; d invalid after its retries is in no denominator: 1 of 3
    assert sec["status"]["failed"] == 1 and sec["total"] == 3 and sec["score"] is None
    with pytest.raises(CafeError) as raised:
        RubricStep.prints(sec)  # what the command prints, then its exit
    assert raised.value.exit_code == 1
    assert raised.value.message == (
        f"1 of 3 items could not be rated (judge calls failed; reasons in {sec['file']}): "
        "the score is absent; run the same command again to retry them"
    )
    assert capsys.readouterr().out.startswith("MMAR rubric score (judge openai-compatible:judge-m")
