"""`cafe run`'s batches go through the one executor (cafe.execution.execute with ``threads``):
each batch written whole as it finishes, the records returned in the items' order, a batch
that raises its items' failed records, a stop that keeps what the running threads return and
never starts a queued batch, and a run started where an event loop already runs (a notebook).
Every ordering here is forced with events, never with the clock."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.execution import execute, run_sync

register()


class _Writer:
    def __init__(self) -> None:
        self.writes: list[list[str]] = []

    def write_many(self, records: list[str]) -> None:
        self.writes.append(list(records))


def _run(items, work, writer, **kw):
    return run_sync(execute(items, work, lambda i, why: f"failed {i}: {why}", writer,
                            threads=True, desc="t", progress=False, **kw))  # fmt: skip


def test_batches_are_written_whole_and_returned_in_the_items_order() -> None:
    """Batch 0 is held until batch 1 has been written: the writes come in finishing order,
    each a whole batch; the result is in the items' order. A batch whose call raises is its
    items' failed records."""
    first_may_end = threading.Event()
    writer = _Writer()

    def work(batch: list[int]) -> list[str]:
        if batch[0] == 0:
            assert first_may_end.wait(30)
        if batch[0] == 4:
            raise ValueError("bad batch")
        return [f"r{i}" for i in batch]

    class Releasing(_Writer):
        def write_many(self, records):
            super().write_many(records)
            if records == ["r2", "r3"]:
                first_may_end.set()

    writer = Releasing()
    out = _run(list(range(5)), work, writer, batch_size=2, concurrency=2, flush_every=1)
    assert out == ["r0", "r1", "r2", "r3", "failed 4: ValueError: bad batch"]
    assert writer.writes[0] == ["r2", "r3"]  # the batch that finished first, whole
    assert sorted(map(tuple, writer.writes)) == [("failed 4: ValueError: bad batch",),
                                                 ("r0", "r1"), ("r2", "r3")]  # fmt: skip


def test_a_stop_starts_nothing_beyond_the_queue_and_keeps_what_ran() -> None:
    """One thread, one batch queued behind the running one: the running batch stops the
    command (a --strict stop). No later batch ever starts; the queued one may have begun on
    the freed thread before the stop was seen, and then its records are written (paid for)."""

    class Stop(Exception):
        pass

    ran: list[int] = []
    writer = _Writer()

    def work(batch: list[int]) -> list[str]:
        ran.append(batch[0])
        if batch[0] == 0:
            raise Stop("strict")
        return [f"r{i}" for i in batch]

    with pytest.raises(Stop):
        _run(list(range(8)), work, writer, batch_size=1, concurrency=1, fatal=(Stop,))
    assert ran[0] == 0 and set(ran) <= {0, 1}
    assert writer.writes == ([["r1"]] if 1 in ran else [])


def test_a_writer_that_stops_the_run_still_gets_the_running_batches(tmp_path: Path) -> None:
    """The runner's commit raises (a dead server's batch) while another batch runs: that
    batch's records are handed to the writer too, the stop propagates."""

    class Gone(Exception):
        pass

    other_running, stop_written = threading.Event(), threading.Event()

    def work(batch: list[int]) -> list[str]:
        if batch[0] == 1:
            other_running.set()
            assert stop_written.wait(30)
        elif batch[0] == 0:
            assert other_running.wait(30)
        return [f"r{i}" for i in batch]

    class Committing(_Writer):
        def write_many(self, records):
            super().write_many(records)
            if records == ["r0"]:
                stop_written.set()
                raise Gone("the server went away")

    writer = Committing()
    with pytest.raises(Gone):
        _run([0, 1, 2, 3], work, writer, batch_size=1, concurrency=2, flush_every=1)
    assert writer.writes[:2] == [["r0"], ["r1"]]


def test_cafe_run_works_where_an_event_loop_already_runs(tmp_path: Path) -> None:
    """A notebook runs an event loop in its thread: asyncio.run there raises; the executor
    then runs on a helper thread, and the run completes with its metrics."""
    from cafe.runner.main import run_with

    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])

    async def notebook_cell():
        return run_with("tone", "tone", data=str(meta), out=tmp_path / "r", progress=False,
                        judge="none", cache=False, batch_size=1)  # fmt: skip

    res = asyncio.run(notebook_cell())
    assert res.new_predictions == 4 and res.metrics["accuracy"]["total"] == {
        "correct": 4,
        "total": 4,
        "acc": 100.0,
    }


def test_a_step_on_the_engine_works_where_an_event_loop_already_runs(tmp_path, monkeypatch):
    """The same for the engine: synth's default judge (the CAFE rule judge, a step making its
    calls through the executor) runs after the run, inside a notebook's loop."""
    from cafe.runner.main import run_with

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))

    async def notebook_cell():
        return run_with("reference", "synth", version="n10-seed0", out=tmp_path / "r",
                        progress=False, cache=False)  # fmt: skip

    res = asyncio.run(notebook_cell())
    assert not res.judge_failed and res.notes == []
    assert res.metrics["cafe"]["calls"]["judged_now"] == 10


def test_a_real_ctrl_c_stops_the_run_on_the_executors_loop(tmp_path: Path) -> None:
    """SIGINT to a `cafe run` process: asyncio's handler cancels the executor, the running
    batches end, the run says what was saved (exit 130), the manifest says interrupted and its
    counters cover exactly the lines on disk; the same command then finishes the rest."""
    import json
    import signal
    import subprocess
    import time

    from runner_helpers import CLI, subprocess_env, write_dist

    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 10)
    env = subprocess_env(write_dist(tmp_path / "site"), tmp_path / "cache")
    out = tmp_path / "r"
    cmd = [*CLI, "run", "--model", "tone", "--bench", "tone", "--data", str(meta), "--out",
           str(out), "--batch-size", "2", "--concurrency", "2", "--no-cache", "--judge", "none",
           "--no-progress"]  # fmt: skip
    proc = subprocess.Popen([*cmd, "-o", "delay=0.5"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    preds = out / "predictions.jsonl"
    deadline = time.monotonic() + 120  # a safety net only: nothing is asserted on time
    while not (preds.exists() and len(preds.read_text().splitlines()) >= 4):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = preds.read_text().splitlines()
    assert proc.returncode == 130 and 4 <= len(lines) < 20
    assert f"interrupted: {len(lines)} of 20 predictions saved in {out}" in err.decode()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert sum(manifest["counters"]["total"]["replies"].values()) == len(lines)
    again = subprocess.run([*cmd, "-o", "delay=0.5"], env=env, capture_output=True)
    assert again.returncode == 0, again.stderr.decode()
    assert len(preds.read_text().splitlines()) == 20


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_an_interrupt_in_a_notebook_cancels_the_work_on_the_helper_loop(inherited) -> None:
    """A notebook's stop button raises KeyboardInterrupt in its thread while run_sync waits on
    the helper's loop: the work there is cancelled (not left running to its end), then the
    interrupt is raised. The notebook's loop is a plain one (no asyncio SIGINT handler), as
    Jupyter's is; the process may have inherited SIGINT as ignored (a background job)."""
    import signal

    from runner_helpers import stop_a_notebook_cell

    began, cancelled = threading.Event(), threading.Event()

    async def work() -> str:
        began.set()
        try:
            await asyncio.sleep(120)  # a bound only: the cancel ends it at once
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "ran to its end"

    async def notebook_cell() -> str:
        return run_sync(work())

    how = {"default": signal.default_int_handler, "ignored": signal.SIG_IGN}[inherited]
    stop_a_notebook_cell(notebook_cell(), began, how)
    assert cancelled.is_set()


def test_a_fault_in_cafes_own_code_fails_that_batch_named_and_the_run_goes_on(
    tmp_path: Path, monkeypatch
) -> None:
    """Scoring raises on one item's batch (a cafe bug, injected): that batch's items are
    failed predictions naming the exception and the run's log, its traceback is in run.log
    once, and the other batches are scored."""
    import json

    import cafe.runner.main as runner_main
    from cafe.runner.main import run_with

    real = runner_main.score_completion

    def score(sample, *args, **kw):
        if sample.id == "t1":
            raise RuntimeError("scoring bug")
        return real(sample, *args, **kw)

    monkeypatch.setattr(runner_main, "score_completion", score)
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    res = run_with("tone", "tone", data=str(meta), out=tmp_path / "r", progress=False,
                   judge="none", cache=False, batch_size=1)  # fmt: skip
    preds = {json.loads(x)["sample_id"]: json.loads(x)
             for x in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()}  # fmt: skip
    log = tmp_path / "r" / "run.log"
    assert len(preds) == 4 and res.status == "partial"
    assert preds["t1"]["parse_status"] == "failed"
    assert preds["t1"]["error"] == f"internal error: RuntimeError: scoring bug (traceback in {log})"
    assert [k for k, p in preds.items() if p["parse_status"] == "failed"] == ["t1"]
    assert log.read_text().count("RuntimeError: scoring bug") == 1
