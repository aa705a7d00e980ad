"""Keys go only to their own service: OPENAI_API_KEY to OpenAI (its URL or OPENAI_BASE_URL),
GEMINI_API_KEY to Google (its default or GOOGLE_GEMINI_BASE_URL); a server named with --endpoint
takes CAFE_ENDPOINT_API_KEY or the variable --api-key-env names; a 401 says what to set. The same
for the model client, the judge, the captioner and the reward judge."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from cafe.cli import main
from cafe.clients import make_client
from cafe.execution import run_sync
from cafe.testing.loopback import GeminiLoopback, OpenAILoopback

FAST = {"base_delay": 0.01, "max_delay": 0.05, "timeout_s": 5.0, "max_attempts": 3}
OPENAI = "sk-fake-SCOPE-openai-0001"
GEMINI = "AIza-fake-SCOPE-gemini-0002"
SERVED = "ep-fake-SCOPE-served-0003"
MINE = "mine-fake-SCOPE-0004"


def _h(v: str) -> str:
    return hashlib.sha256(v.encode()).hexdigest()


def _msgs() -> list[dict]:
    return [{"role": "user", "content": "hello"}]


@pytest.fixture
def keys(monkeypatch, tmp_path):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))  # no reply replayed from elsewhere
    for k in ("OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "CAFE_ENDPOINT_API_KEY", "MY_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI)
    return monkeypatch


def test_openai_key_never_goes_to_a_named_server(keys):
    with OpenAILoopback() as srv:
        c = make_client("openai-compatible", "m", [srv.url], **FAST)
        assert run_sync(c.achat(_msgs())).text == "ok"
    assert srv.credential_hashes == set()  # no key at all: none was set for this server


def test_named_server_takes_cafe_endpoint_api_key_or_the_named_variable(keys):
    keys.setenv("CAFE_ENDPOINT_API_KEY", SERVED)
    keys.setenv("MY_KEY", MINE)
    with OpenAILoopback() as srv:
        run_sync(make_client("openai-compatible", "m", [srv.url], **FAST).achat(_msgs()))
        default = set(srv.credential_hashes)
        srv.credential_hashes.clear()
        c = make_client("openai-compatible", "m", [srv.url], api_key_env="MY_KEY", **FAST)
        run_sync(c.achat(_msgs()))
    assert default == {_h(SERVED)}
    assert srv.credential_hashes == {_h(MINE)}


def test_openai_key_goes_to_openai_as_configured_by_openai_base_url(keys):
    with OpenAILoopback() as srv:
        keys.setenv("OPENAI_BASE_URL", srv.url)
        run_sync(make_client("openai", "gpt-5", **FAST).achat(_msgs()))
        # the same URL spelled without /v1 is the same service
        run_sync(make_client("openai-compatible", "m", [srv.url[:-3]], **FAST).achat(_msgs()))
    assert srv.credential_hashes == {_h(OPENAI)}


def test_openai_kind_on_another_url_needs_the_endpoint_key(keys):
    with pytest.raises(ValueError, match="CAFE_ENDPOINT_API_KEY"):
        make_client("openai", "gpt-5", ["http://127.0.0.1:9/v1"])


def test_gemini_key_only_to_google_as_configured(keys):
    keys.setenv("CAFE_ENDPOINT_API_KEY", SERVED)
    with GeminiLoopback() as srv:
        run_sync(make_client("gemini", "gemini-2.5-flash", [srv.url], **FAST).achat(_msgs()))
        named = set(srv.credential_hashes)
        srv.credential_hashes.clear()
        keys.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        run_sync(make_client("gemini", "gemini-2.5-flash", [srv.url], **FAST).achat(_msgs()))
    assert named == {_h(SERVED)}
    assert srv.credential_hashes == {_h(GEMINI)}


def test_gemini_on_a_named_server_without_its_key_says_what_to_set(keys):
    with pytest.raises(ValueError, match="CAFE_ENDPOINT_API_KEY.*--api-key-env"):
        make_client("gemini", "gemini-2.5-flash", ["http://127.0.0.1:9"])


def test_no_server_is_assumed(keys):
    with pytest.raises(ValueError, match="--endpoint"):
        make_client("openai-compatible", "m")


def test_401_names_the_variable_and_is_not_retried(keys):
    keys.setenv("CAFE_ENDPOINT_API_KEY", "wrong-key-123456")
    with OpenAILoopback(require_key=SERVED) as srv:
        reply = run_sync(make_client("openai-compatible", "m", [srv.url], **FAST).achat(_msgs()))
    assert reply.text is None and srv.count == 0 and len(srv.paths) == 1  # one attempt
    assert "401" in reply.error and "CAFE_ENDPOINT_API_KEY is set but was refused" in reply.error
    assert "--api-key-env" in reply.error and "wrong-key-123456" not in reply.error


def _judge_reply(body):
    return json.dumps(
        {
            k: []
            for k in (
                "required_events",
                "all_caption_events",
                "all_reasoning_events",
                "matched_events",
                "error_matched",
                "error_use",
                "neutral_events",
                "missed_events",
            )
        }  # fmt: skip
    )


def test_judge_captioner_and_model_take_their_own_key_variables(keys, tmp_path):
    """`cafe run` with a served model and an LLM judge on two servers, each with its own key
    variable; `cafe caption` on a third; OPENAI_API_KEY/GEMINI_API_KEY reach none of them."""
    keys.setenv("MODEL_KEY", "model-fake-SCOPE-0005")
    keys.setenv("JUDGE_KEY", "judge-fake-SCOPE-0006")
    keys.setenv("CAFE_ENDPOINT_API_KEY", SERVED)
    with (
        OpenAILoopback(reply=lambda b: "<answer>x</answer>") as model,
        OpenAILoopback(reply=_judge_reply) as judge,
        OpenAILoopback(reply=lambda b: "a dog barks") as captioner,
    ):
        run = CliRunner().invoke(
            main,
            ["run", "--model", "openai-compatible", "-o", "model=served", "--bench", "synth",
             "--version", "n4-seed0", "--out", str(tmp_path / "run"), "--quiet",
             "--endpoint", model.url, "--api-key-env", "MODEL_KEY",
             "--judge", "openai-compatible", "--judge-model", "j",
             "--judge-endpoint", judge.url, "--judge-api-key-env", "JUDGE_KEY"],
        )  # fmt: skip
        cap = CliRunner().invoke(
            main,
            ["caption", "--bench", "synth", "--version", "n4-seed0", "--captioner",
             "openai-compatible", "--model", "c", "--endpoint", captioner.url,
             "--out", str(tmp_path / "caps.jsonl")],
        )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert cap.exit_code == 0, cap.output
    assert model.credential_hashes == {_h("model-fake-SCOPE-0005")}
    assert judge.credential_hashes == {_h("judge-fake-SCOPE-0006")}
    assert captioner.credential_hashes == {_h(SERVED)}
    assert len(judge.requests) == 4 and len(captioner.requests) == 4


def test_reward_judge_takes_the_endpoint_key(keys):
    from cafe.training.reward_judge import make_reward_judge

    keys.setenv("CAFE_ENDPOINT_API_KEY", SERVED)
    with OpenAILoopback(reply=lambda b: '{"score": 7}') as srv:
        rj = make_reward_judge("openai-compatible", "j", [srv.url], concurrency=2)
        run_sync(rj.client.achat(_msgs()))
    assert srv.credential_hashes == {_h(SERVED)}
