"""Reward judge: first-number parsing, clamping, retries, failure -> 0, caching, concurrency,
skipped calls (gating), and the offline rule judge against synth ground truth."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cafe.cache import Cache
from cafe.clients import make_client
from cafe.parsing import parse_sections
from cafe.testing.loopback import OpenAILoopback
from cafe.training.reward_judge import (
    LLMRewardJudge,
    OfflineRewardJudge,
    RewardItem,
    parse_score,
    score_group,
)

GOOD = (
    "<thinking><perception>1. [0.00, 1.00]: a dog bark\n2. [1.50, 2.50]: a car horn</perception>"
    "<reasoning>1. Sub-question: what barks first? Answer: a dog bark\n"
    "2. Sub-question: what follows? Answer: a car horn</reasoning>"
    "<review>1. Evidence check: dog bark at 0 s. 2. Logic check: fine.</review></thinking>"
    "<answer>dog bark</answer>"
)
EVENTS = [
    {"label": "dog_bark", "onset": 0.0, "offset": 1.0, "required": True},
    {"label": "car_horn", "onset": 1.5, "offset": 2.5, "required": False},
]


@pytest.mark.parametrize(
    "text,value",
    [
        ("0.7", 0.7),
        ("Score: 0.35 because 0.9", 0.35),
        ("8", 1.0),
        ("-0.4", 0.0),
        (".5", 0.5),
        ("no idea", None),
        (None, None),
    ],
)
def test_parse_score_authors_rule_first_number_clamped(text, value):
    """The authors' parser (``parse: authors``): the first number anywhere, clamped."""
    assert parse_score(text, "authors") == value


@pytest.mark.parametrize(
    "text,value",
    [
        ("0.7", 0.7),
        ("1", 1.0),
        ("0", 0.0),
        (".5", 0.5),
        ("0.4.", 0.4),
        ("Score: 0.6", 0.6),
        ("**0.8**", 0.8),
        ("1.0", 1.0),
        ("0.30", 0.3),
        ("The perception misses the horn.\n0.3", 0.3),  # a final score after a note
        ("<think>maybe 0.9</think>0.2", 0.2),  # thinking is never parsed
        ("8/10", None),
        ("Step 2 gets 0.4", None),
        ("8", None),  # out of [0, 1]: invalid, not clamped to 1
        ("1.5", None),
        ("-0.4", None),
        ("0.75", None),  # off the prompts' 0.1 steps: invalid, not rounded
        ("0.45", None),
        ("Score: 0.35 because 0.9", None),
        ("no idea", None),
        (None, None),
    ],
)
def test_parse_score_strict_final_score_in_unit_interval(text, value):
    """The default, as the prompts ask: the reply ends with one number in [0, 1] in steps of
    0.1."""
    assert parse_score(text) == value


class ScriptedJudge:
    """Loopback judge server replies: a script first, then a default; records peak concurrency."""

    def __init__(self, replies=(), default="0.5", hold_s=0.0):
        self.replies = list(replies)
        self.default = default
        self.hold_s = hold_s
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def __call__(self, body):
        assert body["temperature"] == 0.0  # judges run at a fixed temperature
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            reply = self.replies.pop(0) if self.replies else self.default
        time.sleep(self.hold_s)
        with self.lock:
            self.in_flight -= 1
        return reply


def _judge(server, **kw):
    client = make_client("openai-compatible", "judge-model", endpoints=[server.url], concurrency=64)
    return LLMRewardJudge(client, **kw)


def _prompts(server):
    return [b["messages"][-1]["content"] for b in server.requests]


def test_retries_then_value_and_failure_zero():
    with OpenAILoopback(reply=ScriptedJudge(["hmm", "none", "0.6"])) as server:
        assert asyncio.run(_judge(server).score("perception", {"perception": "x"})) == 0.6
        assert len(server.requests) == 3
    # review retries 3 times, then 0; the others 5 times
    with OpenAILoopback(reply=ScriptedJudge(default="no")) as server:
        assert asyncio.run(_judge(server).score("review", {"review": "x"})) == 0.0
        assert len(server.requests) == 3
    with OpenAILoopback(reply=ScriptedJudge(default="no")) as server:
        assert asyncio.run(_judge(server).score("step", {})) == 0.0
        assert len(server.requests) == 5


def test_clamped_reply_and_cache_hit_costs_no_call(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    with OpenAILoopback(reply=ScriptedJudge(["Score: 7 out of 10"])) as server:
        judge = _judge(server, cache=cache, parse="authors")
        fields = {"question": "q", "perception": "p"}
        assert asyncio.run(judge.score("perception", fields)) == 1.0  # 7 clamped to 1
        assert asyncio.run(judge.score("perception", fields)) == 1.0
        assert len(server.requests) == 1


def test_strict_parse_retries_invalid_replies_and_counts_them(tmp_path):
    """ "8/10" and "Step 2 gets 0.4" hold no final score in [0, 1]: each is counted invalid and
    retried (with the reminder); the third reply, 0.4, is the score."""
    script = ScriptedJudge(["8/10", "Step 2 gets 0.4", "0.4"])
    with OpenAILoopback(reply=script) as server:
        judge = _judge(server)
        assert asyncio.run(judge.score("step", {"step": "s"})) == 0.4
        assert (judge.invalid, judge.failed, judge.calls) == (2, 0, 3)
        prompts = _prompts(server)
    assert "previous reply held no score" in prompts[1] and "previous" not in prompts[0]
    # review: three invalid replies, then 0, counted failed
    with OpenAILoopback(reply=ScriptedJudge(default="8/10")) as server:
        judge = _judge(server)
        assert asyncio.run(judge.score("review", {"review": "r"})) == 0.0
        assert (judge.invalid, judge.failed) == (3, 1)


def test_group_all_calls_in_flight_and_gating():
    s = parse_sections(GOOD)
    items = [
        RewardItem(s, True, "What first?", "dog bark", "A dog barks, then a horn.", EVENTS),
        RewardItem(s, False, "What first?", "dog bark", "A dog barks, then a horn.", EVENTS),
        RewardItem(parse_sections("<answer>x</answer>"), True, "q", "a"),
    ]
    script = ScriptedJudge(hold_s=0.3)
    with OpenAILoopback(reply=script) as server:
        scores = asyncio.run(score_group(_judge(server), items))
        prompts = _prompts(server)
    # item 0: perception + 2 steps + holistic + review = 5; item 1: no review (wrong) = 4, the
    # same prompts as item 0's (same sections, question, caption): one call each, shared while
    # in flight (cafe.caller); item 2: 0
    assert len(prompts) == 5 and len(set(prompts)) == 5
    assert script.peak == 5  # all in flight together
    assert scores[0].review == 0.5 and scores[1].review is None
    assert scores[0].steps == [0.5, 0.5] and scores[2].steps == [] and scores[2].perception is None
    step_prompts = [p for p in prompts if "Step to grade" in p]
    assert any("what barks first" in p and "(none)" in p for p in step_prompts)
    assert any("what follows" in p and "what barks first" in p for p in step_prompts)
    assert all("A dog barks, then a horn." in p for p in prompts)


def test_offline_judge_scores_against_events():
    judge = OfflineRewardJudge()
    s = parse_sections(GOOD)
    item = RewardItem(s, True, "What first?", "dog bark", "", EVENTS)
    scores = asyncio.run(score_group(judge, [item]))[0]
    assert scores.perception == 1.0  # both events named, in order, nothing invented
    assert scores.steps == [1.0, 1.0] and scores.holistic == 1.0 and scores.review == 1.0
    halluc = parse_sections(GOOD.replace("a car horn</perception>", "a violin</perception>"))
    bad = asyncio.run(score_group(judge, [RewardItem(halluc, True, "q", "dog bark", "", EVENTS)]))
    assert bad[0].perception == 0.2  # F1 = 0.5 capped at 0.2 by the invented violin
    shuffled = GOOD.replace("[0.00, 1.00]", "[3.00, 4.00]")
    s3 = parse_sections(shuffled)
    out = asyncio.run(score_group(judge, [RewardItem(s3, True, "q", "dog bark", "", EVENTS)]))
    assert out[0].perception == 0.8  # out of order: 1.0 * 0.8


def _trl_rewards(judge, texts, caption="", **kw):
    """R_all per completion text through the reward function TRL calls (its arguments)."""
    from cafe.training.grpo import make_reward_func

    n = len(texts)
    return asyncio.run(
        make_reward_func(judge)(
            prompts=[[{"role": "user", "content": "q"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            answer=["dog bark"] * n,
            choices=[["dog bark", "car horn"]] * n,
            question=["What first?"] * n,
            caption=[caption] * n,
            events=[EVENTS] * n,
            **kw,
        )
    )


def test_trl_reward_function_adapter():
    """The async reward function GRPOTrainer calls: TRL's arguments in, R_all per completion out
    (offline judge, hand-computed), component means logged."""
    wrong = GOOD.replace("<answer>dog bark</answer>", "<answer>car horn</answer>")
    logged: dict[str, float] = {}
    rewards = _trl_rewards(
        OfflineRewardJudge(),
        [GOOD, wrong, "gibberish"],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    # GOOD: perception 1, steps [1, 1], holistic 1, review 1, correct:
    # 1.5*1 + (0.7*1 + 0.3*1) + 1.5*(1 + 0.5*1) + 0.1*1 = 4.85
    # wrong answer: R_rea = 0 and the review is never asked: 4.85 - 1.5*1.5 = 2.6 (the holistic
    # score stays 1.0: the steps still reach the correct answer's words)
    assert rewards == pytest.approx([4.85, 2.6, 0.0])
    assert logged["mpar2/acc"] == pytest.approx(1 / 3)
    assert logged["mpar2/format"] == pytest.approx(2 / 3)


def test_review_template_inputs_and_a_retry_changes_the_prompt():
    from cafe.training.reward_judge import load_templates

    t = load_templates()
    assert "{annotations}" in t["review"] and "{caption}" in t["review"]  # F.4 inputs
    s = parse_sections(GOOD)
    with OpenAILoopback(reply=ScriptedJudge(["none", "0.8"])) as server:
        items = [RewardItem(s, True, "What first?", "dog bark", "a dog, then a horn", EVENTS)]
        judge = _judge(server)
        out = asyncio.run(judge.score("review", {**_fields_of(items[0])}))
        prompts = _prompts(server)
    assert out == 0.8 and len(prompts) == 2
    assert "[0.00, 1.00]: dog bark (needed for the answer)\n[1.50, 2.50]: car horn" in prompts[0]
    assert prompts[1].startswith(prompts[0]) and "Your previous reply held no score" in prompts[1]


def _fields_of(item):
    from cafe.training.reward_judge import _fields

    return _fields(item)


#: SPEC §7's table of appendix F, rule by rule, as each template words it (whitespace folded)
CUMULATIVE = "Start from 1.0 and apply every penalty below that fits; penalties add up"
APPENDIX_F_RULES = {
    "perception": [
        CUMULATIVE,
        "Critical errors set the score to 0.0 to 0.2",
        "a hallucinated event: a sound or event the caption does not contain",
        "the main sound source misidentified",
        "the audio cue the question depends on is missing",
        "Moderate errors take 0.3 to 0.5 off each",
        "an order of events that contradicts the caption",
        "a significant omission of details the caption describes",
        "Minor errors take 0.1 to 0.2 off each",
        "wordy or repetitive lines",
        'a vague label (such as "noise" or "a sound") where the caption is specific',
        "1.0: flawless",
        "0.8 to 0.9: every key event, in a logical order",
        "0.5 to 0.7: the key event is found but described vaguely",
        "0.2 to 0.4: the key event is missed or its source misidentified, or the events are "
        "disorderly",
        "0.0 to 0.1: a hallucinated event, or the main event is missed",
    ],
    "step": [
        "Critical errors set the score to 0.0 to 0.1",
        "the step claims a sound or event that the caption contradicts, or that the caption does "
        "not contain",
        "An empty step (a sub-question or answer with nothing in it) scores 0.0",
        "Usefulness",
        "Grounding",
        "Logical next move",
    ],
    "holistic": [
        CUMULATIVE,
        "Critical errors set the score to 0.0 to 0.2",
        "a false premise early in the chain corrupts the steps built on it",
        "contradiction: the reasoning concludes something other than the correct answer",
        "Moderate errors take 0.2 to 0.4 off each",
        "bloat: far more steps than the question's difficulty needs (for example ten steps for a "
        "yes/no question)",
        "steps spent on caption events that are irrelevant to the question",
        "Goal orientation",
        "Causal dependency",
        "Error propagation",
        "Derivability",
        "Proportion",
    ],
    "review": [
        "Critical errors score 0.0 at once",
        "it approves reasoning that ends in a wrong answer",
        "caption check: it approves a sound or event that is absent from the caption",
        "A rubber stamp of a wrong answer (approval without any check) scores 0.0 to 0.1",
        "a review that confirms a correct answer only in general terms, without re-checking any "
        "specific event, time or step, scores 0.5 to 0.7",
        "Evidence re-verification",
        "Temporal and causal audit",
        "Logic check",
        "Anti-rubber-stamping",
    ],
}
BANDS = ("- 1.0:", "- 0.8 to 0.9:", "- 0.5 to 0.7:", "- 0.2 to 0.4:", "- 0.0 to 0.1:")
INPUTS = {
    "perception": ("{question}", "{answer}", "{caption}", "{perception}"),
    "step": ("{question}", "{answer}", "{caption}", "{history}", "{step}"),
    "holistic": ("{question}", "{answer}", "{caption}", "{reasoning}"),
    "review": (
        "{question}", "{answer}", "{caption}", "{annotations}", "{perception}", "{reasoning}",
        "{review}",
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(APPENDIX_F_RULES))
def test_each_template_states_appendix_f_penalties_bands_and_inputs(kind):
    """SPEC §7: each reward prompt carries its row of appendix F (critical, moderate and minor
    penalty sizes, the empty-step rule, the holistic contradiction, the review's caption check),
    the five score bands, its inputs, and asks for the reply the strict parser reads."""
    from cafe.training.reward_judge import load_templates

    raw = load_templates()[kind]
    text = " ".join(raw.split())
    missing = [rule for rule in APPENDIX_F_RULES[kind] if rule not in text]
    assert missing == []
    assert [b for b in BANDS if b not in raw] == []
    assert [p for p in INPUTS[kind] if p not in raw] == []
    assert text.endswith(
        "Reply with a single number between 0 and 1 in steps of 0.1 (for example 0.7) and "
        "nothing else."
    )
    # moderate / minor sizes only where appendix F gives them
    assert ("Moderate errors" in text) == (kind in ("perception", "holistic"))
    assert ("Minor errors" in text) == (kind == "perception")


@pytest.mark.parametrize(
    "step,empty",
    [
        ("Sub-question: Answer:", True),
        ("Sub-question:", True),
        ("Sub-question: . Answer: -", True),
        ("Sub-question: what barks? Answer:", False),  # an unanswered question: the judge grades
        ("Sub-question: Answer: a dog", False),
    ],
)
def test_empty_step(step, empty):
    from cafe.training.reward_judge import empty_step

    assert empty_step(step) is empty


def _appendix_f_judge(body):
    """A judge that scores as appendix F's sizes say, one reply per template."""
    prompt = body["messages"][-1]["content"]
    if "grade the perception section" in prompt:
        return "0.4"  # 1.0 - 0.5 (order contradicts the caption) - 0.1 (wordy)
    if "Step to grade" in prompt:
        assert "Sub-question: Answer:\n" not in prompt.split("Step to grade:")[1]
        return "0.9"
    if "whole reasoning section" in prompt:
        return "0.6"  # 1.0 - 0.4 (bloated for the question)
    if "self-review" in prompt:
        return "0.6"  # generic validation of a correct answer: 0.5 to 0.7
    return "no"


def test_rewards_from_appendix_f_scores_and_an_empty_step_through_loopback_judge():
    """R_all hand-computed from scripted judge replies (the sizes a judge following each prompt
    gives), through the TRL reward function and a loopback judge; the empty step scores 0.0 with
    no judge call (F.2), then is floored at 0.01 like any step."""
    text = GOOD.replace(
        "2. Sub-question: what follows?",
        "2. Sub-question: Answer:\n3. Sub-question: what follows?",
    )
    assert parse_sections(text).format_ok and len(parse_sections(text).steps) == 3
    wrong = text.replace("<answer>dog bark</answer>", "<answer>car horn</answer>")
    with OpenAILoopback(reply=_appendix_f_judge) as server:
        judge = _judge(server)
        rewards = _trl_rewards(judge, [text, wrong], caption="A dog barks, then a car horn.")
        prompts = _prompts(server)
    # right answer: perception, 2 non-empty steps, holistic, review = 5 calls; wrong: 4 (no
    # review), the same prompts as the right one's (only the answer differs): shared, no call
    assert len(prompts) == 5 and judge.invalid == 0
    assert sum("Step to grade" in p for p in prompts) == 2
    # steps [0.9, 0.0 -> 0.01, 0.9]: geomean = (0.9 * 0.01 * 0.9) ** (1/3) = 0.0081 ** (1/3)
    geo = 0.0081 ** (1 / 3)
    assert geo == pytest.approx(0.2008299, abs=1e-6)
    spr = 0.7 * 0.2008299 + 0.3 * 0.6  # 0.3205809
    # 1.5*0.4 + 0.3205809 + 1.5*(1 + 0.5*0.6) + 0.1*1 = 2.9705809; wrong: 1.5*1.3 less
    assert rewards == pytest.approx([0.6 + spr + 1.95 + 0.1, 0.6 + spr + 0.1], abs=1e-6)
    assert rewards[0] == pytest.approx(2.9705809, abs=1e-6)


def test_offline_judge_gets_no_empty_step_either():
    """The empty-step rule is the reward code's, so the offline rule judge follows it too (its
    own rule would give an unanswered step 0.1)."""
    text = GOOD.replace("2. Sub-question: what follows? Answer: a car horn", "2. Sub-question:")
    s = parse_sections(text)
    item = RewardItem(s, True, "What first?", "dog bark", "", EVENTS)
    scores = asyncio.run(score_group(OfflineRewardJudge(), [item]))[0]
    assert scores.steps == [1.0, 0.0]


def test_a_changed_template_is_a_new_cache_key(tmp_path):
    """A changed template has another hash and its calls other cache keys: the same fields
    through an edited template are asked again, never answered from the old template's cache."""
    from cafe.training.reward_judge import load_templates, template_hash

    cache = Cache(tmp_path / "c.sqlite")
    base = load_templates()
    edited = {**base, "step": base["step"].replace("0.0 to 0.1", "0.0 to 0.2")}
    assert template_hash(edited["step"]) != template_hash(base["step"])
    with OpenAILoopback(reply=ScriptedJudge(["0.3", "0.7"])) as server:
        fields = {"step": "Sub-question: what? Answer: a dog", "history": "(none)"}
        assert asyncio.run(_judge(server, cache=cache).score("step", fields)) == 0.3
        assert asyncio.run(_judge(server, cache=cache).score("step", fields)) == 0.3  # cached
        changed = _judge(server, cache=cache, templates=edited)
        assert asyncio.run(changed.score("step", fields)) == 0.7
        assert len(server.requests) == 2
