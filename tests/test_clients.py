"""Chat clients against loopback servers speaking the real OpenAI / Gemini wire protocols."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import time

import numpy as np
import pytest
import soundfile as sf
from manual_clock import ManualClock

from cafe.audio import load_audio, write_wav
from cafe.clients import make_client
from cafe.clients.ratelimit import AdaptiveLimiter
from cafe.execution import run_sync
from cafe.testing.loopback import Fault, GeminiLoopback, OpenAILoopback

FAST = {"base_delay": 0.01, "max_delay": 0.05, "timeout_s": 5.0}


@pytest.fixture
def clip(tmp_path):
    t = np.arange(8000) / 16000
    path = tmp_path / "clip.wav"
    write_wav(path, (0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    return str(path)


def _msgs(clip=None, text="What do you hear?"):
    parts = [{"type": "text", "text": text}]
    if clip:
        parts.append({"type": "audio", "path": clip})
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts}]


def _decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    x, sr = sf.read(io.BytesIO(data), dtype="float32")
    return x, sr


def test_openai_input_audio_reaches_server_and_decodes_to_clip(clip):
    with OpenAILoopback(reply=lambda body: "A dog barks.") as srv:
        c = make_client("openai-compatible", "qwen-omni", [srv.url], **FAST)
        reply = run_sync(c.achat(_msgs(clip), temperature=0.0, max_tokens=64, seed=7))
    assert reply.error is None and reply.text == "A dog barks."
    assert reply.usage["completion_tokens"] == 4  # "A", "dog", "barks", "."
    assert reply.finish_reason == "stop" and reply.endpoint == srv.url
    body = srv.requests[0]
    assert body["model"] == "qwen-omni" and body["temperature"] == 0.0 and body["seed"] == 7
    assert body["max_tokens"] == 64
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    audio = [p for p in body["messages"][1]["content"] if p["type"] == "input_audio"]
    assert len(audio) == 1 and audio[0]["input_audio"]["format"] == "wav"
    x, sr = _decode_wav(base64.b64decode(audio[0]["input_audio"]["data"]))
    assert sr == 16000
    np.testing.assert_allclose(x, load_audio(clip), atol=1 / 16000)  # 16-bit PCM round trip


def test_gemini_inline_audio_and_usage(clip, monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-gemini-key-for-tests")
    with GeminiLoopback(reply=lambda body: "B") as srv:
        c = make_client("gemini", "gemini-2.5-flash", [srv.url], **FAST)
        reply = run_sync(c.achat(_msgs(clip), max_tokens=32, seed=3))
        assert srv.paths[0] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert reply.error is None and reply.text == "B" and reply.finish_reason == "STOP"
    # the loopback counts words and marks of the user turn: "What do you hear?" -> 5
    assert reply.usage == {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    body = srv.requests[0]
    assert body["systemInstruction"]["parts"][0]["text"] == "Be brief."
    assert body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 32, "seed": 3}
    parts = body["contents"][0]["parts"]
    assert parts[0]["text"] == "What do you hear?"
    inline = parts[1]["inlineData"]
    assert inline.get("mimeType", inline.get("mime_type")) == "audio/wav"  # SDK sends either
    x, _ = _decode_wav(base64.urlsafe_b64decode(inline["data"]))
    np.testing.assert_allclose(x, load_audio(clip), atol=1 / 16000)


def test_gemini_large_clip_goes_through_files_api_once(clip, monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-gemini-key-for-tests")
    with GeminiLoopback(reply=lambda body: "C") as srv:
        c = make_client("gemini", "gemini-3-pro", [srv.url], inline_limit_bytes=1000, **FAST)

        async def two():
            return await asyncio.gather(c.achat(_msgs(clip)), c.achat(_msgs(clip)))

        replies = run_sync(two())
    assert [r.text for r in replies] == ["C", "C"]
    assert list(srv.files) == ["files/clip0"]  # uploaded once for both calls
    x, _ = _decode_wav(srv.files["files/clip0"]["data"])
    np.testing.assert_allclose(x, load_audio(clip), atol=1 / 16000)
    for body in srv.requests:
        fd = body["contents"][0]["parts"][1]["fileData"]
        assert fd["file_uri" if "file_uri" in fd else "fileUri"].endswith("/v1beta/files/clip0")


@pytest.mark.parametrize("kind", ["openai-compatible", "gemini"])
def test_429_retry_after_honoured_and_limiter_halves(kind, monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-gemini-key-for-tests")
    server = OpenAILoopback if kind != "gemini" else GeminiLoopback
    with server(reply=lambda b: "ok", faults=[Fault("429", retry_after=0.4)]) as srv:
        c = make_client(kind, "m", [srv.url], concurrency=8, **FAST)
        clock = ManualClock()  # the backoff waits in virtual seconds
        # a limiter whose clock stands still: regrowth on time (issue 21) stays out of the count
        c.endpoints[0].limiter = lim = AdaptiveLimiter(8, clock=lambda: 100.0, sleep=clock.sleep)
        reply = run_sync(c.achat(_msgs()))
    assert reply.text == "ok" and reply.attempts == 2 and srv.count == 2
    # base_delay is 0.01: only the server's Retry-After explains a 0.4 s wait before attempt 2;
    # above its floor the limiter cuts (8 -> 4) instead of pausing every caller (issue 21)
    assert clock.sleeps == [pytest.approx(0.4)]
    assert lim.paused_until == 0.0
    assert lim.rate_limited == 1 and lim.limit == 4


def test_500_then_success_and_malformed_then_success():
    with OpenAILoopback(reply=lambda b: "fine", faults=["500", "malformed", "500"]) as srv:
        c = make_client("openai-compatible", "m", [srv.url], **FAST)
        reply = run_sync(c.achat(_msgs()))
    assert reply.text == "fine" and reply.attempts == 4 and srv.count == 4


def test_timeouts_retry_then_error_without_exception():
    with OpenAILoopback(faults=lambda i, body: Fault("timeout", delay_s=0.5)) as srv:
        c = make_client(
            "openai-compatible", "m", [srv.url], timeout_s=0.15, max_attempts=2, base_delay=0.01
        )
        reply = run_sync(c.achat(_msgs()))
        deadline = time.monotonic() + 60  # a loaded machine may read the 2nd request late
        while srv.count < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert reply.text is None and reply.attempts == 2
    assert "timed out" in reply.error and srv.count == 2


def test_malformed_bodies_exhaust_retries_into_error_reply(monkeypatch):
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-gemini-key-for-tests")
    for server, kind in ((OpenAILoopback, "openai-compatible"), (GeminiLoopback, "gemini")):
        with server(faults=lambda i, body: "malformed") as srv:
            c = make_client(kind, "m", [srv.url], max_attempts=3, base_delay=0.01)
            reply = run_sync(c.achat(_msgs()))
        assert reply.text is None and reply.attempts == 3 and srv.count == 3
        assert "malformed" in reply.error


def test_client_errors_are_not_retried():
    with OpenAILoopback() as srv:
        c = make_client("openai-compatible", "m", [srv.url + "/nowhere"], **FAST)
        reply = run_sync(c.achat(_msgs()))
    assert reply.attempts == 1 and "HTTP 404" in reply.error


def test_unreadable_audio_is_a_per_item_error(tmp_path):
    bad = tmp_path / "broken.wav"
    bad.write_bytes(b"not audio at all")
    with OpenAILoopback() as srv:
        c = make_client("openai-compatible", "m", [srv.url], **FAST)
        reply = run_sync(c.achat(_msgs(str(bad))))
    assert reply.text is None and "broken.wav" in reply.error and srv.count == 0


def test_several_endpoints_share_the_load():
    with OpenAILoopback(latency_s=0.05) as a, OpenAILoopback(latency_s=0.05) as b:
        c = make_client("openai-compatible", "m", [a.url, b.url], concurrency=4, **FAST)

        async def many():
            return await asyncio.gather(*(c.achat(_msgs(text=f"q{i}")) for i in range(40)))

        replies = run_sync(many())
    assert all(r.text == "ok" for r in replies)
    assert a.count + b.count == 40 and min(a.count, b.count) >= 15
    assert {r.endpoint for r in replies} == {a.url, b.url}


def test_failover_to_healthy_endpoint():
    with OpenAILoopback(faults=lambda i, b: "500") as bad, OpenAILoopback() as good:
        c = make_client("openai-compatible", "m", [bad.url, good.url], **FAST)

        async def many():
            return await asyncio.gather(*(c.achat(_msgs()) for _ in range(10)))

        replies = run_sync(many())
    assert all(r.text == "ok" and r.endpoint == good.url for r in replies)


def test_reasoning_content_is_kept_in_front():
    body = {
        "choices": [
            {
                "message": {"content": "<answer>x</answer>", "reasoning_content": "hmm"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12},
    }
    with OpenAILoopback(reply=lambda b: body) as srv:
        c = make_client("openai-compatible", "m", [srv.url], **FAST)
        reply = asyncio.run(c.achat(_msgs()))  # a fresh loop works too
    assert reply.text == "<think>hmm</think><answer>x</answer>"
    assert reply.usage["total_tokens"] == 12


def test_openai_kind_needs_key_and_uses_max_completion_tokens(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        make_client("openai", "gpt-5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test-key-0001")
    with OpenAILoopback() as srv:
        # the loopback stands in for OpenAI as the user configured it (OPENAI_BASE_URL)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        c = make_client("openai", "gpt-5", drop_params=["temperature"], **FAST)
        run_sync(c.achat(_msgs(), max_tokens=99))
    assert hashlib.sha256(b"sk-fake-test-key-0001").hexdigest() in srv.credential_hashes
    body = srv.requests[0]
    assert body["max_completion_tokens"] == 99 and "temperature" not in body
    assert "sk-fake-test-key-0001" not in c.identity


def test_base_url_from_environment(monkeypatch):
    with OpenAILoopback() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url.removesuffix("/v1"))
        c = make_client("openai-compatible", "m", **FAST)
        assert run_sync(c.achat(_msgs())).text == "ok"
    assert c.endpoints[0].url == srv.url


def test_a_cancelled_call_never_hands_its_reply_to_the_next_call():
    def reply(body):
        return "answer " + body["messages"][-1]["content"]

    def faults(i, body):  # the first call stalls; the caller gives up on it
        return Fault("timeout", delay_s=0.4) if i == 0 else None

    with OpenAILoopback(reply=reply, faults=faults) as srv:
        c = make_client("openai-compatible", "m", [srv.url], concurrency=1, **FAST)

        async def scenario():
            q1 = [{"role": "user", "content": "q1"}]
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(c.achat(q1), timeout=0.1)
            await asyncio.sleep(0.5)  # the stale reply to q1 is now on the wire
            return await c.achat([{"role": "user", "content": "q2"}])

        second = run_sync(scenario())
    assert second.text == "answer q2"


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
@pytest.mark.parametrize("kind", ["openai-compatible", "gemini"])
def test_every_fault_over_both_http_transports(transport, kind, clip, monkeypatch):
    """Both transports behind the one httpx API: audio, 429, 500, malformed, timeout, then ok."""
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "fake-gemini-key-for-tests")
    server = OpenAILoopback if kind != "gemini" else GeminiLoopback
    faults = [Fault("429", retry_after=0.05), "500", "malformed", Fault("timeout", delay_s=0.6)]
    with server(reply=lambda b: "heard", faults=faults) as srv:
        c = make_client(kind, "m", [srv.url], http_transport=transport, timeout_s=0.3,
                        base_delay=0.01, max_delay=0.05)  # fmt: skip
        reply = run_sync(c.achat(_msgs(clip)))
        run_sync(c.aclose())
    assert reply.text == "heard" and reply.attempts == 5 and srv.count == 5
    assert c.endpoints[0].limiter.rate_limited == 1
    body = srv.requests[-1]
    wav = (
        body["messages"][1]["content"][1]["input_audio"]["data"]
        if kind != "gemini"
        else body["contents"][0]["parts"][1]["inlineData"]["data"]
    )
    decode = base64.b64decode if kind != "gemini" else base64.urlsafe_b64decode
    x, _ = _decode_wav(decode(wav))
    np.testing.assert_allclose(x, load_audio(clip), atol=1 / 16000)


def test_unknown_http_transport_is_refused():
    with pytest.raises(ValueError, match="http_transport"):
        make_client("openai-compatible", "m", ["http://127.0.0.1:1/v1"], http_transport="curl")


def test_clips_are_encoded_under_a_limiter_slot(clip, monkeypatch):
    """A large batch must not encode (and hold) every clip before the first call goes out."""
    import cafe.clients.openai_compat as oc

    seen = []
    real = oc.audio_wav
    with OpenAILoopback() as srv:
        c = make_client("openai-compatible", "m", [srv.url], concurrency=2, **FAST)
        lim = c.endpoints[0].limiter

        def spy(path):
            seen.append(lim.in_flight)
            return real(path)

        monkeypatch.setattr(oc, "audio_wav", spy)

        async def many():
            return await asyncio.gather(*(c.achat(_msgs(clip)) for _ in range(8)))

        replies = run_sync(many())
    assert all(r.text == "ok" for r in replies) and len(seen) == 8
    assert all(1 <= n <= 2 for n in seen)


def test_aiohttp_transport_errors_carry_the_failed_request():
    """Behind the httpx API (as google-genai uses it) a refused connection is httpx's
    ConnectError naming the request that failed, as httpx's own transport raises it."""
    import socket

    import httpx

    from cafe.clients.transport import AiohttpTransport

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1/x"  # released: nothing listens

    async def call():
        transport = AiohttpTransport(1, 2.0)
        async with httpx.AsyncClient(transport=transport) as http:
            try:
                await http.post(url, content=b"{}")
            finally:
                await transport.aclose()

    with pytest.raises(httpx.ConnectError) as err:
        asyncio.run(call())
    assert str(err.value.request.url) == url
