"""Counters accumulate across invocations of one folder (issue 19): calls, cache hits, replies
by status, tokens and cost, with the last invocation's figures beside them."""

from __future__ import annotations

import json
from pathlib import Path

from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.counters import accumulate, add
from cafe.runner.main import run_with

register()


def test_add_sums_field_wise_and_nested() -> None:
    total = {"calls": 3, "cost_usd": 0.1, "replies": {"ok": 2}}
    more = {"calls": 1, "cost_usd": 0.2, "replies": {"ok": 1, "failed": 1}}
    assert add(total, more) == {"calls": 4, "cost_usd": 0.3, "replies": {"ok": 3, "failed": 1}}
    second = accumulate(accumulate(None, total), more)
    assert second["invocations"] == 2 and second["this_invocation"] == more
    assert second["total"]["replies"] == {"ok": 3, "failed": 1}


def test_model_call_counters_add_up_over_resumes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW])  # two clips: no request twice
    rows = [json.loads(x) for x in meta.read_text().splitlines()]
    rows[1]["id"] = "t1-fail"  # the tone adapter fails this one every time (a model failure)
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw = dict(data=str(meta), out=tmp_path / "r", progress=False, judge="none")
    first = run_with("tone", "tone", **kw)
    c1 = first.manifest["counters"]
    assert c1["invocations"] == 1 and c1["total"]["calls"] == 2
    again = run_with("tone", "tone", **kw)  # retries the model failure only
    c2 = again.manifest["counters"]
    assert c2["invocations"] == 2
    assert c2["this_invocation"]["calls"] == 1 and c2["total"]["calls"] == 3
    assert c2["total"]["cache_misses"] == 3 and c2["total"]["cache_hits"] == 0
    assert c2["total"]["replies"]["failed"] == 2 and sum(c2["total"]["replies"].values()) == 3
    assert c2["this_invocation"]["replies"] == {"failed": 1}
    on_disk = json.loads((tmp_path / "r" / "manifest.json").read_text())["counters"]
    assert on_disk == c2


def test_judge_counters_describe_the_folder_not_the_last_command(tmp_path: Path) -> None:
    """The bug: after a resume, replies.ok said 0 for a folder holding only ok judgements."""
    from cafe.steps.cafe_judge import judge_run

    r = run_with("reference", "synth", limit=4, judge="none", progress=False, cache=False,
            out=tmp_path / "r")  # fmt: skip
    judge_run(r.run_dir, judge="rule", progress=False)
    second = judge_run(r.run_dir, judge="rule", progress=False)  # nothing left to judge
    c = second["counters"]
    assert c["invocations"] == 2
    assert c["this_invocation"]["judged"] == 0 and c["this_invocation"]["replies"]["ok"] == 0
    assert c["total"]["judged"] == 4 and c["total"]["replies"]["ok"] == 4
    other = judge_run(r.run_dir, judge="rule", progress=False, tolerance_s=0.01)  # another spec
    assert other["counters"]["invocations"] == 1 and other["counters"]["total"]["judged"] == 4


def test_a_stopped_session_still_counts_what_it_wrote(tmp_path: Path, monkeypatch) -> None:
    """A model server that dies mid-run stops the run; the manifest's usage and counters cover
    every prediction kept (they are written with each durable batch, not only at a clean end),
    and the resume adds its own share on top."""
    from click.testing import CliRunner

    from cafe.cli import main
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    answered = 20
    faults = lambda i, body: "die" if i >= answered else None  # noqa: E731
    args = ["run", "--model", "openai-compatible", "-o", "model=served", "--bench", "synth",
            "--version", "n50-seed0", "--judge", "none", "--no-progress", "--batch-size", "2",
            "--concurrency", "2", "--out", str(out), "--endpoint"]  # fmt: skip
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>", faults=faults) as srv:
        first = CliRunner().invoke(main, [*args, srv.url])
    assert first.exit_code != 0 and "stopped" in first.output
    m1 = json.loads((out / "manifest.json").read_text())
    assert m1["status"] == "stopped"
    assert len((out / "predictions.jsonl").read_text().splitlines()) == answered
    assert m1["usage"]["calls"] == answered  # every reply the server gave
    c1 = m1["counters"]
    assert c1["invocations"] == 1 and sum(c1["total"]["replies"].values()) == answered
    assert c1["total"]["completion_tokens"] == m1["usage"]["completion_tokens"] > 0
    with OpenAILoopback(reply=lambda b: "<answer>x</answer>") as srv2:
        second = CliRunner().invoke(main, [*args, srv2.url])
        assert second.exit_code == 0, second.output
        assert srv2.count == 50 - answered
    m2 = json.loads((out / "manifest.json").read_text())
    c2 = m2["counters"]
    assert m2["usage"]["calls"] == 50 and c2["invocations"] == 2
    assert sum(c2["total"]["replies"].values()) == 50
    assert sum(c2["this_invocation"]["replies"].values()) == 50 - answered
    assert c2["total"]["calls"] == c1["total"]["calls"] + (50 - answered)
    per_reply = m1["usage"]["completion_tokens"] // answered
    assert c2["total"]["completion_tokens"] == m2["usage"]["completion_tokens"] == 50 * per_reply


def test_counters_on_disk_cover_every_batch_written_before_a_ctrl_c(tmp_path, monkeypatch) -> None:
    """Ctrl-C arrives as the sixth batch is about to be written, and the sixth batch had
    already been generated while the fifth was being written (generation runs ahead of the
    writes): the manifest on disk counts exactly the five batches (ten predictions) on disk.
    The bug: counters read the cache's and adapter's running figures at write time, which
    included the batch generated ahead (12 lookups for 10 lines)."""
    import threading

    import pytest

    from cafe.runner.execute import CachedAdapter
    from cafe.runner.main import RunInterrupted
    from cafe.store import JsonlWriter

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 10)
    generated, sixth_generated = [], threading.Event()
    real_generate = CachedAdapter.generate

    def generate(self, requests):
        out = real_generate(self, requests)
        generated.append(len(out))
        if len(generated) == 6:
            sixth_generated.set()
        return out

    writes = []
    real = JsonlWriter.write_many

    def write_many(self, records):
        records = list(records)
        if self.path.name == "predictions.jsonl" and records:
            writes.append(len(records))
            if len(writes) == 5:  # the slow writer: the next batch is generated meanwhile
                assert sixth_generated.wait(30)
            if len(writes) == 6:
                raise KeyboardInterrupt
        return real(self, records)

    monkeypatch.setattr(CachedAdapter, "generate", generate)
    monkeypatch.setattr(JsonlWriter, "write_many", write_many)
    out = tmp_path / "r"
    with pytest.raises(RunInterrupted):
        run_with("tone", "tone", data=str(meta), out=out, progress=False, judge="none",
            batch_size=2, concurrency=1)  # fmt: skip
    lines = (out / "predictions.jsonl").read_text().splitlines()
    manifest = json.loads((out / "manifest.json").read_text())
    # the five batches before the stop, and those generated by then (issue 45: a stop keeps
    # what was made; the sixth, whose write the interrupt cut, is taken back out whole)
    n = len(lines)
    assert n >= 10 and n % 2 == 0 and manifest["status"] == "interrupted"
    c = manifest["counters"]
    assert c["invocations"] == 1 and sum(c["total"]["replies"].values()) == n
    # identical clips: two calls, the others from the call cache
    assert c["total"]["calls"] == 2 and c["total"]["cache_hits"] == n - 2
    assert c["total"]["cache_misses"] == 2 and manifest["cache"] == {"hits": n - 2, "misses": 2}
    # each line carries its share: the counters are their sum
    shares = [json.loads(x)["call"] for x in lines]
    assert sum(s.get("cache_hits", 0) for s in shares) == n - 2
    assert sum(s.get("calls", 0) for s in shares) == 2


def test_a_full_disk_at_the_manifest_takes_the_batch_back_out(tmp_path, monkeypatch) -> None:
    """The disk fills as a batch's counts are being recorded: its lines, already appended, are
    taken back out, so the folder's counters and predictions agree after the stop (the batch
    is redone by the next run, from the call cache) and after the resume."""
    import errno

    import pytest

    from cafe.store import RunStore

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 5)
    real = RunStore.write_manifest

    def write_manifest(self, manifest):
        replies = manifest.get("counters", {}).get("total", {}).get("replies", {})
        if sum(replies.values()) >= 6:  # the third batch's commit: the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, manifest)

    monkeypatch.setattr(RunStore, "write_manifest", write_manifest)
    out = tmp_path / "r"
    kw = dict(data=str(meta), out=out, progress=False, judge="none", batch_size=2, concurrency=1)
    with pytest.raises(OSError, match="No space"):
        run_with("tone", "tone", **kw)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    c = json.loads((out / "manifest.json").read_text())["counters"]["total"]
    assert len(lines) == 4 and sum(c["replies"].values()) == 4
    assert c["calls"] + c["cache_hits"] == 4
    monkeypatch.setattr(RunStore, "write_manifest", real)
    again = run_with("tone", "tone", **kw)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    c = again.manifest["counters"]
    assert len(lines) == 10 and sum(c["total"]["replies"].values()) == 10
    assert c["total"]["calls"] == 2 and c["total"]["cache_hits"] == 8 and c["invocations"] == 2


def test_lines_a_kill_left_past_the_counted_length_join_the_counters(tmp_path, monkeypatch):
    """A kill between a batch's lines and its manifest (here: the manifest write dies and
    nothing takes the lines back, as with SIGKILL): the next run counts those lines from their
    own shares, as the killed session's, before adding its own."""
    import pytest

    from cafe.store import JsonlWriter, RunStore

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 4)
    real = RunStore.write_manifest

    def killed(self, manifest):
        if sum(manifest.get("counters", {}).get("total", {}).get("replies", {}).values()) >= 4:
            raise SystemExit(137)  # the second batch's commit never happens
        return real(self, manifest)

    monkeypatch.setattr(RunStore, "write_manifest", killed)
    monkeypatch.setattr(JsonlWriter, "truncate", lambda self, size: None)  # a kill undoes nothing
    out = tmp_path / "r"
    kw = dict(data=str(meta), out=out, progress=False, judge="none", batch_size=2, concurrency=1)
    with pytest.raises(SystemExit):
        run_with("tone", "tone", **kw)
    on_disk = json.loads((out / "manifest.json").read_text())
    assert sum(on_disk["counters"]["total"]["replies"].values()) == 2  # one batch committed
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 4  # two written
    monkeypatch.undo()
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    again = run_with("tone", "tone", **kw)
    c = again.manifest["counters"]
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 8
    assert sum(c["total"]["replies"].values()) == 8 and c["invocations"] == 2
    assert c["total"]["calls"] == 2 and c["total"]["cache_hits"] == 6
    assert sum(c["this_invocation"]["replies"].values()) == 4  # the second run's own share
