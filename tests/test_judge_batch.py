"""`cafe judge --batch` against a loopback speaking OpenAI's Files + Batches endpoints: judgements
equal the direct path's on the same replies, every line is paid once (the loopback counts
submissions and answers per custom_id), failed / expired / cancelled items are handled with
counts, a killed command resumes by polling the same batch, and no key is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.records import Prediction, Sample
from cafe.steps.cafe_judge import judge_run
from cafe.steps.cli import judge_command
from cafe.testing.batch_loopback import BatchPlan
from cafe.testing.loopback import OpenAILoopback
from tests.test_judge_llm import build_run, scripted

FAST = {"poll_s": 0.02, "collect_s": 0.2}
ROOT = Path(__file__).resolve().parents[1]


def judgements(store) -> dict:
    rows = [json.loads(x) for x in store.path("judgements.jsonl").open()]
    keep = ("status", "raw_reply", "matched_events", "error_matched", "error_use",
            "missed_events", "neutral_events", "reason")  # fmt: skip
    return {(r["sample_id"], r["run_index"]): {k: r.get(k) for k in keep} for r in rows}


def direct_reference(tmp_path):
    store = build_run(tmp_path / "direct")
    with OpenAILoopback(reply=scripted()) as srv:
        sec = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                        progress=False, cache=tmp_path / "direct.sqlite")  # fmt: skip
        assert len(srv.requests) == 7
    return sec, judgements(store)


def batch_run(store, srv, cache, **kw):
    opts = {**FAST, **kw.pop("batch_options", {})}
    return judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4, progress=False,
                     cache=cache, batch=True, batch_options=opts, **kw)  # fmt: skip


def test_batch_equals_direct_and_pays_each_line_once(tmp_path):
    ref_sec, ref = direct_reference(tmp_path)
    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted()) as srv:
        sec = batch_run(store, srv, tmp_path / "b.sqlite")
        assert srv.requests == []  # nothing went the direct way
        # round 1: the four usable predictions; q-c and q-d retried (invalid) in rounds 2, 3
        assert srv.batches.created == 3
        assert sum(srv.batches.submitted.values()) == 7
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 7
    assert judgements(store) == ref
    for k in ("acc_per", "err_per", "err_use", "err_omit", "judgements"):
        assert sec[k] == ref_sec[k]
    cost = sec["calls"]["cost"]
    (stats,) = cost["batches"].values()
    assert stats["submitted"] == 7 and stats["succeeded"] == 7 and stats["batches"] == 3
    # every batch id went into the log before the first status check of that batch
    (folder,) = store.path("batches").iterdir()
    events = [json.loads(x) for x in (folder / "log.jsonl").open()]
    assert [e["event"] for e in events if e["event"] != "uploaded"] == [
        "prepared", "submitted", "finished"] * 3  # fmt: skip
    # the ledger, in the manifest: the loopback's token counts, summed
    tally = json.loads(store.path("manifest.json").read_text())["costs"]["by_client"]
    (modes,) = tally.values()
    assert modes["batch"]["calls"] == 7 and "direct" not in modes
    # a re-run from scratch replays the cache: no batch at all
    for p in store.root.glob("judgements*.jsonl"):
        p.unlink()
    with OpenAILoopback(reply=scripted()) as srv:
        again = batch_run(store, srv, tmp_path / "b.sqlite")
        assert srv.batches.created == 0 and srv.requests == []
    assert again["calls"]["cache_hits"] == 7 and again["acc_per"] == ref_sec["acc_per"]


def test_expired_batch_and_line_errors_are_resubmitted_never_repaid(tmp_path):
    _, ref = direct_reference(tmp_path)
    store = build_run(tmp_path / "run")
    # batch 0 (4 lines): line 0 answered, line 1 a 500 (retryable), then it expires (2, 3 never
    # reached); every later batch completes
    plans = [BatchPlan(outcome="expired", done=2, line_errors={1: 500}), BatchPlan()]
    with OpenAILoopback(reply=scripted(), batch_plans=plans) as srv:
        sec = batch_run(store, srv, tmp_path / "b.sqlite")
        assert set(srv.batches.paid.values()) == {1}  # nothing answered twice
        resubmitted = [c for c, n in srv.batches.submitted.items() if n == 2]
        assert len(resubmitted) == 3  # the 500 and the two expired lines
    assert judgements(store) == ref
    (stats,) = sec["calls"]["cost"]["batches"].values()
    assert stats["resubmitted"] == 3 and stats["expired_items"] == 2
    assert stats["line_errors"] == 1 and stats["batches_expired"] == 1


def test_failed_items_can_go_direct_and_client_errors_fail_the_item(tmp_path):
    _, ref = direct_reference(tmp_path)
    store = build_run(tmp_path / "run")
    # batch 0: its first line a 400 (that item fails, with the reason); the other three expire
    # unreached and go the direct way; later batches (retries of invalid replies) complete
    plans = [BatchPlan(outcome="expired", done=1, line_errors={0: 400}), BatchPlan()]
    with OpenAILoopback(reply=scripted(), batch_plans=plans) as srv:
        sec = batch_run(store, srv, tmp_path / "b.sqlite", batch_options={"retry": "direct"})
        assert len(srv.requests) == 3  # the three expired lines, directly
        refused = srv.batches.jobs["batch_0"]["lines"][0][1]["messages"][0]["content"]
    (stats,) = sec["calls"]["cost"]["batches"].values()
    assert stats["sent_direct"] == 3 and stats["failed"] == 1
    rows = judgements(store)
    bad = [k for k, v in rows.items() if "HTTP 400" in (v["reason"] or "")]
    assert len(bad) == 1 and f"[{bad[0][0]}]" in refused and rows[bad[0]]["status"] == "failed"
    # every other item judged as on the direct path (the 400'd one's retries never happen)
    assert {k: v for k, v in rows.items() if k != bad[0]} == {
        k: v for k, v in ref.items() if k != bad[0]
    }
    (modes,) = sec["calls"]["cost"]["by_client"].values()
    assert modes["direct"]["calls"] == 3


def test_cancelled_batch_fails_its_open_items_and_a_rerun_submits_only_those(tmp_path):
    _, ref = direct_reference(tmp_path)
    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted(), batch_plans=[BatchPlan(outcome="cancelled", done=2),
                                                       BatchPlan()]) as srv:  # fmt: skip
        sec = batch_run(store, srv, tmp_path / "b.sqlite")
        first_paid = dict(srv.batches.paid)
        (stats,) = sec["calls"]["cost"]["batches"].values()
        assert stats["cancelled_items"] == 2 and stats["batches_cancelled"] == 1
        rows = judgements(store)
        cancelled = [k for k, v in rows.items() if "cancelled" in (v["reason"] or "")]
        assert len(cancelled) == 2
        batch_run(store, srv, tmp_path / "b.sqlite")
        assert set(srv.batches.paid.values()) == {1}
        assert set(first_paid) <= set(srv.batches.paid)
    assert judgements(store) == ref


def _wait_for(path: Path, word: str, timeout: float = 60.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and word in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never said {word!r}")


def test_a_kill_between_submit_and_poll_resumes_the_same_batch(tmp_path):
    _, ref = direct_reference(tmp_path)
    store = build_run(tmp_path / "run")
    cache = tmp_path / "b.sqlite"
    with OpenAILoopback(reply=scripted(), batch_plans=[BatchPlan(outcome="stall")]) as srv:
        cmd = [sys.executable, "-m", "cafe.cli", "judge", str(store.root), "--judge",
               "openai-compatible", "--judge-model", "judge-m", "--judge-endpoint", srv.url,
               "--cache", str(cache), "--no-progress", "--batch",
               "--batch-poll", "0.05"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            logs = store.path("batches")
            t0 = time.time()
            while not list(logs.glob("*/log.jsonl")) and time.time() - t0 < 60:
                time.sleep(0.05)
            (log,) = logs.glob("*/log.jsonl")
            _wait_for(log, '"submitted"')
            while srv.batches.status_checks == 0:  # it is polling now
                time.sleep(0.02)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert srv.batches.created == 1 and srv.batches.paid == {}
        # the service finishes the batch while nobody is watching; the resume polls it
        srv.batches.jobs["batch_0"]["plan"] = BatchPlan()
        srv.batches.plans = [BatchPlan()]
        sec = batch_run(store, srv, cache)
        (stats,) = sec["calls"]["cost"]["batches"].values()
        assert stats["batches_adopted"] == 1 and stats["adopted"] == 4
        assert set(srv.batches.submitted.values()) == {1}  # nothing submitted twice
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 7
    assert judgements(store) == ref


def test_a_kill_between_create_and_log_finds_the_batch_by_submission_id(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "b.sqlite"
    with OpenAILoopback(reply=scripted(), batch_plans=[BatchPlan(polls=3), BatchPlan()]) as srv:
        # --batch-no-wait: submit, check once, leave it (the items stay failed as "pending")
        sec = batch_run(store, srv, cache, batch_options={"wait": False})
        assert sec["judgements"]["failed"] == 5
        assert "still in_progress" in json.dumps(list(judgements(store).values()))
        # as if killed before "submitted" reached the log: drop it
        (log,) = store.path("batches").glob("*/log.jsonl")
        lines = [x for x in log.read_text().splitlines() if '"submitted"' not in x]
        log.write_text("\n".join(lines) + "\n")
        sec = batch_run(store, srv, cache)
        first = [cid for cid, _ in srv.batches.jobs["batch_0"]["lines"]]
        assert all(srv.batches.submitted[c] == 1 for c in first)
    assert sec["judgements"] == {"ok": 3, "invalid": 1, "failed": 1, "total": 5}
    assert '"found": true' in log.read_text()


def test_no_key_is_written_and_it_goes_only_to_its_service(tmp_path, monkeypatch):
    import hashlib

    key = "sk-planted-SECRET-8d1f3a"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    store = build_run(tmp_path / "run")
    cache = tmp_path / "b.sqlite"
    with OpenAILoopback(reply=scripted()) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)  # the loopback as OpenAI itself
        sec = judge_run(store.root, "openai", "gpt-4o-mini", [srv.url], 4, progress=False,
                        cache=cache, batch=True, batch_options=FAST)  # fmt: skip
        assert hashlib.sha256(key.encode()).hexdigest() in srv.credential_hashes
    assert sec["judgements"]["ok"] == 3
    # priced from the table: gpt-4o-mini at 0.15 / 0.60 per M tokens, half in batch
    (modes,) = sec["calls"]["cost"]["by_client"].values()
    t = modes["batch"]
    want = (t["prompt_tokens"] * 0.15 + t["completion_tokens"] * 0.60) / 1e6 * 0.5
    assert t["cost_usd"] == pytest.approx(want, abs=1e-6) and want > 0
    for path in [*store.root.rglob("*"), *tmp_path.glob("b.sqlite*")]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_dry_run_counts_calls_and_hits_and_prices_both_ways_sending_nothing(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  - {match: 'openai-compatible:judge-m', input: 4.0, "
                      "output: 10.0, batch: 0.5}\n")  # fmt: skip
    store = build_run(tmp_path / "run")
    cache = tmp_path / "c.sqlite"
    with OpenAILoopback(reply=scripted()) as srv:
        args = [str(store.root), "--judge", "openai-compatible", "--judge-model", "judge-m",
                "--judge-endpoint", srv.url, "--cache", str(cache), "--no-progress", "--dry-run",
                "--prices", str(prices), "--json"]  # fmt: skip
        res = CliRunner().invoke(judge_command, args)
        assert res.exit_code == 0, res.output
        assert srv.count == 0 and srv.batches.created == 0
        d = json.loads(res.output)
        assert not store.path("judgements.jsonl").exists()
        # a real run, to learn the prompts the judge sends (first attempts only)
        judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4, progress=False,
                  cache=cache)  # fmt: skip
        firsts = {}
        for body in srv.requests:
            if "Your previous reply could not be used" in body["messages"][0]["content"]:
                continue  # a retry: the prompt with the format reminder appended
            firsts.setdefault(body["messages"][0]["content"], body)
    assert d["calls"] == 4 and d["cache_hits"] == 0 and d["already_judged"] == 0
    tokens = sum(-(-len(p) // 4) for p in firsts)
    assert d["prompt_tokens_est"] == tokens and d["completion_tokens_est"] == 4 * 300
    want = (tokens * 4.0 + 4 * 300 * 10.0) / 1e6
    assert d["cost_usd_direct_est"] == pytest.approx(want, abs=1e-4)
    assert d["cost_usd_batch_est"] == pytest.approx(want / 2, abs=1e-4)
    assert d["cost_usd_direct_max"] == pytest.approx((tokens * 4.0 + 4 * 2048 * 10.0) / 1e6,
                                                     abs=1e-4)  # fmt: skip
    # after the real run, from scratch: every first attempt is a cache hit, nothing to send
    for p in store.root.glob("judgements*.jsonl"):
        p.unlink()
    res = CliRunner().invoke(judge_command, args[:-1])
    assert res.exit_code == 0, res.output
    assert "calls to send         0" in res.output and "cache hits" in res.output


def test_selective_judges_each_distinct_prompt_once_and_reports_the_saving(tmp_path):
    store = build_run(tmp_path / "run")
    # two more runs that answered exactly like run 0 (greedy decoding): same judge prompt
    base = [p for p in store.predictions() if p.run_index == 0]
    more = [Prediction(p.sample_id, r, p.model, p.prompt_style, p.template_hash, p.raw_output,
                       correct=p.correct, reasoning_tokens=5) for p in base for r in (1, 2)
            if not (p.sample_id == "q-a" and r == 1)]  # fmt: skip
    with store.writer("predictions.jsonl") as w:
        w.write_many(more)
    with OpenAILoopback(reply=scripted()) as srv:
        sec = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                        progress=False, cache=tmp_path / "c.sqlite", selective=True)  # fmt: skip
        assert len(srv.requests) == 7  # as for run 0 alone
    rows = judgements(store)
    assert len(rows) == 12  # 4 samples x 3 runs
    assert rows[("q-b", 2)]["matched_events"] == rows[("q-b", 0)]["matched_events"]
    assert "shared: same judge prompt as q-b run 0" in rows[("q-b", 2)]["reason"]
    assert rows[("q-a", 1)]["status"] == "failed"  # the failed prediction is not shared
    sel = sec["selective"]
    assert sel["items"] == 12 and sel["judged"] == 5 and sel["shared_same_prompt"] == 7
    assert sel["calls_saved_est"] == pytest.approx(7 * 7 / 5, abs=0.1)
    assert sec["judgements"] == {"ok": 8, "invalid": 3, "failed": 1, "total": 12}


# -- Gemini batch mode (google-genai against the loopback's batch routes) --------------------
def gemini_reply():
    reply_for = scripted()

    def reply(body):
        text = "".join(p.get("text", "") for p in body["contents"][0]["parts"])
        assert body["_model"] == "gemini-3-pro"
        return reply_for({"messages": [{"content": text}], "temperature": 0})

    return reply


def gemini_run(store, srv, cache, **opts):
    return judge_run(store.root, "gemini", "gemini-3-pro", [srv.url], 4, progress=False,
                     cache=cache, batch=True, batch_options={**FAST, **opts})  # fmt: skip


@pytest.mark.parametrize("inline_max_bytes", [10_000_000, 10], ids=["inline", "jsonl-file"])
def test_gemini_batch_equals_direct_inline_and_as_a_file(tmp_path, monkeypatch,
                                                         inline_max_bytes):  # fmt: skip
    from cafe.testing.loopback import GeminiLoopback

    key = "gm-planted-SECRET-51c2"
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", key)
    ref_store = build_run(tmp_path / "direct")
    with GeminiLoopback(reply=gemini_reply()) as srv:
        ref_sec = judge_run(ref_store.root, "gemini", "gemini-3-pro", [srv.url], 4,
                            progress=False, cache=tmp_path / "d.sqlite")  # fmt: skip
    store = build_run(tmp_path / "run")
    with GeminiLoopback(reply=gemini_reply()) as srv:
        sec = gemini_run(store, srv, tmp_path / "b.sqlite", inline_max_bytes=inline_max_bytes)
        assert srv.requests == [] and srv.batches.created == 3
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 7
        uploads = [p for p in srv.paths if p.startswith("/upload/")]
        assert bool(uploads) == (inline_max_bytes == 10)  # the large-batch path uploads JSONL
    assert judgements(store) == judgements(ref_store)
    assert sec["acc_per"] == ref_sec["acc_per"] and sec["judgements"] == ref_sec["judgements"]
    for path in [*store.root.rglob("*"), *tmp_path.glob("b.sqlite*")]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_gemini_expired_job_line_errors_and_a_cancel_then_resume(tmp_path, monkeypatch):
    from cafe.testing.loopback import GeminiLoopback

    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "test-key")
    ref_store = build_run(tmp_path / "direct")
    with GeminiLoopback(reply=gemini_reply()) as srv:
        judge_run(ref_store.root, "gemini", "gemini-3-pro", [srv.url], 4, progress=False,
                  cache=tmp_path / "d.sqlite")  # fmt: skip
    ref = judgements(ref_store)

    # job 0 expires after two lines, the second of them an internal error (rpc 13): three
    # items resubmitted, none answered twice
    store = build_run(tmp_path / "run")
    plans = [BatchPlan(outcome="expired", done=2, line_errors={1: 500}), BatchPlan()]
    with GeminiLoopback(reply=gemini_reply(), batch_plans=plans) as srv:
        sec = gemini_run(store, srv, tmp_path / "b.sqlite")
        assert set(srv.batches.paid.values()) == {1}
        assert sum(1 for n in srv.batches.submitted.values() if n == 2) == 3
    (stats,) = sec["calls"]["cost"]["batches"].values()
    assert stats["resubmitted"] == 3 and stats["batches_expired"] == 1
    assert judgements(store) == ref

    # a job left running (--batch-no-wait), its "submitted" lost from the log as by a kill:
    # the next run finds it by display name, and a cancel at the service fails its open items
    store = build_run(tmp_path / "run2")
    cache = tmp_path / "b2.sqlite"
    with GeminiLoopback(reply=gemini_reply(), batch_plans=[BatchPlan(polls=5)]) as srv:
        gemini_run(store, srv, cache, wait=False)
        (log,) = store.path("batches").glob("*/log.jsonl")
        log.write_text("".join(x + "\n" for x in log.read_text().splitlines()
                               if '"submitted"' not in x))  # fmt: skip
        srv.batches.jobs["batch-0"]["cancel"] = True
        srv.batches.jobs["batch-0"]["plan"] = BatchPlan(done=1)
        srv.batches.plans = [BatchPlan()]
        sec = gemini_run(store, srv, cache)
        (stats,) = sec["calls"]["cost"]["batches"].values()
        assert stats["batches_adopted"] == 1 and stats["cancelled_items"] == 3
        assert '"found": true' in log.read_text()
        sec = gemini_run(store, srv, cache)  # the cancelled items, submitted anew
        assert set(srv.batches.paid.values()) == {1}
    assert judgements(store) == ref


# -- captions through the batch transport ------------------------------------------------------
def test_caption_command_batch_equals_direct_and_keeps_state_beside_the_file(tmp_path):
    from cafe.benchmarks.synth.generator import generate
    from cafe.judge.captions import load_captions
    from cafe.judge.cli import caption_command

    data = generate(tmp_path / "synth", n=3, seed=1)

    def reply(body):
        parts = body["messages"][0]["content"]
        assert parts[0]["type"] == "input_audio" and parts[0]["input_audio"]["data"]
        return f"A clip of {len(parts[0]['input_audio']['data'])} base64 characters."

    caps = {}
    for mode in ("direct", "batch"):
        out = tmp_path / f"{mode}.jsonl"
        args = [
            "--bench",
            "synth",
            "--data",
            str(data),
            "--captioner",
            "openai-compatible",
            "--model",
            "omni",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / f"{mode}.sqlite"),
        ]
        if mode == "batch":
            args += ["--batch", "--batch-poll", "0.02"]
        with OpenAILoopback(reply=reply) as srv:
            res = CliRunner().invoke(caption_command, [*args, "--endpoint", srv.url])
            assert res.exit_code == 0, res.output
            assert "3 captions written" in res.output
            if mode == "batch":
                assert srv.requests == [] and srv.batches.created == 1
                assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 3
                assert "batch (openai-batch" in res.output and "submitted 3" in res.output
                assert (tmp_path / "batch.jsonl.batches").is_dir()
        caps[mode] = load_captions(out)
    assert caps["batch"] == caps["direct"] and len(caps["direct"]) == 3


def test_gemini_caption_batch_sends_the_audio_inline(tmp_path, monkeypatch):
    import asyncio

    import numpy as np

    from cafe.audio import write_wav
    from cafe.cache import Cache
    from cafe.caller import call_plan
    from cafe.clients import make_client
    from cafe.judge.captions import caption_samples, load_captions
    from cafe.records import Sample
    from cafe.testing.loopback import GeminiLoopback

    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "test-key")
    samples = []
    for i in range(2):
        wav = tmp_path / f"clip{i}.wav"
        write_wav(wav, np.sin(np.arange(1600 * (i + 1)) / 10).astype("float32") * 0.1)
        samples.append(Sample(f"c{i}", "mmar", "1", "q", ["x"], "x", [str(wav)]))
    out = tmp_path / "caps.jsonl"
    sizes = []

    def reply(body):
        (audio,) = [p for p in body["contents"][0]["parts"] if "inlineData" in p]
        sizes.append(len(audio["inlineData"]["data"]))
        return f"{len(audio['inlineData']['data'])} characters of audio."

    async def go(srv):
        plan = call_plan(f"{out}.", batch=True, batch_options=FAST)
        client = make_client("gemini", "gemini-3-pro", endpoints=[srv.url], calls=plan)
        try:
            return await caption_samples(
                samples,
                client,
                out,
                concurrency=plan.item_concurrency(2),
                cache=Cache(tmp_path / "c.sqlite"),
                progress=False,
            )
        finally:
            await client.aclose()

    with GeminiLoopback(reply=reply) as srv:
        res = asyncio.run(go(srv))
        assert res["written"] == 2 and srv.batches.created == 1 and srv.requests == []
    # 16 kHz 16-bit WAV: 44-byte header + 2 bytes a sample, base64 (4 chars per 3 bytes)
    want = sorted(-(-(44 + 2 * 1600 * k) // 3) * 4 for k in (1, 2))
    assert sorted(sizes) == want
    assert sorted(load_captions(out).values()) == [f"{n} characters of audio." for n in want]


# -- MMAR rubric scoring through the batch transport ---------------------------------------
def test_rubric_batch_gives_the_hand_counted_scores_with_five_raters_as_five_lines(tmp_path):
    from cafe.steps.cli import rubric_command
    from tests.test_rubric import args as rubric_args
    from tests.test_rubric import build_run as rubric_build
    from tests.test_rubric import scripted as rubric_scripted

    store = rubric_build(tmp_path / "run")
    with OpenAILoopback(reply=rubric_scripted()) as srv:
        cmd = [*rubric_args(store, srv.url, tmp_path / "c.sqlite"), "--batch",
               "--batch-poll", "0.02"]  # fmt: skip
        res = CliRunner().invoke(rubric_command, cmd)
        assert res.exit_code == 0, res.output
        assert srv.requests == []
        # a 5 raters, b 5 + 2 retries, d 5 raters x 4 attempts: each call its own line, once
        assert sum(srv.batches.paid.values()) == 5 + 7 + 20
        assert set(srv.batches.paid.values()) == {1}
        assert "batch (openai-batch" in res.output
    sec = json.loads(store.path("metrics.json").read_text())["rubric"]
    # the same hand counts as the direct test: a 0.5, b 0.75, c 0 (wrong); d invalid after its
    # retries is left out of the denominator, as the authors' evaluation_rubrics.py does
    assert sec["score"] == round(100 * (0.5 + 0.75) / 3, 2)  # the section rounds to 2 places
    assert sec["status"]["ok"] == 2 and sec["status"]["invalid"] == 1
    assert sec["invalid_replies"] == 2 + 20
    costs = json.loads(store.path("manifest.json").read_text())["costs"]["by_client"]
    assert next(iter(costs.values()))["batch"]["calls"] == 32


# -- answer extraction (judged accuracy) through the batch transport -------------------------
def _answer_reply(replies: dict[str, str]):
    def reply(body):
        prompt = body["messages"][0]["content"]
        assert "(A) dog barking\n(B) cat meowing\n(C) bird song" in prompt
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        return replies[next(k for k in replies if f"[{k}]" in prompt)]

    return reply


def _cache_rows(path: Path) -> dict:
    import sqlite3

    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, value FROM calls"))


def test_judge_accuracy_batch_equals_direct_and_pays_each_line_once(tmp_path):
    from cafe import api
    from cafe.steps.cli import judge_accuracy_command
    from tests.test_judged_accuracy import CASES
    from tests.test_judged_accuracy import _run as accuracy_run

    replies = {k: reply for k, (_, reply, _) in CASES.items()}
    ref_store = accuracy_run(tmp_path / "direct")
    with OpenAILoopback(reply=_answer_reply(replies)) as srv:
        res = CliRunner().invoke(judge_accuracy_command, [
            str(ref_store.root), "--judge", "openai-compatible", "--judge-model", "gpt-5",
            "--judge-endpoint", srv.url, "--cache", str(tmp_path / "d.sqlite")])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 6  # five items, s5 asked again with the reminder
    ref = json.loads(ref_store.path("metrics.json").read_text())["judged_accuracy"]
    assert ref["calls"]["mode"] == "direct" and ref["calls"]["sent"] == 6

    store = accuracy_run(tmp_path / "run")
    with OpenAILoopback(reply=_answer_reply(replies)) as srv:
        sec = api.judge_accuracy(store.root, "openai-compatible", "gpt-5", endpoints=[srv.url],
                                 cache=tmp_path / "b.sqlite", batch=True,
                                 batch_options=FAST)  # fmt: skip
        assert srv.requests == []  # nothing went the direct way
        # round 1: the five items; round 2: s5's retry (its first reply was unusable)
        assert srv.batches.created == 2
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 6
    # item for item: the same prompts (cache keys) got the same replies; the same figures
    assert _cache_rows(tmp_path / "b.sqlite") == _cache_rows(tmp_path / "d.sqlite")
    assert len(_cache_rows(tmp_path / "b.sqlite")) == 6
    for k in ("total", "breakdowns", "verdicts", "judge"):
        assert sec[k] == ref[k]
    assert sec["total"] == {"correct": 1, "total": 5, "acc": 20.0}  # the direct test's hand count
    (stats,) = sec["calls"]["cost"]["batches"].values()
    assert stats["submitted"] == 6 and stats["succeeded"] == 6 and stats["batches"] == 2
    assert store.path("batches").is_dir()
    (modes,) = json.loads(store.path("manifest.json").read_text())["costs"]["by_client"].values()
    assert modes["batch"]["calls"] == 6 and "direct" not in modes


def test_judge_accuracy_selective_asks_only_where_the_official_rule_cannot_decide(tmp_path):
    from cafe.parsing import extract_answer
    from cafe.steps.cli import judge_accuracy_command
    from tests.test_judged_accuracy import CASES, CHOICES
    from tests.test_judged_accuracy import _run as accuracy_run

    # three more items whose outputs the official rule maps to a choice (as the runner records
    # it); their judge replies disagree with the rule, so a call for them would show
    more = {"s6": ("(A)", "B"), "s7": ("C", "A"), "s8": ("cat meowing", "A")}
    replies = {**{k: reply for k, (_, reply, _) in CASES.items()},
               **{k: reply for k, (_, reply) in more.items()}}  # fmt: skip

    def build(root):
        store = accuracy_run(root)
        samples = [Sample(k, "mmar", "v1", f"Which source [{k}]?", CHOICES, "dog barking", [],
                          meta={"modality": "speech"}) for k in more]  # fmt: skip
        with store.path("samples.jsonl").open("a") as f:
            f.write("".join(s.to_json() + "\n" for s in samples))
        rows = []
        for k, (out, _) in more.items():
            answer, status = extract_answer(out, CHOICES)
            assert status == "ok" and answer in CHOICES
            rows.append(Prediction(k, 0, "Tiny", "lalm", "h", out, answer=answer,
                                   parse_status=status, answer_text=out))  # fmt: skip
        # the first five: the rule could not map them (unmapped prose, or no choice at all)
        olds = store.predictions()
        for p in olds:
            assert extract_answer(p.raw_output, CHOICES)[0] is None
        with store.writer("predictions.jsonl") as w:
            w.write_many(rows)
        return store

    def args(store, url, cache):
        return [str(store.root), "--judge", "openai-compatible", "--judge-model", "gpt-5",
                "--judge-endpoint", url, "--cache", str(cache)]  # fmt: skip

    # the paper's protocol (default): every output is asked, s5 twice
    full = build(tmp_path / "full")
    with OpenAILoopback(reply=_answer_reply(replies)) as srv:
        res = CliRunner().invoke(judge_accuracy_command, args(full, srv.url, tmp_path / "f.sq"))
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 9
    sec = json.loads(full.path("metrics.json").read_text())["judged_accuracy"]
    # by hand: s1 right; the judge's B for s6 wrong, its A for s7 and s8 right -> 3 of 8
    assert sec["total"]["correct"] == 3 and "selective" not in sec

    # --selective, by batch: lines only for s1..s5 (and s5's retry)
    store = build(tmp_path / "run")
    with OpenAILoopback(reply=_answer_reply(replies)) as srv:
        res = CliRunner().invoke(judge_accuracy_command, [
            *args(store, srv.url, tmp_path / "s.sq"), "--selective", "--batch",
            "--batch-poll", "0.02"])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert srv.requests == [] and set(srv.batches.paid.values()) == {1}
        assert sum(srv.batches.submitted.values()) == 6
        asked = {next(k for k in replies if f"[{k}]" in body["messages"][0]["content"])
                 for job in srv.batches.jobs.values() for _, body in job["lines"]}  # fmt: skip
        assert asked == {"s1", "s2", "s3", "s4", "s5"}
    sec = json.loads(store.path("metrics.json").read_text())["judged_accuracy"]
    # by hand: s1 (judge: A) and s6 (rule: dog barking) right; s7 bird, s8 cat wrong -> 2 of 8
    assert sec["total"] == {"correct": 2, "total": 8, "acc": 25.0}
    assert sec["verdicts"] == {"ok": 6, "none": 1, "unparseable": 1, "failed": 0}
    sel = sec["selective"]
    assert sel["items"] == 8 and sel["judged"] == 5 and sel["decided_without_call"] == 3
    assert sel["shared_same_prompt"] == 0 and sel["items_without_own_call"] == 3
    assert sel["calls_saved_est"] == pytest.approx(6 / 5 * 3, abs=0.1)  # 6 calls for 5 items
    assert sec["calls"]["sent"] == 6 and sec["calls"]["mode"] == "batch"
    assert "selective: 3 of 8 judged without a call of their own (~3.6 calls saved)" in res.output
    assert "batch (openai-batch" in res.output and "submitted 6" in res.output


def test_judge_accuracy_no_wait_leaves_the_figure_alone_and_a_rerun_collects(tmp_path):
    from cafe.judge.answer import SECTION
    from cafe.steps.judged import judge_accuracy_run
    from tests.test_judged_accuracy import CASES
    from tests.test_judged_accuracy import _run as accuracy_run

    replies = {k: reply for k, (_, reply, _) in CASES.items()}
    store = accuracy_run(tmp_path / "run")
    cache = tmp_path / "b.sqlite"

    def go(srv, **opts):
        return judge_accuracy_run(store.root, "openai-compatible", "gpt-5", [srv.url],
                                  cache=cache, batch=True,
                                  batch_options={**FAST, **opts})  # fmt: skip

    plans = [BatchPlan(polls=3), BatchPlan()]
    with OpenAILoopback(reply=_answer_reply(replies), batch_plans=plans) as srv:
        sec = go(srv, wait=False)  # submitted, checked once, still running
        assert sec["pending"] == 5 and srv.batches.paid == {}
        assert SECTION not in json.loads(store.path("metrics.json").read_text())
        sec = go(srv)  # the same batch polled to its end, then s5's retry
        assert "pending" not in sec and srv.batches.created == 2
        assert set(srv.batches.submitted.values()) == {1}  # nothing submitted twice
        assert set(srv.batches.paid.values()) == {1} and len(srv.batches.paid) == 6
    written = json.loads(store.path("metrics.json").read_text())[SECTION]
    assert written["total"] == {"correct": 1, "total": 5, "acc": 20.0}
