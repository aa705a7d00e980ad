"""The loopback servers themselves: real wire shapes, scripted faults, no credential logging."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request

from cafe.testing.loopback import Fault, GeminiLoopback, OpenAILoopback


def _post(url, body, headers=None):
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_openai_wire_shape_and_faults(capsys):
    faults = [Fault("429", retry_after=3), "500", "malformed"]
    with OpenAILoopback(reply=lambda b: "hi " + b["model"], faults=faults) as srv:
        url = srv.url + "/chat/completions"
        body = {"model": "m1", "messages": [{"role": "user", "content": "x"}]}
        auth = {"Authorization": "Bearer sekrit-token-123"}
        s1, h1, _ = _post(url, body, auth)
        s2, _, _ = _post(url, body, auth)
        s3, _, raw3 = _post(url, body, auth)
        s4, _, raw4 = _post(url, body, auth)
    assert (s1, h1["Retry-After"], s2, s3) == (429, "3", 500, 200)
    try:
        json.loads(raw3)
        raise AssertionError("malformed fault sent valid JSON")
    except ValueError:
        pass
    data = json.loads(raw4)
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "hi m1"}
    assert data["usage"]["completion_tokens"] == 2 and data["object"] == "chat.completion"
    assert srv.count == 4 and srv.requests[0] == body
    assert srv.credential_hashes == {hashlib.sha256(b"sekrit-token-123").hexdigest()}
    out = capsys.readouterr()
    assert "sekrit" not in out.out + out.err


def test_gemini_wire_shape():
    with GeminiLoopback(reply=lambda b: "yes") as srv:
        body = {"contents": [{"role": "user", "parts": [{"text": "a b"}]}]}
        s, _, raw = _post(srv.url + "/v1beta/models/gemini-x:generateContent", body)
        s404, _, _ = _post(srv.url + "/v1beta/models/gemini-x:embedContent", body)
        # countTokens is served (reasoning lengths): "a b" is two loopback tokens
        sc, _, counted = _post(srv.url + "/v1beta/models/gemini-x:countTokens", body)
    data = json.loads(raw)
    assert s == 200 and s404 == 404
    assert sc == 200 and json.loads(counted) == {"totalTokens": 2}
    assert data["candidates"][0]["content"]["parts"] == [{"text": "yes"}]
    assert data["usageMetadata"] == {
        "promptTokenCount": 2,
        "candidatesTokenCount": 1,
        "totalTokenCount": 3,
    }
    assert srv.requests[0]["_model"] == "gemini-x"


def test_latency_setting_delays_replies():
    waits: list[float] = []
    with OpenAILoopback(latency_s=0.2, sleep=waits.append, faults=["ok", "429"]) as srv:
        s200, _, _ = _post(srv.url + "/chat/completions", {"model": "m", "messages": []})
        s429, _, _ = _post(srv.url + "/chat/completions", {"model": "m", "messages": []})
    assert (s200, s429) == (200, 429)
    assert waits == [0.2, 0.2]  # every model call waits latency_s before its reply
