"""`cafe run` with API models end to end against loopback servers: faults included, the run
resumes without calls, and no key reaches the run folder, the cache, the logs or the output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.cli import main
from cafe.testing.loopback import Fault, GeminiLoopback, OpenAILoopback

KEYS = {
    "OPENAI_API_KEY": "sk-fake-E2ELEAK-1a2b3c4d",
    "GEMINI_API_KEY": "AIza-fake-E2ELEAK-9z8y",
    "CAFE_ENDPOINT_API_KEY": "ep-fake-E2ELEAK-5e6f",
}


@pytest.mark.parametrize(
    "model,server", [("gpt-4o-audio", OpenAILoopback), ("gemini-2.5-flash", GeminiLoopback)]
)
def test_cafe_run_api_model_faults_resume_and_no_key_anywhere(
    model, server, tmp_path, monkeypatch, caplog
):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.DEBUG)
    faults = [Fault("429", retry_after=0.05), "500", "malformed"]
    out = tmp_path / "run"
    with server(reply=lambda body: "Reasoning: it barks.", faults=faults) as srv:
        args = ["run", "--model", model, "--bench", "synth", "--version", "n4-seed0",
                "--out", str(out), "--judge", "none", "--quiet",
                "-o", f"endpoint={srv.url}", "-o", "base_delay=0.01"]  # fmt: skip
        first = CliRunner().invoke(main, args, catch_exceptions=False)
        calls_after_first = srv.count
        second = CliRunner().invoke(main, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    # 4 items; the three scripted faults each cost one extra attempt; the re-run calls nothing
    assert calls_after_first == 4 + 3 and srv.count == calls_after_first
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 4 and all(p["raw_output"] == "Reasoning: it barks." for p in preds)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["name"] == model
    # 4 successful calls counted once (the failed attempts returned nothing), kept on resume
    assert manifest["usage"]["calls"] == 4 and manifest["usage"]["completion_tokens"] > 0

    texts = [caplog.text, first.output, second.output]
    texts += [p.read_bytes().decode("latin-1") for p in Path(tmp_path).rglob("*") if p.is_file()]
    for t in texts:
        assert "E2ELEAK" not in t


def test_cafe_run_shards_a_served_model_across_endpoints(tmp_path, monkeypatch):
    """`cafe run --endpoint A --endpoint B`: the model's requests are spread over both servers,
    every item answered once."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    reply = "<answer>x</answer>"
    with OpenAILoopback(reply=lambda b: reply, latency_s=0.05) as a:
        with OpenAILoopback(reply=lambda b: reply, latency_s=0.05) as b:
            args = ["run", "--model", "openai-compatible", "-o", "model=served-x",
                    "--bench", "synth", "--version", "n8-seed0", "--out", str(out),
                    "--judge", "none", "--quiet",
                    "--endpoint", a.url, "--endpoint", b.url]  # fmt: skip
            result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert a.count + b.count == 8 and a.count > 0 and b.count > 0
    assert all(body["model"] == "served-x" for body in [*a.requests, *b.requests])
    preds = (out / "predictions.jsonl").read_text().splitlines()
    assert len(preds) == 8


def test_cafe_run_without_a_key_says_what_to_set(tmp_path, monkeypatch):
    for k in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    args = ["run", "--model", "gemini-2.5-flash", "--bench", "synth", "--version", "n4-seed0",
            "--out", str(tmp_path / "run"), "--judge", "none", "--quiet"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "cannot load model 'gemini-2.5-flash'" in result.output
    assert "GEMINI_API_KEY" in result.output
