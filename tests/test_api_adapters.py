"""API adapters (openai-compatible, openai-audio, gemini) against loopback servers: requests built
directly, completions in order with usage and cost, per-item errors, and no key anywhere."""

from __future__ import annotations

import base64
import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from cafe.adapters import ADAPTERS, ModelCard
from cafe.adapters.chat_api import usage_totals, with_audio_paths
from cafe.audio import write_wav
from cafe.cache import Cache, make_key
from cafe.records import Request
from cafe.testing.loopback import Fault, GeminiLoopback, OpenAILoopback

FAST = {"base_delay": 0.01, "max_delay": 0.05, "timeout_s": 5.0}
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0}


@pytest.fixture
def clips(tmp_path):
    paths = []
    for i, f in enumerate((220.0, 880.0)):
        t = np.arange(4000) / 16000
        p = tmp_path / f"clip{i}.wav"
        write_wav(p, (0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32))
        paths.append(str(p))
    return paths


def _request(sid: str, clip: str, run_index: int = 0, **gen) -> Request:
    return Request(
        sample_id=sid,
        run_index=run_index,
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {
                "role": "user",
                "content": [
                    {"type": "audio", "path": clip},
                    {"type": "text", "text": f"Question {sid}?\n(A) dog\n(B) cat"},
                ],
            },
        ],
        audio=[clip],
        generation={"max_new_tokens": 128, "temperature": 0.0, **gen},
        seed=100 + run_index,
        prompt_style="lalm",
        template_hash="t0",
    )


def _card(adapter: str, checkpoint: str, **options) -> ModelCard:
    return ModelCard(name=f"test-{adapter}", adapter=adapter, checkpoint=checkpoint,
                     engine=adapter, options=options)  # fmt: skip


def _answer_by_question(body: dict) -> str:
    """Reply naming the question it saw, so order and routing are checked."""
    if "messages" in body:
        text = [p for p in body["messages"][-1]["content"] if p["type"] == "text"][0]["text"]
    else:
        text = body["contents"][-1]["parts"][-1]["text"]
    return "answer to " + text.split("?")[0]


def test_openai_compatible_adapter_order_usage_cost_and_vllm_fields(clips):
    with OpenAILoopback(reply=_answer_by_question) as srv:
        cls = ADAPTERS.get("openai-compatible")
        ad = cls(_card("openai-compatible", "Qwen/Qwen2.5-Omni-7B", price=PRICE),
                 endpoint=srv.url, **FAST)  # fmt: skip
        reqs = [_request(f"s{i}", clips[i % 2], repetition_penalty=1.03) for i in range(6)]
        out = ad.generate(reqs)
        ad.close()
    assert [c.sample_id for c in out] == [f"s{i}" for i in range(6)]
    assert [c.text for c in out] == [f"answer to Question s{i}" for i in range(6)]
    body = srv.requests[0]
    assert body["model"] == "Qwen/Qwen2.5-Omni-7B" and body["max_tokens"] == 128
    assert body["repetition_penalty"] == 1.03 and body["seed"] == 100
    # the loopback counts words and marks: system "You are a helpful assistant." = 6, user
    # "Question s0?\n(A) dog\n(B) cat" = 11; reply "answer to Question s0" = 4
    c = out[0]
    assert c.output_tokens == 4
    assert c.backend["usage"] == {"prompt_tokens": 17, "completion_tokens": 4, "total_tokens": 21}
    assert c.backend["cost_usd"] == pytest.approx((17 * 2.5 + 4 * 10.0) / 1e6)
    assert c.backend["engine"] == "openai-compatible" and c.backend["endpoint"] == srv.url
    tot = usage_totals([x.backend for x in out] + [{"cached": True}])
    assert tot["calls"] == 6 and tot["cached"] == 1 and tot["completion_tokens"] == 24
    assert tot["cost_usd"] == pytest.approx(6 * (17 * 2.5 + 4 * 10.0) / 1e6)
    # the adapter's running totals (kept as calls finish) say the same
    assert {k: ad.usage[k] for k in tot} == {**tot, "cached": 0}
    assert ad.identity()["checkpoint"] == "Qwen/Qwen2.5-Omni-7B"


def test_openai_compatible_adapter_shards_over_endpoints(clips):
    with OpenAILoopback(latency_s=0.02) as a, OpenAILoopback(latency_s=0.02) as b:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m"), endpoints=[a.url, b.url], concurrency=2, **FAST
        )
        out = ad.generate([_request(f"s{i}", clips[0]) for i in range(20)])
    assert all(c.text == "ok" for c in out)
    assert a.count + b.count == 20 and min(a.count, b.count) >= 6


def test_failed_item_is_a_completion_with_error_and_others_succeed(clips):
    def faults(i, body):
        text = body["messages"][-1]["content"][-1]["text"]
        return "500" if text.startswith("Question bad") else None

    with OpenAILoopback(faults=faults) as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m"), endpoint=srv.url, max_attempts=2, base_delay=0.01
        )
        out = ad.generate([_request("good1", clips[0]), _request("bad", clips[1]),
                           _request("good2", clips[0])])  # fmt: skip
    assert [c.text for c in out] == ["ok", None, "ok"]
    assert "HTTP 500" in out[1].error and out[1].backend["attempts"] == 2


def test_gemini_adapter_inline_audio_and_generation(clips, monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "gemini-fake-key-abcdef")
    with GeminiLoopback(reply=_answer_by_question) as srv:
        ad = ADAPTERS.get("gemini")(
            _card("gemini", "gemini-2.5-flash", price=PRICE), endpoint=srv.url, **FAST
        )
        out = ad.generate([_request("g1", clips[1], top_p=0.9, repetition_penalty=1.1)])
    assert out[0].text == "answer to Question g1" and out[0].error is None
    body = srv.requests[0]
    assert body["_model"] == "gemini-2.5-flash"
    assert body["generationConfig"] == {
        "temperature": 0.0,
        "topP": 0.9,
        "maxOutputTokens": 128,
        "seed": 100,
    }  # fmt: skip  (repetition_penalty is not a Gemini field: dropped)
    inline = body["contents"][0]["parts"][0]["inlineData"]
    x, sr = sf.read(io.BytesIO(base64.urlsafe_b64decode(inline["data"])), dtype="float32")
    ref, _ = sf.read(clips[1], dtype="float32")
    assert sr == 16000 and np.allclose(x, ref, atol=1e-4)
    assert out[0].backend["usage"]["completion_tokens"] == 4  # answer, to, Question, g1


def test_messages_without_paths_take_request_audio(clips):
    r = _request("x", clips[0])
    r.messages[1]["content"][0] = {"type": "audio"}
    assert with_audio_paths(r)[1]["content"][0] == {"type": "audio", "path": clips[0]}
    r.messages = [{"role": "user", "content": "Q?"}]
    r.audio = clips
    assert with_audio_paths(r)[0]["content"] == [
        {"type": "audio", "path": clips[0]},
        {"type": "audio", "path": clips[1]},
        {"type": "text", "text": "Q?"},
    ]


KEYS = {
    "OPENAI_API_KEY": "sk-fake-LEAKCHECK-openai-7f3a9c",
    "GEMINI_API_KEY": "AIza-fake-LEAKCHECK-gemini-51e0",
    "CAFE_ENDPOINT_API_KEY": "ep-fake-LEAKCHECK-served-93d1",
}


@pytest.mark.parametrize(
    "adapter,server,model,as_service",
    [
        # the loopback as OpenAI itself, configured the SDK's way (OPENAI_BASE_URL)
        ("openai-audio", OpenAILoopback, "gpt-4o-audio-preview", True),
        # the loopback as a third-party / colleague's server named with --endpoint
        ("openai-compatible", OpenAILoopback, "Qwen/Qwen3-32B", False),
        ("gemini", GeminiLoopback, "gemini-2.5-flash", False),
    ],
)
def test_no_key_reaches_files_logs_cache_or_errors(
    adapter, server, model, as_service, clips, tmp_path, monkeypatch, caplog, capfd
):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    caplog.set_level(logging.DEBUG)  # httpx, google-genai and our own loggers, all levels
    faults = [Fault("429", retry_after=0.01), "500", "malformed"]

    def echo_headers_reply(body):  # a server echoing something back must not leak either
        return "ok"

    out_dir = tmp_path / "run"
    out_dir.mkdir()
    with server(reply=echo_headers_reply, faults=faults) as srv:
        if as_service:
            monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        ad = ADAPTERS.get(adapter)(_card(adapter, model, price=PRICE), endpoint=srv.url, **FAST)
        good = ad.generate([_request(f"s{i}", clips[i % 2]) for i in range(4)])
        # a dead endpoint: connection errors and their messages
        bad = ADAPTERS.get(adapter)(
            _card(adapter, model), endpoint="http://127.0.0.1:9", max_attempts=2, base_delay=0.01
        ).generate([_request("dead", clips[0])])
        ad.close()
    assert all(c.text == "ok" for c in good) and bad[0].error
    # the key of the service the server is reached as was sent (so keys were really in play),
    # and no other service's key ever was
    import hashlib

    sent = {k for k, v in KEYS.items() if hashlib.sha256(v.encode()).hexdigest()
            in srv.credential_hashes}  # fmt: skip
    assert sent == {"OPENAI_API_KEY" if as_service else "CAFE_ENDPOINT_API_KEY"}

    # write what a run writes: completions, a manifest with the card and identity, the cache
    with open(out_dir / "predictions.jsonl", "w") as f:
        for c in [*good, *bad]:
            f.write(c.to_json() + "\n")
    (out_dir / "manifest.json").write_text(
        json.dumps(
            {"model": ad.card.__dict__, "identity": ad.identity(), "client": ad.client.identity},
            default=str,
        )  # fmt: skip
    )
    cache = Cache(out_dir / "calls.sqlite")
    for c in good:
        cache.put(make_key(model=ad.identity(), sample=c.sample_id), c.to_dict())
    cache.close()

    captured = capfd.readouterr()
    texts = [caplog.text, captured.out, captured.err, repr(ad.__dict__), repr(bad[0])]
    texts += [p.read_bytes().decode("latin-1") for p in Path(out_dir).rglob("*") if p.is_file()]
    for secret in KEYS.values():
        for t in texts:
            assert secret not in t
            assert "LEAKCHECK" not in t


def test_builtin_api_cards_construct_and_gpt5_drops_temperature(clips, monkeypatch):
    from cafe.adapters.cards import load_cards

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-cards-000000")
    cards = load_cards()
    for name in ("gemini-2.5-flash", "gpt-4o-audio", "gemini-3-pro", "gpt-5", "qwen3-32b"):
        assert cards[name].adapter in ADAPTERS.names()
    with OpenAILoopback() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)  # the loopback as OpenAI itself
        ad = ADAPTERS.get("openai-audio")(cards["gpt-5"], endpoint=srv.url, **FAST)
        out = ad.generate([_request("s", clips[0])])
        ad4o = ADAPTERS.get("openai-audio")(cards["gpt-4o-audio"], endpoint=srv.url, **FAST)
        ad4o.generate([_request("s", clips[0])])
    assert out[0].text == "ok"
    b5, b4o = srv.requests
    assert "temperature" not in b5 and b5["model"] == "gpt-5" and "modalities" not in b5
    assert b5["max_completion_tokens"] == 128  # the request's generation (the runner fills it)
    assert b4o["model"] == "gpt-4o-audio-preview" and b4o["modalities"] == ["text"]
    assert b4o["temperature"] == 0.0


def test_unknown_option_fails_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown option.*tempreature.*known:.*concurrency"):
        ADAPTERS.get("openai-compatible")(_card("openai-compatible", "m"), tempreature=0.1)


def test_audio_tokens_priced_apart(clips):
    body = {
        "choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 10,
            "total_tokens": 1010,
            "prompt_tokens_details": {"audio_tokens": 800},
        },
    }
    price = {"input_per_mtok": 2.5, "audio_input_per_mtok": 40.0, "output_per_mtok": 10.0}
    with OpenAILoopback(reply=lambda b: body) as srv:
        ad = ADAPTERS.get("openai-compatible")(
            _card("openai-compatible", "m", price=price), endpoint=srv.url, **FAST
        )
        out = ad.generate([_request("s", clips[0])])
    # 200 text tokens at 2.5, 800 audio tokens at 40, 10 output tokens at 10 (per million)
    assert out[0].backend["cost_usd"] == pytest.approx((200 * 2.5 + 800 * 40 + 10 * 10) / 1e6)


def test_identity_covers_reply_shaping_options_not_endpoints(clips):
    with OpenAILoopback() as a, OpenAILoopback() as b:
        cls = ADAPTERS.get("openai-compatible")
        one = cls(_card("openai-compatible", "m"), endpoint=a.url, concurrency=4)
        two = cls(_card("openai-compatible", "m"), endpoints=[a.url, b.url], timeout_s=9)
        shaped = cls(_card("openai-compatible", "m"), endpoint=a.url,
                     extra_body={"chat_template_kwargs": {"enable_thinking": False}})  # fmt: skip
        assert one.identity() == two.identity()
        assert shaped.identity() != one.identity()
        assert shaped.identity()["options"]["extra_body"]["chat_template_kwargs"]
        out = one.generate([_request(f"s{i}", clips[0]) for i in range(3)])
    assert all(c.text == "ok" for c in out)
    assert one.usage["calls"] == 3 and one.usage["completion_tokens"] == 3  # "ok" x 3


def test_a_sampling_card_without_temperature_sends_the_providers_default(clips):
    """Cards replicating the paper's three runs sample with the model's published settings: no
    temperature in the request (the server's / provider's default), not a greedy 0."""
    from cafe.adapters.cards import load_cards

    cards = load_cards()
    for name in ("gemini-2.5-flash", "gpt-4o-audio"):
        assert cards[name].generation == {"max_new_tokens": 2048, "do_sample": True}
    with OpenAILoopback() as srv:
        ad = ADAPTERS.get("openai-compatible")(_card("openai-compatible", "m"), endpoint=srv.url,
                                               **FAST)  # fmt: skip
        req = _request("s", clips[0])
        req.generation = {"max_new_tokens": 64, "do_sample": True}
        ad.generate([req])
        req.generation = {"max_new_tokens": 64, "do_sample": True, "temperature": 0.7}
        ad.generate([req])
    sampled, explicit = srv.requests
    assert "temperature" not in sampled and explicit["temperature"] == 0.7
