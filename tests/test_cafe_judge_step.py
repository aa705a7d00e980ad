"""`cafe judge` on the step engine keeps what the code before the move made: the call cache's
keys (a cache filled by an earlier release still hits), the files of the run folder, and the
"cafe" and "decay" sections byte for byte (the wall time and the loopback's port aside)."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3

from cafe.steps.cafe_judge import judge_run
from cafe.testing.loopback import OpenAILoopback
from tests.test_judge_llm import build_run, scripted

# made by the code before the move (main at 7e5a9fa): q-a, q-b 1 call, q-c 2, q-d 3
PINNED_KEYS = ["1baa7268af65c370", "449e48f7a0c3d3cb", "565e9f0bf8ac5fd4", "68fe3e0dc9f0c056",
               "8a2d9dc04564ef3e", "cee77b46b11c782e", "fd442b90ac298ef2"]  # fmt: skip
PINNED_FILES = ["judgements.jsonl", "judgements.openai-compatible-judge-m.jsonl",
                "judgements.openai-compatible-judge-m.spec.json", "manifest.json",
                "metrics.json", "predictions.jsonl", "samples.jsonl"]  # fmt: skip
# sha256 of the sections (sorted keys; judge_wall_s dropped, the port written as PORT); re-pinned
# once when the input stamp stopped hashing a prediction's counters share ("call"): the
# sections without their stamps hash alike before and after that change
PINNED_SECTIONS = "991ac7ea658c9dff220e7ae97e773c19df7fbfb3c44bdf24b1287fe453b55481"


def sections_digest(metrics: dict) -> str:
    secs = {k: metrics[k] for k in ("cafe", "decay")}
    secs["cafe"]["calls"].pop("judge_wall_s")
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", json.dumps(secs, sort_keys=True))
    return hashlib.sha256(text.encode()).hexdigest()


def test_cache_keys_files_and_sections_are_those_of_earlier_releases(tmp_path):
    store = build_run(tmp_path / "run")
    cache = tmp_path / "c.sqlite"
    with OpenAILoopback(reply=scripted()) as srv:
        sec = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                        progress=False, cache=cache)  # fmt: skip
        assert len(srv.requests) == 7 and sec["calls"]["sent"] == 7
        with sqlite3.connect(cache) as db:
            keys = sorted(k[:16] for (k,) in db.execute("SELECT key FROM calls"))
        assert keys == PINNED_KEYS
        files = sorted(p.name for p in store.root.iterdir() if not p.name.startswith("."))
        assert files == PINNED_FILES
        metrics = json.loads(store.path("metrics.json").read_text())
        assert sorted(metrics) == ["cafe", "decay"]
        assert sections_digest(metrics) == PINNED_SECTIONS
        # from scratch again: every reply from the cache, no request, the same figures
        for p in store.root.glob("judgements*"):
            p.unlink()
        again = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                          progress=False, cache=cache)  # fmt: skip
        assert len(srv.requests) == 7 and again["calls"]["sent"] == 0
        assert again["calls"]["cache_hits"] == 7
        assert again["acc_per"] == sec["acc_per"] and again["judgements"] == sec["judgements"]


def test_a_judge_with_nothing_usable_raises_nothing_usable_now_and_on_a_rerun(tmp_path):
    """Every reply no judgement: NothingUsable (the engine's), nothing written beyond the
    judge's own file; the same command again (all kept, none usable) says so again."""
    import pytest

    from cafe.folder.status import NothingUsable

    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=lambda body: "I would rather not say.") as srv:
        for _ in range(2):
            with pytest.raises(NothingUsable, match=r"produced nothing usable: none of 4 "):
                judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                          progress=False, cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 4 * 3  # 3 attempts each, the rerun replays nothing
    assert not store.path("metrics.json").exists() and not store.path("judgements.jsonl").exists()


def test_the_dry_run_sends_nothing_and_writes_nothing(tmp_path):
    store = build_run(tmp_path / "run")
    before = sorted(p.name for p in store.root.iterdir())
    with OpenAILoopback(reply=scripted()) as srv:
        rep = judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4,
                        progress=False, cache=tmp_path / "c.sqlite", dry_run=True)  # fmt: skip
        assert srv.requests == []
    assert sorted(p.name for p in store.root.iterdir()) == before  # no lock, no spec, no file
    # 4 outputs and the failed run planned; 4 first calls counted (the failed run makes none)
    assert (rep["items_to_judge"], rep["already_judged"], rep["calls"]) == (5, 0, 4)


OWN = "judgements.openai-compatible-judge-m.jsonl"


def _judge(store, srv, cache, **kw):
    return judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 4, progress=False,
                     cache=cache, **kw)  # fmt: skip


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_prediction_whose_sample_is_gone_is_a_failed_judgement_made_without_a_call(tmp_path):
    """The step's plan settles it with the judge's failed record (no call), written with the
    rest and named in the section's reasons; the next invocation makes it again, no call."""
    from cafe.records import Prediction

    store = build_run(tmp_path / "run")
    with store.writer("predictions.jsonl") as w:
        w.write_many([Prediction("q-gone", 0, "m", "lalm", "h", "yes. Reasoning: q-gone")])
    why = "samples.jsonl: sample q-gone not found"
    with OpenAILoopback(reply=scripted()) as srv:
        sec = _judge(store, srv, tmp_path / "c.sqlite")
        assert len(srv.requests) == 7  # the four outputs' calls only
        gone = [r for r in _rows(store.path(OWN)) if r["sample_id"] == "q-gone"]
        assert [(r["status"], r["reason"], r["call"]) for r in gone] == [("failed", why, {})]
        assert f"{OWN}: sample q-gone: {why}" in "\n".join(sec["failed_reasons"])
        assert sec["judgements"]["failed"] == 2 and sec["calls"]["judged_now"] == 5
        again = _judge(store, srv, tmp_path / "c.sqlite")
        assert len(srv.requests) == 7  # made again (a failed record is retried), no call
        assert f"{OWN}: sample q-gone: {why}" in "\n".join(again["failed_reasons"])
        assert again["calls"]["judged_now"] == 1  # the failed prediction's; q-gone's is planned
    mirror = {r["sample_id"] for r in _rows(store.path("judgements.jsonl"))}
    assert "q-gone" in mirror


def test_a_folder_from_before_judge_specs_keeps_the_same_judges_judgements(tmp_path, capsys):
    """No spec beside the judgements (written before judge specs): those of this judge's
    identity and template are kept, another template's are judged again; a stored spec is
    read as a JudgeSpec (a field left at its default keeps everything); another spec's
    judgements are all judged again, with a note."""
    store, cache = build_run(tmp_path / "run"), tmp_path / "c.sqlite"
    spec = store.path(OWN.removesuffix(".jsonl") + ".spec.json")
    with OpenAILoopback(reply=scripted()) as srv:
        first = _judge(store, srv, cache)
        spec.unlink()
        rows = _rows(store.path(OWN))
        rows[[r["sample_id"] for r in rows].index("q-b")]["template_hash"] = "another"
        store.path(OWN).write_text("".join(json.dumps(r) + "\n" for r in rows))
        legacy = _judge(store, srv, cache)
        assert len(srv.requests) == 7  # q-b replayed from the cache
        # judged now: q-b (another template) and the failed prediction (retried)
        assert (legacy["calls"]["judged_now"], legacy["calls"]["cache_hits"]) == (2, 1)
        assert legacy["judgements"] == first["judgements"] and spec.exists()
        hashes = {r["template_hash"] for r in _rows(store.path(OWN))}
        assert hashes == {first["template_hash"]}
        stored = json.loads(spec.read_text())
        spec.write_text(json.dumps({k: v for k, v in stored.items() if k != "trim"}))
        assert _judge(store, srv, cache)["calls"]["judged_now"] == 1  # the failed one only
        capsys.readouterr()
        _judge(store, srv, cache, template=None, thinking=True)
        assert "was made under another judge spec (thinking: False then, True now" in (
            capsys.readouterr().err
        )
