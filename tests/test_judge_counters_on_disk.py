"""A judge section's counters are the sum of the shares its records on disk carry (issue 29):
a session stopped by a dead judge server or Ctrl-C writes no section, yet the calls it made are
on disk as records, so the section the resume writes counts them; it says what an
uninterrupted run's says."""

from __future__ import annotations

import json

import pytest

from cafe.steps.cafe_judge import judge_run
from cafe.steps.engine import run_step
from cafe.testing.loopback import OpenAILoopback
from tests.test_server_breaker import JUDGE_REPLY, _judge_run
from tests.test_steps import Length, _folder


def _on_disk(path) -> tuple[int, dict[str, int]]:
    """(records, summed shares) of a records file."""
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    total: dict[str, int] = {}
    for r in rows:
        for k, v in r["call"].items():
            total[k] = total.get(k, 0) + v
    return len(rows), total


def test_a_judge_stopped_by_a_dead_server_counts_its_records_on_the_resume(tmp_path):
    from cafe.clients.breaker import ServerUnreachable

    n, answered = 10, 6
    stopped, whole = _judge_run(tmp_path / "stopped", n), _judge_run(tmp_path / "whole", n)
    faults = lambda i, body: "die" if i >= answered else None  # noqa: E731
    with OpenAILoopback(reply=lambda b: JUDGE_REPLY, faults=faults) as srv:
        with pytest.raises(ServerUnreachable):  # one at a time: exactly `answered` kept
            judge_run(stopped.root, "openai-compatible", "j", [srv.url], 1, progress=False,
                      cache=tmp_path / "a.sqlite")  # fmt: skip
    (records,) = stopped.root.glob("judgements.*.jsonl")
    assert _on_disk(records) == (answered, {"calls": answered})  # on disk, no section
    assert "cafe" not in stopped.read_metrics()
    with OpenAILoopback(reply=lambda b: JUDGE_REPLY) as srv:
        resumed = judge_run(stopped.root, "openai-compatible", "j", [srv.url], 1,
                            progress=False, cache=tmp_path / "a.sqlite")  # fmt: skip
        assert srv.count == n - answered
    with OpenAILoopback(reply=lambda b: JUDGE_REPLY) as srv:
        once = judge_run(whole.root, "openai-compatible", "j", [srv.url], 1, progress=False,
                         cache=tmp_path / "b.sqlite")  # fmt: skip
    c = resumed["counters"]
    assert c["this_invocation"]["calls"] == n - answered  # what the resume itself sent
    assert c["total"]["calls"] == n and c["total"]["cache_hits"] == 0  # both sessions' calls
    assert c["total"]["judged"] == n and c["total"]["replies"]["ok"] == n
    assert _on_disk(records) == (n, {"calls": n})  # counters == records on disk
    assert c["total"] == once["counters"]["total"]  # as if it had never stopped


def test_a_step_interrupted_by_ctrl_c_counts_its_records_and_its_cache_hits(tmp_path, monkeypatch):
    from cafe.store import JsonlWriter

    store, cache = _folder(tmp_path / "r", {"a": "x", "b": "yy", "c": "zzz"}), tmp_path / "c.db"
    monkeypatch.setattr("cafe.execution.FLUSH_EVERY", 1)  # each record durable as it comes
    real, writes = JsonlWriter.write_many, []

    def write_many(self, records):  # Ctrl-C as the third record is written
        records = list(records)
        if self.path.name == "length.jsonl" and records:
            writes.append(records)
            if len(writes) == 3:
                raise KeyboardInterrupt
        return real(self, records)

    monkeypatch.setattr(JsonlWriter, "write_many", write_many)
    Length.calls = []
    with pytest.raises(KeyboardInterrupt):
        run_step(Length(), store.root, cache=cache, concurrency=1)
    monkeypatch.setattr(JsonlWriter, "write_many", real)
    path = store.path("length.jsonl")
    assert Length.calls == ["a", "b", "c"]  # c was answered (and cached), not written
    assert _on_disk(path) == (2, {"calls": 2})
    res = run_step(Length(), store.root, cache=cache, concurrency=1)
    c = res.section["counters"]
    assert res.section["total"] == 6 and Length.calls == ["a", "b", "c"]  # c: from the cache
    assert c["total"] == {"calls": 2, "cache_hits": 1, "done": 3, "records": {"ok": 3}}
    assert c["this_invocation"]["calls"] == 0 and c["this_invocation"]["cache_hits"] == 1
    assert _on_disk(path) == (3, {"calls": 2, "cache_hits": 1})  # counters == records on disk
    # a kill that lost a line again: the cache replays it, and the counters say so
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[1:]) + "\n")  # a's record (a call) is gone
    again = run_step(Length(), store.root, cache=cache, concurrency=1).section["counters"]
    assert Length.calls == ["a", "b", "c"]
    assert again["total"] == {"calls": 1, "cache_hits": 2, "done": 3, "records": {"ok": 3}}
    assert _on_disk(path) == (3, {"calls": 1, "cache_hits": 2}) and again["invocations"] == 2
