"""Reward judge: first-number parsing, clamping, retries, failure -> 0, caching, concurrency,
skipped calls (gating), and the offline rule judge against synth ground truth."""

from __future__ import annotations

import asyncio

import pytest

from cafe.cache import Cache
from cafe.clients.base import ChatClient, ChatReply
from cafe.training.reward_judge import (
    LLMRewardJudge,
    OfflineRewardJudge,
    RewardItem,
    parse_score,
    score_group,
)
from cafe.training.sections import parse_sections

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
def test_parse_score_first_number_clamped(text, value):
    assert parse_score(text) == value


class ScriptedClient(ChatClient):
    """A chat client replaying fixed replies per call (the judge logic is under test here)."""

    identity = "scripted"

    def __init__(self, replies, delay=0.0):
        self.replies = list(replies)
        self.prompts: list[str] = []
        self.delay = delay
        self.in_flight = 0
        self.peak = 0

    async def achat(self, messages, *, temperature=0.0, max_tokens=1024, seed=None, **extra):
        assert temperature == 0.0  # judges run at a fixed temperature
        self.prompts.append(messages[-1]["content"])
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        reply = self.replies.pop(0) if self.replies else "0.5"
        return ChatReply(text=reply)


def test_retries_then_value_and_failure_zero():
    client = ScriptedClient(["hmm", "", "0.6"])
    judge = LLMRewardJudge(client)
    assert asyncio.run(judge.score("perception", {"perception": "x"})) == 0.6
    assert len(client.prompts) == 3
    # review retries 3 times, then 0
    client = ScriptedClient(["no"] * 10)
    judge = LLMRewardJudge(client)
    assert asyncio.run(judge.score("review", {"review": "x"})) == 0.0
    assert len(client.prompts) == 3
    client = ScriptedClient(["no"] * 10)
    assert asyncio.run(LLMRewardJudge(client).score("step", {})) == 0.0
    assert len(client.prompts) == 5


def test_cache_hit_costs_no_call(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    client = ScriptedClient(["0.4"])
    judge = LLMRewardJudge(client, cache=cache)
    fields = {"question": "q", "perception": "p"}
    assert asyncio.run(judge.score("perception", fields)) == 0.4
    assert asyncio.run(judge.score("perception", fields)) == 0.4
    assert len(client.prompts) == 1


def test_group_all_calls_in_flight_and_gating():
    s = parse_sections(GOOD)
    items = [
        RewardItem(s, True, "What first?", "dog bark", "A dog barks, then a horn.", EVENTS),
        RewardItem(s, False, "What first?", "dog bark", "A dog barks, then a horn.", EVENTS),
        RewardItem(parse_sections("<answer>x</answer>"), True, "q", "a"),
    ]
    client = ScriptedClient([], delay=0.05)
    judge = LLMRewardJudge(client, concurrency=64)
    scores = asyncio.run(score_group(judge, items))
    # item 0: perception + 2 steps + holistic + review = 5; item 1: no review (wrong) = 4; item 2: 0
    assert len(client.prompts) == 9
    assert client.peak == 9  # all in flight together
    assert scores[0].review == 0.5 and scores[1].review is None
    assert scores[0].steps == [0.5, 0.5] and scores[2].steps == [] and scores[2].perception is None
    step_prompts = [p for p in client.prompts if "Step to grade" in p]
    assert any("what barks first" in p and "(none)" in p for p in step_prompts)
    assert any("what follows" in p and "what barks first" in p for p in step_prompts)
    assert all("A dog barks, then a horn." in p for p in client.prompts)


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
