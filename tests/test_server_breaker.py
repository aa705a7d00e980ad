"""A dead server ends a command within a few attempts, not minutes of backoff: the circuit
breaker per server (cafe.clients.breaker). Counted in calls (and on a manual clock), never in
wall seconds: a closed loopback port (connection refused), a loopback server that dies mid-run,
and a busy one that resets connections while it answers (never stopped)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from click.testing import CliRunner

from cafe.cli import main
from cafe.clients import make_client
from cafe.clients.breaker import BREAK_AFTER, Breaker, ServerUnreachable
from cafe.clients.ratelimit import AdaptiveLimiter, CallError, RetryPolicy, call_with_retries
from cafe.execution import run_sync
from cafe.judge.extraction import ANALYSIS_KEYS, PAPER_KEYS
from cafe.testing.loopback import OpenAILoopback


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _msgs() -> list[dict]:
    return [{"role": "user", "content": "hi"}]


def test_breaker_opens_after_attempts_without_reply_and_any_reply_resets_it():
    b = Breaker("http://x/v1", threshold=3, option="--endpoint")
    b.on_no_reply("refused")
    b.on_no_reply("refused")
    b.on_reply()  # a reply (even a 500) means the server is there
    b.on_no_reply("refused")
    b.on_no_reply("refused")
    assert not b.is_open
    b.on_no_reply("ConnectError: refused")
    assert b.is_open
    with pytest.raises(ServerUnreachable) as e:
        b.check()
    msg = str(e.value)
    assert "http://x/v1" in msg and "--endpoint" in msg and "ConnectError: refused" in msg


def test_retries_stop_once_the_breaker_opens_and_sleepers_wake():
    """Calls backing off (here for an hour) give up as soon as the breaker opens."""
    attempts = []

    async def refused():
        attempts.append(1)
        raise CallError("ConnectError: refused", no_reply=True)

    policy = RetryPolicy(max_attempts=6, base_delay=3600.0, max_delay=3600.0)
    lim, brk = AdaptiveLimiter(1), Breaker("u", threshold=3)

    async def main():
        calls = [call_with_retries(refused, lim, policy, breaker=brk) for _ in range(3)]
        return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)

    out = asyncio.run(main())
    assert len(attempts) == 3 and all(isinstance(o, ServerUnreachable) for o in out)
    assert lim.stats()["no_reply"] == 3 and lim.stats()["retries"] == 2


def test_client_against_a_closed_port_stops_after_a_few_attempts():
    url = closed_port_url()
    c = make_client("openai-compatible", "m", [url], concurrency=4, max_attempts=6,
                    server_option="--judge-endpoint")  # fmt: skip

    async def many():
        return await asyncio.gather(*(c.achat(_msgs()) for _ in range(20)), return_exceptions=True)

    out = run_sync(many())
    assert all(isinstance(o, ServerUnreachable) for o in out)
    # 20 calls x 6 attempts before; now the breaker's 3 plus what was already in flight
    assert c.endpoints[0].limiter.stats()["no_reply"] <= BREAK_AFTER + 4 - 1
    assert url in str(out[0]) and "--judge-endpoint" in str(out[0])


def test_break_after_zero_keeps_retrying():
    c = make_client("openai-compatible", "m", [closed_port_url()], max_attempts=3,
                    base_delay=0.001, max_delay=0.002, break_after=0)  # fmt: skip
    reply = run_sync(c.achat(_msgs()))
    assert reply.error and reply.attempts == 3


RUN = ["run", "--model", "openai-compatible", "-o", "model=served", "--bench", "synth",
       "--judge", "none", "--no-progress", "--batch-size", "2", "--concurrency", "2"]  # fmt: skip


def test_cafe_run_against_a_refusing_server_stops_and_names_the_option(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    url = closed_port_url()
    out = tmp_path / "run"
    args = [*RUN, "--version", "n50-seed0", "--out", str(out), "--endpoint", url]
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    assert url in res.output and "--endpoint" in res.output
    assert "run the same command again" in res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and url in manifest["error"]
    # nothing was answered: no prediction is written (all 50 stay pending for the re-run)
    preds = out / "predictions.jsonl"
    assert not preds.exists() or preds.read_text() == ""


def test_cafe_run_when_the_server_dies_keeps_every_reply_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    answered = 20
    faults = lambda i, body: "die" if i >= answered else None  # noqa: E731
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>", faults=faults) as srv:
        args = [*RUN, "--version", "n50-seed0", "--out", str(out), "--endpoint", srv.url]
        first = CliRunner().invoke(main, args)
        sent = srv.count
    assert first.exit_code != 0 and srv.url in first.output and "--endpoint" in first.output
    # every reply the server gave is on disk; the dead server saw few attempts, not 30 x 6
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == answered
    assert all(json.loads(x)["raw_output"] == "<answer>x</answer>" for x in lines)
    assert sent <= answered + 2  # the request that died and what was in flight with it
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>") as srv2:
        args = [*RUN, "--version", "n50-seed0", "--out", str(out), "--endpoint", srv2.url]
        second = CliRunner().invoke(main, args)
        assert second.exit_code == 0, second.output
        assert srv2.count == 50 - answered  # the re-run makes exactly the missing calls
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 50


def _judge_run(root, n):
    from cafe.records import Prediction, Sample
    from cafe.store import RunStore

    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}})
    samples = [Sample(f"q{i}", "mmar", "1", f"Question [q{i}]?", ["yes", "no"], "yes", [],
                      caption=f"Cap {i}.") for i in range(n)]  # fmt: skip
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many([Prediction(s.id, 0, "m", "lalm", "h", "yes. Reasoning: a dog.",
                                 correct=True, reasoning_tokens=5) for s in samples])  # fmt: skip
    return store


JUDGE_REPLY = json.dumps({k: [] for k in (*ANALYSIS_KEYS, *PAPER_KEYS)})  # empty: a valid reply


def test_cafe_judge_when_the_judge_server_dies_keeps_judgements_and_resumes(tmp_path):
    from cafe.steps.cli import judge_command

    store = _judge_run(tmp_path / "run", 60)
    answered = 40

    def args(url):
        return [str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
                "--judge-endpoint", url, "--cache", str(tmp_path / "judge.sqlite"),
                "--no-progress", "--judge-concurrency", "4"]  # fmt: skip

    faults = lambda i, body: "die" if i >= answered else None  # noqa: E731
    with OpenAILoopback(reply=lambda b: JUDGE_REPLY, faults=faults) as srv:
        first = CliRunner().invoke(judge_command, args(srv.url))
        sent = srv.count
    assert first.exit_code != 0
    assert srv.url in first.output and "--judge-endpoint" in first.output
    assert f"{answered} records of this run kept" in first.output
    assert sent <= answered + 4  # the dying request and those in flight with it, no retries
    (judged,) = store.root.glob("judgements*.jsonl")
    assert len(judged.read_text().splitlines()) == answered
    with OpenAILoopback(reply=lambda b: JUDGE_REPLY) as srv2:
        second = CliRunner().invoke(judge_command, args(srv2.url))
        assert second.exit_code == 0, second.output
        assert srv2.count == 60 - answered


def test_cafe_judge_against_a_refusing_server_names_judge_endpoint(tmp_path):
    from cafe.steps.cli import judge_command

    store = _judge_run(tmp_path / "run", 30)
    url = closed_port_url()
    res = CliRunner().invoke(judge_command, [
        str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
        "--judge-endpoint", url, "--cache", str(tmp_path / "judge.sqlite"), "--no-progress",
    ])  # fmt: skip
    assert res.exit_code != 0
    assert url in res.output and "--judge-endpoint" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("command", ["rubric", "judge-accuracy", "caption"])
def test_other_judging_commands_against_a_refusing_server(command, tmp_path, monkeypatch):
    from test_judged_accuracy import _run as accuracy_run
    from test_rubric import build_run as rubric_run

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "k")
    url = closed_port_url()
    server = ["--judge", "openai-compatible", "--judge-model", "j", "--judge-endpoint", url]
    if command == "rubric":
        args = ["rubric", str(rubric_run(tmp_path / "run").root), *server, "--no-progress"]
    elif command == "judge-accuracy":
        args = ["judge-accuracy", str(accuracy_run(tmp_path / "run").root), *server]
    else:
        args = ["caption", "--bench", "synth", "--version", "n4-seed0", "--captioner",
                "openai-compatible", "--model", "c", "--endpoint", url,
                "--out", str(tmp_path / "caps.jsonl")]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    option = "--endpoint" if command == "caption" else "--judge-endpoint"
    assert url in res.output and f"(set by {option})" in res.output
    assert "Traceback" not in res.output and "never retrieved" not in res.output


def test_breaker_tells_a_busy_server_from_a_dead_one():
    """Resets, timeouts and 5xx among answers never open it (a busy server); nothing but
    failures for dead_after_s and `errors` attempts in a row does (a server answering 500 to
    everything); refusals open it at once."""
    now = [0.0]
    b = Breaker("http://x/v1", threshold=3, errors=8, dead_after_s=1.2, clock=lambda: now[0])
    for _ in range(100):  # a burst: 64 resets at once, then answers among errors
        b.on_error("ReadError: reset")
    assert not b.is_open  # 100 in a row, but within one instant
    for step in range(200):
        now[0] += 0.05
        b.on_reply() if step % 3 == 0 else b.on_error("HTTP 500")
    assert not b.is_open  # 10 s of 2 errors in 3: busy
    b.on_reply()
    for _ in range(7):
        now[0] += 0.5
        b.on_error("HTTP 500")
    assert not b.is_open  # 3 s, but only 7 attempts
    b.on_error("HTTP 500")
    assert b.is_open and "8 attempts in a row over 3 s" in str(b.error())
    assert "no good reply from http://x/v1" in str(b.error())


def test_a_reset_is_busy_and_a_refusal_dead_for_the_client():
    """Five resets in a row from a server that then answers: every call answered."""
    faults = ["reset"] * 5
    with OpenAILoopback(reply=lambda b: "ok", faults=faults) as srv:
        c = make_client("openai-compatible", "m", [srv.url], concurrency=8)

        async def many():
            return await asyncio.gather(*(c.achat(_msgs()) for _ in range(8)))

        out = run_sync(many())
    assert [o.text for o in out] == ["ok"] * 8 and srv.count == 13
    assert c.endpoints[0].limiter.stats()["no_reply"] == 5


def test_model_info_reads_a_bounded_models_list():
    """GET /models names the served weights; a body past MODEL_INFO_BYTES is no answer
    (never read whole), a normal one gives the model's entry."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cafe.clients.openai_compat import MODEL_INFO_BYTES

    entry = {"id": "m", "root": "/w/m", "owned_by": "vllm", "created": 1}
    bodies = {
        "/small/v1/models": json.dumps({"data": [entry]}).encode(),
        "/big/v1/models": json.dumps(
            {"data": [entry], "pad": "x" * (MODEL_INFO_BYTES + 1)}
        ).encode(),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = bodies[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:  # the client stopped reading: what the bound is for
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        client = make_client(
            "openai-compatible", "m", [f"{base}/small/v1", f"{base}/big/v1"], max_attempts=1
        )
        small, big = run_sync(client.amodel_info())
    finally:
        server.shutdown()
        server.server_close()
    assert small == {"id": "m", "root": "/w/m", "owned_by": "vllm"}
    assert big is None


def test_a_healthy_servers_burst_of_500_is_ridden_out_for_a_bounded_printed_time():
    """A server that answered, then answers nothing but HTTP 500: ridden out (said once) for
    ride_out_s, then opened; one that never answered opens within dead_after_s as before."""
    now, said = [0.0], []
    b = Breaker("http://x/v1", errors=8, dead_after_s=1.2, ride_out_s=60, clock=lambda: now[0],
                say=said.append)  # fmt: skip
    b.on_reply()
    for _ in range(30):  # 2 s of 500s
        now[0] += 2 / 30
        b.on_error("HTTP 500", 500)
    assert not b.is_open and b.riding_out()
    assert len(said) == 1 and "retrying for up to 60 s before stopping" in said[0]
    now[0] += 58.5
    b.on_error("HTTP 500", 500)
    assert b.is_open and not b.riding_out() and "31 attempts in a row over 60 s" in str(b.error())
    fresh = Breaker("http://y/v1", errors=8, dead_after_s=1.2, clock=lambda: now[0])
    for _ in range(8):
        now[0] += 0.2
        fresh.on_error("HTTP 500", 500)
    assert fresh.is_open and not fresh.riding_out()  # never answered: no ride-out


def test_cafe_run_rides_out_a_burst_of_500_from_a_server_that_answered(tmp_path, monkeypatch):
    """15 HTTP 500 in a row after two good answers (more than one call's retry attempts):
    every item is answered in the end, the run exits 0, and the ride-out is said."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    faults = lambda i, body: "500" if 2 <= i < 17 else None  # noqa: E731
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>", faults=faults) as srv:
        args = [*RUN, "--version", "n50-seed0", "--limit", "6", "--concurrency", "1",
                "--out", str(tmp_path / "run"), "--endpoint", srv.url]  # fmt: skip
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        assert srv.count == 6 + 15
    lines = [
        json.loads(x) for x in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    ]
    assert len(lines) == 6 and all(p["raw_output"] == "<answer>x</answer>" for p in lines)
    assert "answered before and now fails" in res.output


def test_a_retry_after_of_hours_gives_the_call_up_at_once_with_a_clear_line():
    said: list[str] = []
    policy = RetryPolicy(base_delay=0.001, say=said.append)
    attempts = []

    async def limited():
        attempts.append(1)
        raise CallError("HTTP 429", status=429, retryable=True, retry_after=7200.0)

    out = asyncio.run(call_with_retries(limited, AdaptiveLimiter(2), policy))
    assert len(attempts) == 1  # not 6 waits of the cap
    assert "asks to wait 7200 s (Retry-After), longer than cafe waits (60 s)" in out.error
    assert len(said) == 1
