"""A run folder has one writer (issue 19): a second writer waits the stated time then refuses in
one line naming the holder; a killed holder's lock is free again; two real `cafe run`s on one
folder leave every (item, run) once and pay no call twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from runner_helpers import CLI, HIGH, LOW, subprocess_env, write_dist, write_tone_bench

from cafe.locking import POLL_S, FolderBusy, folder_lock, holds

HOLDER = textwrap.dedent(
    """
    import sys, time
    from cafe.locking import folder_lock
    with folder_lock(sys.argv[1], "cafe judge"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def _hold_in_child(root: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], env=env,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_a_second_writer_refuses_in_one_line_naming_the_holder(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "run")
    try:
        with pytest.raises(FolderBusy) as err:
            with folder_lock(tmp_path / "run", "cafe run", wait_s=0):
                pass
        message = str(err.value)
        assert "\n" not in message
        assert f"`cafe judge` (PID {child.pid}" in message
        assert "run this again" in message and "CAFE_LOCK_WAIT" in message
    finally:
        child.kill()
        child.wait()


def test_the_wait_is_the_stated_time(tmp_path: Path) -> None:
    """An injected clock: the writer polls until the stated wait is spent, then refuses."""
    child = _hold_in_child(tmp_path / "run")
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    try:
        with pytest.raises(FolderBusy, match=r"waited 2s"):
            with folder_lock(tmp_path / "run", wait_s=2, clock=lambda: now[0], sleep=sleep):
                pass
        assert len(sleeps) == round(2 / POLL_S)
    finally:
        child.kill()
        child.wait()


def test_a_killed_holders_lock_is_taken_over(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "run")
    with pytest.raises(FolderBusy):
        with folder_lock(tmp_path / "run", wait_s=0):
            pass
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with folder_lock(tmp_path / "run", "cafe run", wait_s=0):  # free at once: the kernel let go
        assert holds(tmp_path / "run")
        holder = json.loads((tmp_path / "run" / ".cafe.lock").read_text())
        assert holder["pid"] == os.getpid() and holder["command"] == "cafe run"
    assert not holds(tmp_path / "run")


def test_reentrant_in_one_thread_exclusive_across_threads(tmp_path: Path) -> None:
    caught: list[BaseException] = []

    def other() -> None:
        try:
            with folder_lock(tmp_path / "run", wait_s=0):
                pass
        except FolderBusy as e:
            caught.append(e)

    with folder_lock(tmp_path / "run", "cafe run"):
        with folder_lock(tmp_path / "run", "cafe judge"):  # `cafe run` judging its own folder
            assert holds(tmp_path / "run")
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(caught) == 1 and "another thread of this process" in str(caught[0])
    other()  # released: another thread now gets it
    assert len(caught) == 1


def _keys(path: Path) -> list[tuple[str, int]]:
    return [(d["sample_id"], d["run_index"]) for d in map(json.loads, path.open())]


def test_two_real_runs_on_one_folder_run_each_item_once(tmp_path: Path) -> None:
    """Two terminals, one command, one folder: the second waits for the first and finds
    nothing left; the model (no cache) is called once per (item, run)."""
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 6)
    env = {**subprocess_env(write_dist(tmp_path / "site"), tmp_path / "cache"),
           "CAFE_LOCK_WAIT": "120"}  # fmt: skip
    log = tmp_path / "calls.log"
    out = tmp_path / "run"
    cmd = [*CLI, "run", "--model", "tone", "--bench", "tone", "--data", str(meta), "--out",
           str(out), "--runs", "2", "--batch-size", "1", "--no-cache", "--judge", "none",
           "-o", "delay=0.02", "-o", f"log={log}", "--no-progress"]  # fmt: skip
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]  # fmt: skip
    results = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    keys = _keys(out / "predictions.jsonl")
    assert len(keys) == len(set(keys)) == 24
    assert sum(int(x) for x in log.read_text().split()) == 24  # no call paid twice
    outs = "".join(o for o, _ in results)
    assert "24 new predictions" in outs and "0 new predictions" in outs
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"


def test_two_judges_on_one_folder_pay_each_call_once(tmp_path: Path, monkeypatch) -> None:
    """Two `cafe judge`s at once (threads of one process here: the same lock, the same wait),
    no call cache to hide a second payment: the judge server answers one judging's calls."""
    from test_judge_llm import build_run, scripted

    from cafe.cache import Cache
    from cafe.steps.cafe_judge import judge_run
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_LOCK_WAIT", "60")
    store = build_run(tmp_path / "run")
    errors: list[BaseException] = []
    with OpenAILoopback(reply=scripted(), latency_s=0.01) as srv:

        def judge() -> None:
            try:
                judge_run(store.root, judge="openai-compatible", judge_model="judge-m",
                          endpoints=[srv.url], cache=Cache(None), progress=False,
                          concurrency=4)  # fmt: skip
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=judge) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(srv.requests) == 7  # q-a 1, q-b 1, q-c 2, q-d 3: once, not twice
    lines = store.path("judgements.openai-compatible-judge-m.jsonl").read_text().splitlines()
    keys = [(d["sample_id"], d["run_index"]) for d in map(json.loads, lines)]
    assert len(keys) == len(set(keys)) == 5
