"""A stop keeps what was paid for (issue 45): `kill -INT` of a `cafe run` (a background job's,
whose SIGINT the shell set to ignored, too) while calls are at the server: the calls already
sent finish and their records are written, none not yet sent is started, and once the same
command has finished the folder counts exactly the calls the server answered. In a notebook
the stop cancels the work still to do. Orderings are forced with events, never the clock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from runner_helpers import stop_a_notebook_cell

from cafe.execution import execute, run_sync
from cafe.testing.loopback import OpenAILoopback

N = 12


def _cmd(url: str, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "cafe.cli", "run", "--model", "openai-compatible", "-o", "model=m",
        "--endpoint", url, "--bench", "synth", "--limit", str(N), "--batch-size", "1",
        "--concurrency", "2", "--out", str(out), "--no-progress",
    ]  # fmt: skip


@pytest.mark.parametrize("inherited", [signal.SIG_IGN, signal.SIG_DFL], ids=["background", "fg"])
def test_an_interrupted_run_counts_every_call_the_server_answered(tmp_path, inherited) -> None:
    gate, at_server = threading.Event(), threading.Event()

    def reply(body: dict) -> str:
        if len(srv.requests) >= 2:
            at_server.set()
        assert gate.wait(300)  # a bound only: the test opens it
        return "A"

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "CAFE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": root}

    def started_with_sigint_as(disposition):  # noqa: ANN001,ANN202
        return lambda: signal.signal(signal.SIGINT, disposition)

    out = tmp_path / "run"
    with OpenAILoopback(reply=reply) as srv:
        proc = subprocess.Popen(
            _cmd(srv.url, out),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=started_with_sigint_as(inherited),
        )
        try:
            assert at_server.wait(300), "no call reached the server"
            proc.send_signal(signal.SIGINT)  # two calls sent, held at the server
        finally:
            gate.set()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, err.decode()[-2000:]
        answered = srv.count
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        assert manifest["counters"]["total"]["calls"] == answered < N  # the sent ones, written
        lines = (out / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == answered
        again = subprocess.run(_cmd(srv.url, out), env=env, capture_output=True, timeout=300)
        assert again.returncode == 0, again.stderr.decode()[-2000:]
        total = json.loads((out / "manifest.json").read_text())["counters"]["total"]
        assert srv.count == N and total["calls"] == N and total["cache_hits"] == 0
        assert total["completion_tokens"] == N  # one token ("A") per answered call


@pytest.mark.parametrize("inherited", [signal.SIG_IGN, signal.default_int_handler],
                         ids=["background", "fg"])  # fmt: skip
def test_a_notebook_stop_cancels_the_calls_not_yet_sent(inherited, monkeypatch) -> None:
    """The stop button while two calls run on threads (two more queued for them): those two
    finish and are written, the queued ones are cancelled, no other call starts, and the
    interrupt is raised in the notebook's thread, whatever SIGINT disposition the process
    inherited."""
    started: list[int] = []
    lock = threading.Lock()
    two_running, gate = threading.Event(), threading.Event()
    writes: list[list[str]] = []

    class Writer:
        def write_many(self, records: list[str]) -> None:
            writes.append(list(records))

    def call(i: int) -> str:
        with lock:
            started.append(i)
            if len(started) == 2:
                two_running.set()
        if i < 2:  # the first two are held until the stop has cancelled the queued ones
            assert gate.wait(120)  # a bound only
        return f"done {i}"

    async def notebook_cell() -> list[str]:
        return run_sync(execute(list(range(40)), call, lambda i, why: f"failed {i}", Writer(),
                                concurrency=2, threads=True, desc="t", progress=False))  # fmt: skip

    import cafe.execution as ex

    cancelled: list[object] = []

    def on_done(fut) -> None:  # noqa: ANN001
        with lock:
            if fut.cancelled():
                cancelled.append(fut)
            if len(cancelled) == 2:
                gate.set()

    class Pool(ex.ThreadPoolExecutor):  # the stop cancelling the two queued calls opens the gate
        def submit(self, *a, **kw):  # noqa: ANN002,ANN003,ANN202
            fut = super().submit(*a, **kw)
            fut.add_done_callback(on_done)
            return fut

    monkeypatch.setattr(ex, "ThreadPoolExecutor", Pool)
    try:
        stop_a_notebook_cell(notebook_cell(), two_running, inherited)
    finally:
        gate.set()
    assert sorted(started) == [0, 1]  # nothing else began
    assert sorted(r for w in writes for r in w) == ["done 0", "done 1"]


_HOLD = """import os, time
if os.environ.get("CAFE_TEST_HOLD_WRITES"):
    from cafe import store
    _real = store.JsonlWriter.write_many
    def _held(self, records):
        records = list(records)
        if self.path.name == "predictions.jsonl" and records:  # the first batch's lines
            open(os.environ["CAFE_TEST_HOLD_WRITES"], "w").close()
            while True:
                time.sleep(1)
        _real(self, records)
    store.JsonlWriter.write_many = _held
"""


def _cached(path: Path) -> int:
    """Replies a cache file holds (0 before it exists)."""
    import sqlite3

    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM calls").fetchone()[0]


def test_a_killed_run_counts_the_calls_it_paid_for_once_the_same_command_finishes(tmp_path):
    """SIGKILL after the server answered (and the cache kept the replies) but before their
    records were written: the same command replays them from the cache as this folder's own
    calls, so its counters (calls, tokens) equal what the server answered, not fewer."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_HOLD)
    held = tmp_path / "held"
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "CAFE_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(site), root])}  # fmt: skip
    out = tmp_path / "run"
    with OpenAILoopback(reply=lambda body: "A") as srv:
        first = subprocess.run(_cmd(srv.url, out)[:-1] + ["--limit", "2", "--no-progress"],
                               env=env, capture_output=True, timeout=300)  # fmt: skip
        assert first.returncode == 0, first.stderr.decode()[-2000:]  # two calls written
        hold = {**env, "CAFE_TEST_HOLD_WRITES": str(held)}  # its writes of predictions hang
        proc = subprocess.Popen(_cmd(srv.url, out), env=hold,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        for _ in range(3000):  # a bound only: the writer says when it hangs
            if held.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert held.exists()
        # the server takes no new request (none counted) while those it took land in the cache:
        # the kill then loses no reply in flight, whatever the machine's load
        srv.dead = True
        for _ in range(3000):  # a bound only
            if _cached(tmp_path / "cache" / "calls.sqlite") >= srv.count:
                break
            time.sleep(0.1)
        proc.kill()
        proc.wait()
        srv.dead = False
        paid = srv.count
        assert paid > 2  # calls answered whose records the kill lost
        again = subprocess.run(_cmd(srv.url, out), env=env, capture_output=True, timeout=300)
        assert again.returncode == 0, again.stderr.decode()[-2000:]
        total = json.loads((out / "manifest.json").read_text())["counters"]["total"]
        assert total["calls"] == srv.count == N
        assert total["completion_tokens"] == N and total["cache_hits"] == 0


def test_the_temporary_files_a_killed_writer_left_are_removed_by_the_next_run(tmp_path):
    """A SIGKILL between a temporary file and its rename leaves `.NAME.XXXX.tmp` behind: the
    next run of the folder, as its one writer, removes them."""
    from click.testing import CliRunner

    from cafe.cli import main

    out = tmp_path / "run"
    args = ["run", "--limit", "2", "--judge", "none", "--no-progress", "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    left = [out / ".manifest.json.k1a2.tmp", out / ".metrics.json.zz.tmp"]
    for p in left:
        p.write_text("{half")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert not any(p.exists() for p in left)
