"""Judges read only the final answer: thinking blocks and drafts in them are kept in the raw
record, never parsed; OpenAI-compatible judges are asked not to think unless allowed (with a
budget that fits); the paper's six-list reply is accepted; a batch of mostly unusable replies
warns loudly; GRPO logs the share of failed judge scores per step."""

from __future__ import annotations

import asyncio
import json
from importlib import resources

import pytest

from cafe.clients import make_client
from cafe.clients.thinking import final_answer
from cafe.judge.extraction import parse_reply
from cafe.records import Prediction, Sample
from cafe.steps.cafe_judge import judge_run
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback
from cafe.training.reward_judge import LLMRewardJudge, parse_score

SIX = {
    "all_reasoning_events": ["dog barks", "horn", "rain"],
    "matched_events": ["dog barks"],
    "error_matched": ["horn"],
    "error_use": [],
    "neutral_events": ["rain"],
    "missed_events": ["bell rings"],
}


def test_final_answer_cuts_thinking_away():
    assert final_answer("<think>draft {}</think> final") == "final"
    assert final_answer("reasoning the template opened</think>\n0.4") == "0.4"
    assert final_answer("<think>cut off by the budget, 0.9") == ""  # no answer at all
    assert final_answer("<THINK>a</THINK>b<think>c</think>d") == "bd"
    # MPAR² sections are answers, not server thinking: a CoT writer's reply keeps them
    mpar2 = "<thinking><reasoning>x</reasoning></thinking><answer>y</answer>"
    assert final_answer("<think>plan</think>" + mpar2) == mpar2
    assert final_answer(None) == ""


def test_reward_score_ignores_numbers_in_thinking():
    # the case: the first number anywhere (3) would clamp to 1.0
    assert parse_score("<think>The caption lists 3 events…</think>0.3") == 0.3
    assert parse_score("<think>thinking 3 4 5, then the budget ran out") is None
    assert parse_score("0.6") == 0.6


def test_cafe_reply_with_a_draft_inside_thinking_is_valid():
    draft = json.dumps({"matched_events": ["draft"]})  # incomplete: would be invalid
    lists, reason = parse_reply(f"<think>First a draft: {draft}</think>\n{json.dumps(SIX)}")
    assert reason is None and lists["matched_events"] == ["dog barks"]
    lists, reason = parse_reply(f"<think>only a draft {json.dumps(SIX)}")
    assert lists is None and reason == "no answer after the thinking"


def test_paper_six_list_reply_derives_required_events():
    lists, reason = parse_reply(json.dumps(SIX))
    assert reason is None
    assert lists["required_events"] == ["dog barks", "bell rings"]  # matched ∪ missed
    assert lists["all_caption_events"] == []
    eight = {**SIX, "required_events": ["bell rings"], "all_caption_events": ["x"]}
    lists, _ = parse_reply(json.dumps(eight))
    assert lists["required_events"] == ["bell rings"] and lists["all_caption_events"] == ["x"]


def _run(root, n=4):
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}})
    samples = [
        Sample(f"s{i}", "mmar", "1", f"Question [s{i}]?", ["yes", "no"], "yes", [],
               caption=f"Caption {i}.")
        for i in range(n)
    ]  # fmt: skip
    store.path("samples.jsonl").write_text("".join(s.to_json() + "\n" for s in samples))
    with store.writer("predictions.jsonl") as w:
        w.write_many(
            Prediction(s.id, 0, "m", "lalm", "h", "yes. Reasoning: a dog barks", correct=True)
            for s in samples
        )
    return store


def _chat(content, reasoning=None):
    msg = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    return {
        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def test_paper_prompt_end_to_end_with_six_lists_and_server_reasoning(tmp_path):
    """The paper's prompt (restated in our template file) against a loopback judge that thinks
    (server-split reasoning holding a draft) and replies with the paper's six lists."""
    template = resources.files("cafe.judge").joinpath("templates", "extraction-paper.txt")
    store = _run(tmp_path / "run", n=2)
    draft = json.dumps({"matched_events": ["nothing"]})

    def reply(body):
        prompt = body["messages"][0]["content"]
        assert "Output JSON only" in prompt and "[Question]" in prompt
        return _chat(json.dumps(SIX), reasoning=f"Let me draft: {draft}")

    with OpenAILoopback(reply=reply) as srv:
        sec = judge_run(store.root, "openai-compatible", "qwen3", [srv.url], 2,
                        template=str(template), progress=False,
                        cache=tmp_path / "c.sqlite")  # fmt: skip
        body = srv.requests[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_tokens"] == 2048
    assert sec["judgements"] == {"ok": 2, "invalid": 0, "failed": 0, "total": 2}
    # per judgement: mat 1, hal 1, neu 1, miss 1 -> N_pred 3, N_tgt 2
    assert sec["acc_per"] == pytest.approx(100 / 3)
    assert sec["err_per"] == pytest.approx(100 / 3)
    assert sec["err_omit"] == pytest.approx(50.0)
    rows = [json.loads(x) for x in store.path("judgements.jsonl").open()]
    assert rows[0]["required_events"] == ["dog barks", "bell rings"]
    assert rows[0]["raw_reply"].startswith("<think>Let me draft")  # kept, not parsed


def test_eight_list_reply_through_the_default_template(tmp_path):
    store = _run(tmp_path / "run", n=1)
    eight = {**SIX, "required_events": ["dog barks"], "all_caption_events": ["dog barks"],
             "missed_events": []}  # fmt: skip
    with OpenAILoopback(reply=lambda body: json.dumps(eight)) as srv:
        sec = judge_run(store.root, "openai-compatible", "j", [srv.url], 1, progress=False,
                        cache=tmp_path / "c.sqlite")  # fmt: skip
    assert sec["judgements"]["ok"] == 1 and sec["err_omit"] == 0.0


def test_thinking_allowed_gets_a_budget_and_no_switch(tmp_path):
    store = _run(tmp_path / "run", n=1)
    with OpenAILoopback(reply=lambda body: "<think>hmm</think>" + json.dumps(SIX)) as srv:
        sec = judge_run(store.root, "openai-compatible", "j", [srv.url], 1, progress=False,
                        cache=tmp_path / "c.sqlite", thinking=True,
                        thinking_budget=1000)  # fmt: skip
        body = srv.requests[0]
    assert "chat_template_kwargs" not in body
    assert body["max_tokens"] == 2048 + 1000
    assert sec["judge"]["thinking"] is True and sec["judgements"]["ok"] == 1


def test_mostly_unusable_replies_warn_with_counts(tmp_path, capsys):
    store = _run(tmp_path / "run", n=4)

    def reply(body):
        prompt = body["messages"][0]["content"]
        if "[s0]" in prompt:
            return json.dumps(SIX)
        if "[s1]" in prompt:
            return "sorry, no"
        return _chat("", reasoning="thinking until the budget ran out")  # empty final answer

    with OpenAILoopback(reply=reply) as srv:
        sec = judge_run(store.root, "openai-compatible", "j", [srv.url], 2, progress=False,
                        cache=tmp_path / "c.sqlite")  # fmt: skip
    err = capsys.readouterr().err
    assert "warning: 3 of 4 judge replies unusable (2 empty or thinking only, 1 unparseable" in err
    assert sec["replies"]["ok"] == 1 and sec["replies"]["empty"] == 2


def test_grpo_logs_the_share_of_failed_judge_scores(tmp_path):
    from cafe.training.grpo import make_reward_func

    good = (
        "<thinking><perception>1. [0.00, 1.00]: a dog bark</perception>"
        "<reasoning>1. Sub-question: what barks? Answer: a dog</reasoning>"
        "<review>1. Evidence check: ok. 2. Logic check: ok.</review></thinking>"
        "<answer>dog bark</answer>"
    )

    def reply(body):
        prompt = body["messages"][0]["content"]
        # perception scores a number only once it is reminded; every other kind never does
        if "perception section" in prompt and "Your previous reply" in prompt:
            return "<think>3 events</think>0.5"
        return "<think>I think 0.9</think>"

    with OpenAILoopback(reply=reply) as srv:
        client = make_client("openai-compatible", "j", endpoints=[srv.url], thinking=False)
        judge = LLMRewardJudge(client)
        logged: dict[str, float] = {}
        with pytest.warns(UserWarning, match="3 of 4 scores this step had no number"):
            rewards = asyncio.run(
                make_reward_func(judge)(
                    prompts=[[{"role": "user", "content": "q"}]],
                    completions=[[{"role": "assistant", "content": good}]],
                    answer=["dog bark"],
                    choices=[["dog bark", "car horn"]],
                    log_metric=lambda k, v: logged.__setitem__(k, v),
                )
            )
    # asked: perception (0.5 on its 2nd try), one step, holistic and review (the answer is
    # right): the last three never give a number -> 3 of 4 failed
    assert judge.asked == 4 and judge.failed == 3
    assert logged["mpar2/judge_failed"] == pytest.approx(3 / 4)
    # R_all = 1.5*0.5 + (0.7*0.01 + 0.3*0) + 1.5*(1 + 0.5*0) + 0.1*1
    assert rewards == pytest.approx([1.5 * 0.5 + 0.7 * 0.01 + 1.5 + 0.1])
