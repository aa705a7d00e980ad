"""One identity, one key (issue 19): every model-call cache key derives from the run spec, every
judge-call key from a JudgeSpec; each identity field changed alone gives a new key, execution
options never do; a judge's spec is stored beside its judgements and compared whole on resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cafe.cache import Cache
from cafe.execution import spec_file
from cafe.judge.spec import JudgeSpec, resume_records
from cafe.records import Judgement, Request
from cafe.runner import RunSpec
from cafe.runner.execute import CachedAdapter
from cafe.runner.main import run_with
from cafe.runner.plan import plan_run
from cafe.runner.spec import RunRequest
from cafe.store import JsonlWriter, latest_records

SPEC = RunSpec(
    model="m", adapter="a", adapter_options={"model": "served", "letters": False},
    checkpoint="ckpt", fingerprint="fp", bench="synth", version="v3", data_sha256="d",
    limit=None, runs=1, seed=0, prompt_style="larm", template_hash="t",
    generation={"max_new_tokens": 8},
)  # fmt: skip
CHANGED: dict[str, Any] = {
    "model": "m2",
    "adapter": "a2",
    "adapter_options": {"model": "served", "letters": True},
    "checkpoint": "ckpt2",
    "fingerprint": "fp2",
    "prompt_style": "mpar2",
    "template_hash": "t2",
    "generation": {"max_new_tokens": 9},
    "seed": 1,
}


def _request(**kw: Any) -> Request:
    base = dict(sample_id="s", run_index=0, messages=[{"role": "user", "content": "q"}],
                audio=[], generation={"max_new_tokens": 8}, seed=0, prompt_style="larm",
                template_hash="t")  # fmt: skip
    return Request(**{**base, **kw})


def _key(spec: RunSpec, request: Request | None = None) -> str:
    return CachedAdapter(None, Cache(None), spec.call_identity()).key(request or _request())


def test_every_call_field_is_changed_below() -> None:
    assert set(CHANGED) == set(RunSpec.CALL_FIELDS)


@pytest.mark.parametrize("field", RunSpec.CALL_FIELDS)
def test_each_call_field_changed_alone_gives_a_new_key(field: str) -> None:
    assert _key(dataclasses.replace(SPEC, **{field: CHANGED[field]})) != _key(SPEC)


def test_the_request_seed_and_run_index_are_in_the_key() -> None:
    base = _key(SPEC)
    assert _key(SPEC, _request(seed=1)) != base
    assert _key(SPEC, _request(run_index=1)) != base


def test_what_selects_items_does_not_split_the_cache() -> None:
    """The selection and the benchmark's data decide which requests are made, not what one
    request returns: a larger --limit replays the calls it shares with the smaller one."""
    other = dataclasses.replace(SPEC, limit=5, runs=3, bench="x", version="v", data_sha256="e")
    assert _key(other) == _key(SPEC)


def test_execution_options_do_not_change_the_key(tmp_path: Path) -> None:
    def identity(options: dict[str, Any]) -> dict[str, Any]:
        plan = plan_run(RunRequest("random", "synth", limit=2, out=tmp_path / "r", options=options))
        return plan.spec.call_identity()

    plain = identity({})
    execution = {"concurrency": 7, "batch_size": 3, "timeout_s": 5, "max_retries": 1,
                 "endpoint": "http://127.0.0.1:1/v1"}  # fmt: skip
    assert identity(execution) == plain
    assert identity({"letters": True}) != plain  # an identity-bearing option does


def test_another_adapter_option_never_reuses_the_cached_outputs(tmp_path, monkeypatch) -> None:
    """The bug: `cafe run --model random ... --out A` then `-o letters=true --out B` with one
    CAFE_CACHE gave B A's 40 text answers (headline 30.00 where a cold cache gives 0.00)."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    kw: dict[str, Any] = dict(limit=40, judge="none", progress=False)
    a = run_with("random", "synth", out=tmp_path / "A", **kw)
    b = run_with("random", "synth", out=tmp_path / "B", options={"letters": True}, **kw)
    assert b.manifest["cache"]["hits"] == 0  # nothing of A's
    outs_a = [json.loads(x)["raw_output"] for x in (a.run_dir / "predictions.jsonl").open()]
    outs_b = [json.loads(x)["raw_output"] for x in (b.run_dir / "predictions.jsonl").open()]
    assert all(o.startswith("<answer>(") for o in outs_b)  # B's own: option letters
    assert not any(o.startswith("<answer>(") for o in outs_a)
    again = run_with("random", "synth", out=tmp_path / "A2", **kw)  # A's configuration: replayed
    assert again.manifest["cache"]["hits"] == 40


# -- the judge spec ----------------------------------------------------------------------------
JUDGE = JudgeSpec(task="cafe-extraction", kind="openai", model="gpt", template_hash="t",
                  endpoint="service", thinking=False, max_tokens=100, temperature=0.0, seed=None,
                  raters=5, trim=1, retries=2)  # fmt: skip
JUDGE_CHANGED: dict[str, Any] = {
    "task": "mmar-rubric",
    "kind": "gemini",
    "model": "gpt-2",
    "template_hash": "t2",
    "endpoint": "named",  # a self-hosted "gpt" is not the service's
    "thinking": True,
    "max_tokens": 200,
    "temperature": 0.5,
    "seed": 3,
    "raters": 3,
    "trim": 0,
    "retries": 1,
}


def test_every_judge_spec_field_is_changed_below() -> None:
    assert set(JUDGE_CHANGED) == {f.name for f in dataclasses.fields(JudgeSpec)}


@pytest.mark.parametrize("field", sorted(JUDGE_CHANGED))
def test_each_judge_field_changes_the_spec_and_each_call_field_the_key(field: str) -> None:
    other = dataclasses.replace(JUDGE, **{field: JUDGE_CHANGED[field]})
    assert other != JUDGE  # judgements made under the one are redone under the other
    same_key = other.call_key(prompt="p", attempt=0) == JUDGE.call_key(prompt="p", attempt=0)
    # raters, trim and retries change what is aggregated, not what rater r's attempt a replies
    assert same_key == (field in JudgeSpec.PROTOCOL)


def test_execution_options_leave_the_judge_spec_alone() -> None:
    from cafe.judge.extraction import LLMJudge
    from cafe.judge.rubric import RubricJudge

    client = object()  # built lazily: no server is reached
    a = LLMJudge("openai-compatible", "m", endpoints=("http://127.0.0.1:1/v1",), client=client,
                 concurrency=4, timeout_s=5)  # fmt: skip
    b = LLMJudge("openai-compatible", "m", endpoints=("http://127.0.0.1:2/v1",), client=client,
                 concurrency=64)  # fmt: skip
    assert a.spec == b.spec  # other servers, other concurrency: the same judge
    assert LLMJudge("openai", "m", client=client).spec.endpoint == "service"
    assert a.spec.endpoint == "named"
    thinking = LLMJudge("openai-compatible", "m", client=client, thinking=True)
    assert thinking.spec.call_key(prompt="p", attempt=0) != a.spec.call_key(prompt="p", attempt=0)
    r1 = RubricJudge("openai", "gpt", (), concurrency=2, client=client)
    r2 = RubricJudge("openai", "gpt", (), concurrency=32, client=client)
    assert r1.spec == r2.spec
    r3 = RubricJudge("openai", "gpt", ("http://127.0.0.1:3/v1",), client=client)
    r4 = RubricJudge("openai", "gpt", ("http://127.0.0.1:4/v1", "http://127.0.0.1:5/v1"),
                     client=client)  # fmt: skip
    assert r3.spec == r4.spec != r1.spec  # named servers: their URLs and number are execution


def _judgement(sid: str, template: str = "t") -> Judgement:
    return Judgement(sample_id=sid, run_index=0, judge="openai:gpt", template_hash=template,
                     raw_reply="{}", status="ok")  # fmt: skip


def _read(path: Path) -> list[Judgement]:
    return latest_records(path, Judgement)


def test_the_judge_spec_is_stored_and_compared_whole_on_resume(tmp_path: Path, capsys) -> None:
    path = tmp_path / "judgements.openai-gpt.jsonl"
    with JsonlWriter(path) as w:
        w.write_many([_judgement("a"), _judgement("b", template="old")])

    def legacy(j: Judgement) -> bool:
        return j.template_hash == "t"

    # a file from before judge specs: the records of the same identity and template are kept
    kept = resume_records(path, JUDGE, _read, legacy)
    assert [j.sample_id for j in kept] == ["a"]
    assert JudgeSpec.from_dict(json.loads(spec_file(path).read_text())) == JUDGE
    # the same spec: every record kept
    assert len(resume_records(path, JUDGE, _read, legacy)) == 2
    # another spec: nothing kept, the file emptied, the new spec stored, the change named
    thinking = dataclasses.replace(JUDGE, thinking=True)
    dry = resume_records(path, thinking, _read, legacy, write=False)
    assert dry == [] and len(_read(path)) == 2  # a dry run writes nothing
    assert resume_records(path, thinking, _read, legacy) == []
    assert _read(path) == []
    assert JudgeSpec.from_dict(json.loads(spec_file(path).read_text())) == thinking
    err = capsys.readouterr().err
    assert "thinking: False then, True now" in err and "2 records are judged again" in err


def test_judge_run_keeps_its_spec_beside_its_judgements(tmp_path: Path) -> None:
    """The rule judge end to end: its spec is written beside judgements.rule-v2.jsonl and in
    the cafe section; another tolerance (another rule hash) re-judges every item once."""
    from cafe.steps.cafe_judge import judge_run

    r = run_with("reference", "synth", limit=4, judge="none", progress=False, cache=False,
            out=tmp_path / "r")  # fmt: skip
    section = judge_run(r.run_dir, judge="rule", progress=False)
    path = r.run_dir / section["judgements_file"]
    stored = json.loads(spec_file(path).read_text())
    assert stored == section["spec"]
    judge_run(r.run_dir, judge="rule", progress=False, tolerance_s=0.01)
    records = _read(path)
    assert len(records) == 4
    assert {j.template_hash for j in records} == {
        json.loads(spec_file(path).read_text())["template_hash"]
    }
    assert json.loads(spec_file(path).read_text())["template_hash"] != stored["template_hash"]
