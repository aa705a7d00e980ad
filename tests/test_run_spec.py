"""One run, one identity (issue 9): the run spec is compared whole when a folder is resumed, a
smaller selection never rewrites a finished folder, adapter options cannot collide with the
run's own, and the default folder tells served models apart."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, ToneBench, register, write_tone_bench

from cafe.benchmarks.base import BENCHMARKS
from cafe.runner import RunError, RunSpec
from cafe.runner.cli import run_command
from cafe.runner.main import run_with

register()
if "tone-b" not in BENCHMARKS.names():
    BENCHMARKS.add("tone-b", ToneBench)  # the same loader under another name

QUIET = dict(progress=False, cache=False, judge="none")


def _calls(log: Path) -> int:
    return sum(int(x) for x in log.read_text().split()) if log.exists() else 0


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_tone_bench(tmp_path / "bench", [HIGH, LOW, HIGH, LOW])


def _cards(tmp_path: Path, adapter: str = "tone") -> str:
    cards = tmp_path / "cards.yaml"
    cards.write_text(
        f"tone-a:\n  adapter: {adapter}\n  prompt_style: mpar2\n"
        f"tone-b:\n  adapter: {adapter}\n  prompt_style: mpar2\n"
    )
    return str(cards)


def _change(field: str, tmp_path: Path, bench: Path) -> tuple[dict, dict, Any, Any]:
    """Two run_with() keyword sets that differ in exactly ``field`` of the spec, and its two values
    as the message must show them."""
    base: dict[str, Any] = dict(data=str(bench))
    if field == "model":
        cards = _cards(tmp_path)
        return ({**base, "model": "tone-a", "cards": [cards]},
                {**base, "model": "tone-b", "cards": [cards]}, "tone-a", "tone-b")  # fmt: skip
    if field == "adapter":
        from runner_helpers import ToneAdapter

        from cafe.adapters.base import ADAPTERS

        if "tone-twin" not in ADAPTERS.names():
            ADAPTERS.add("tone-twin", type("ToneTwin", (ToneAdapter,), {}))
        first = tmp_path / "c1.yaml"
        second = tmp_path / "c2.yaml"
        first.write_text("tone-a:\n  adapter: tone\n  prompt_style: mpar2\n")
        second.write_text("tone-a:\n  adapter: tone-twin\n  prompt_style: mpar2\n")
        one = {**base, "model": "tone-a", "cards": [str(first)]}
        return one, {**one, "cards": [str(second)]}, "tone", "tone-twin"
    if field == "adapter_options":
        return ({**base, "options": {"model": "served-a"}},
                {**base, "options": {"model": "served-b"}}, "served-a", "served-b")  # fmt: skip
    if field == "checkpoint":
        a, b = str(tmp_path / "no-ckpt-a"), str(tmp_path / "no-ckpt-b")
        return {**base, "checkpoint": a}, {**base, "checkpoint": b}, a, b
    if field == "fingerprint":
        ckpt = tmp_path / "ckpt"
        ckpt.mkdir()
        (ckpt / "weights.bin").write_bytes(b"\0" * 10)
        from cafe.manifest import checkpoint_fingerprint

        before = checkpoint_fingerprint(ckpt)

        def retrain() -> None:
            (ckpt / "weights.bin").write_bytes(b"\1" * 10)

        kw = {**base, "checkpoint": str(ckpt)}
        return kw, {**kw, "_before": retrain}, before, None  # the new value: after retraining
    if field == "bench":
        return {**base}, {**base, "bench": "tone-b"}, "tone", "tone-b"
    if field == "version":
        return {**base, "version": "v1"}, {**base, "version": "v2"}, "v1", "v2"
    if field == "data_sha256":
        moved = bench.parent / "meta2.jsonl"  # the tone loader's sha is "sha-<file name>"
        moved.write_text(bench.read_text())
        return base, {**base, "data": str(moved)}, "sha-meta.jsonl", "sha-meta2.jsonl"
    if field == "seed":
        return {**base, "seed": 0}, {**base, "seed": 3}, 0, 3
    if field == "prompt_style":
        return base, {**base, "prompt_style": "larm"}, "mpar2", "larm"
    if field == "template_hash":
        tpl = tmp_path / "mine.txt"
        tpl.write_text("Q: {question}\n{choices}\n")
        return base, {**base, "prompt_template": str(tpl)}, None, None
    if field == "generation":
        return base, {**base, "max_new_tokens": 7}, None, 7
    if field == "control":  # a listening control is another run (cafe.controls)
        return base, {**base, "control": "text-only"}, None, {"name": "text-only", "seed": 0}
    if field == "permutation":  # a choice ordering is another run (cafe.robustness.orderings)
        perm = {"k": 1, "of": 2, "mode": "rotate", "seed": 0}
        return base, {**base, "permutation": perm}, None, perm
    if field == "ids":  # an --ids selection is another run (cafe.robustness.ids)
        ids = tmp_path / "ids.txt"
        ids.write_text("t0\nt2\n")
        return base, {**base, "ids": str(ids)}, None, None
    raise AssertionError(f"no change written for spec field {field!r}")


IDENTITY = [
    f.name for f in dataclasses.fields(RunSpec) if f.name not in RunSpec.SELECTION
]  # fmt: skip


def test_every_spec_field_is_covered_below() -> None:
    assert set(IDENTITY) | set(RunSpec.SELECTION) == {f.name for f in dataclasses.fields(RunSpec)}
    assert len(IDENTITY) == 15  # 13 + permutation, ids (issue 37)


@pytest.mark.parametrize("field", IDENTITY)
def test_each_identity_field_changed_alone_is_refused_on_resume(
    field: str, bench: Path, tmp_path: Path
) -> None:
    first, second, old, new = _change(field, tmp_path, bench)
    out = tmp_path / "run"
    log = tmp_path / "calls.log"
    model = first.pop("model", "tone")
    run_with(model, first.pop("bench", "tone"), out=out, options={"log": str(log), **first.pop(
        "options", {})}, **QUIET, **first)  # fmt: skip
    calls = _calls(log)
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    second.pop("_before", lambda: None)()
    with pytest.raises(RunError) as err:
        run_with(second.pop("model", "tone"), second.pop("bench", "tone"), out=out,
            options={"log": str(log), **second.pop("options", {})}, **QUIET, **second)  # fmt: skip
    message = str(err.value)
    assert "\n" not in message
    assert message.count(" in the folder, ") == 1, message  # only the changed field
    named = message.split("(", 1)[1]
    assert named.startswith(f"{field}") or named.startswith(f"{field}."), message
    if old is not None:
        assert repr(old) in message
    if new is not None:
        assert repr(new) in message
    assert "--out NEW_FOLDER" in message
    assert _calls(log) == calls  # refused before any model call …
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files  # … and nothing rewritten


def test_unchanged_spec_resumes_with_no_call(bench: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    kw = dict(data=str(bench), out=tmp_path / "r", options={"log": str(log)}, **QUIET)
    first = run_with("tone", "tone", **kw)
    assert _calls(log) == 4
    again = run_with("tone", "tone", **kw)
    assert _calls(log) == 4 and again.new_predictions == 0 and not again.model_loaded
    assert again.metrics["accuracy"] == first.metrics["accuracy"]


def test_manifest_holds_the_spec_and_it_reads_back(bench: Path, tmp_path: Path) -> None:
    options = {"model": "m", "api_key": "sk-secret", "concurrency": 3}
    res = run_with("tone", "tone", data=str(bench), out=tmp_path / "r", seed=4, runs=2,
              options=options, **QUIET)  # fmt: skip
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    spec = RunSpec.from_dict(manifest["spec"])
    assert spec.to_dict() == manifest["spec"]
    assert spec.adapter_options == {"model": "m"}  # no secret, no execution option
    assert "sk-secret" not in (tmp_path / "r" / "manifest.json").read_text()
    assert (spec.bench, spec.version, spec.data_sha256) == ("tone", "v1", "sha-meta.jsonl")
    assert (spec.runs, spec.seed, spec.seeds, spec.limit) == (2, 4, [4, 5], None)
    assert spec.prompt_style == "mpar2" and len(spec.template_hash) == 64
    assert manifest["cafe"]["format"] == 2 and res.manifest["spec"] == manifest["spec"]
    assert hash(spec) == hash(RunSpec.from_dict(manifest["spec"]))


# the new user's scenarios ----------------------------------------------------------------------
def _served(body: dict) -> str:
    """A served model that answers with its own name's choice: model-A says high, B low."""
    label = HIGH if body["model"] == "model-A" else LOW
    return f"<answer>{label}</answer>"


def test_served_model_b_after_model_a_is_a_new_run(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cafe.reports.leaderboard import row_from_run
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with OpenAILoopback(reply=_served) as srv:
        args = ["--model", "openai-compatible", "--endpoint", srv.url, "--bench", "tone",
                "--data", str(bench), "--no-progress", "-o", "base_delay=0.01"]  # fmt: skip
        a = CliRunner().invoke(run_command, [*args, "-o", "model=model-A"])
        assert a.exit_code == 0, a.output
        n_a = len(srv.requests)
        b = CliRunner().invoke(run_command, [*args, "-o", "model=model-B"])
        assert b.exit_code == 0, b.output
        n_b = len(srv.requests) - n_a
        # the same --out for B: refused, naming the option and both values
        same = CliRunner().invoke(
            run_command, [*args, "-o", "model=model-B", "--out", "runs/" + _only(tmp_path, "A")]
        )
    assert n_a == 4 and n_b == 4  # B made its own calls
    assert "4 new predictions (model loaded)" in b.output
    folder_a, folder_b = tmp_path / "runs" / _only(tmp_path, "A"), tmp_path / "runs" / _only(
        tmp_path, "B")  # fmt: skip
    assert folder_a != folder_b
    assert folder_b.name == "openai-compatible-model-B-tone-v1"
    preds_b = [json.loads(x) for x in (folder_b / "predictions.jsonl").read_text().splitlines()]
    assert {p["answer"] for p in preds_b} == {LOW}  # B's answers, not A's
    assert same.exit_code != 0
    assert "adapter_options.model: 'model-A' in the folder, 'model-B' now" in same.output
    assert "--out NEW_FOLDER" in same.output and "Traceback" not in same.output
    row = row_from_run(folder_b)
    assert row.model == "model-B"


def _only(root: Path, which: str) -> str:
    (name,) = [p.name for p in (root / "runs").iterdir() if f"model-{which}" in p.name]
    return name


def test_smaller_limit_after_a_full_run_reads_without_rewriting(
    bench: Path, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    out = tmp_path / "r"
    full = run_with("tone", "tone", data=str(bench), out=out, options={"log": str(log)}, **QUIET)
    assert full.metrics["accuracy"]["total"] == {"correct": 4, "total": 4, "acc": 100.0}
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    part = run_with("tone", "tone", data=str(bench), out=out, limit=2, options={"log": str(log)},
               **QUIET)  # fmt: skip
    assert _calls(log) == 4 and not part.model_loaded and part.new_predictions == 0
    assert part.metrics["accuracy"]["total"] == {"correct": 2, "total": 2, "acc": 100.0}
    assert "without changing the folder" in part.notes[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files  # nothing rewritten
    # fewer runs: the same
    two = tmp_path / "r2"
    run_with("tone", "tone", data=str(bench), out=two, runs=2, **QUIET)
    files = {p.name: p.read_bytes() for p in two.iterdir()}
    one = run_with("tone", "tone", data=str(bench), out=two, runs=1, **QUIET)
    assert one.metrics["accuracy"]["runs"]["n"] == 1
    assert one.metrics["accuracy"]["total"] == {"correct": 4, "total": 4, "acc": 100.0}
    assert {p.name: p.read_bytes() for p in two.iterdir()} == files


def test_smaller_limit_on_an_unfinished_folder_is_refused(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    run_with("tone", "tone", data=str(bench), out=out, **QUIET)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["status"] = "running"  # as a killed run leaves it
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunError, match="holds an unfinished run of all items x 1 run"):
        run_with("tone", "tone", data=str(bench), out=out, limit=2, **QUIET)


def test_smaller_limit_with_more_runs_is_refused(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    run_with("tone", "tone", data=str(bench), out=out, **QUIET)
    with pytest.raises(RunError, match="neither contains the other"):
        run_with("tone", "tone", data=str(bench), out=out, limit=2, runs=2, **QUIET)


@pytest.mark.parametrize("option", ["concurrency=2", "batch_size=4", "seed=1"])
def test_adapter_options_named_like_run_options_do_not_collide(
    option: str, bench: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    args = ["--model", "tone", "--bench", "tone", "--data", str(bench), "--out", str(out),
            "--no-cache", "--no-progress", "--judge", "none"]  # fmt: skip
    result = CliRunner().invoke(run_command, [*args, "-o", option])
    assert result.exit_code == 0, result.output
    assert "4 new predictions" in result.output
    key, value = option.split("=")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["adapter_options"] == {key: int(value)}
    # how calls are made is not part of the identity; a seed the adapter takes is
    assert manifest["spec"]["adapter_options"] == ({} if key != "seed" else {"seed": 1})
    again = CliRunner().invoke(run_command, [*args, "-o", option, "--concurrency", "3"])
    assert again.exit_code == 0 and "0 new predictions" in again.output


def test_quiet_still_works_as_an_alias_of_no_progress(bench: Path, tmp_path: Path) -> None:
    args = ["--model", "tone", "--bench", "tone", "--data", str(bench), "--no-cache"]
    result = CliRunner().invoke(run_command, [*args, "--out", str(tmp_path / "r"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "--quiet" not in CliRunner().invoke(run_command, ["--help"]).output


def test_default_folder_names(bench: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    plain = run_with("tone", "tone", data=str(bench), **QUIET)
    assert plain.run_dir == Path("runs") / "tone-tone-v1"
    other = run_with("tone", "tone", data=str(bench), seed=2, **QUIET)
    assert other.run_dir.name.startswith("tone-tone-v1-") and other.run_dir != plain.run_dir
    synth = run_with("reference", "synth", version="n4-seed0", **QUIET)
    assert "synth-synth" not in synth.run_dir.name
    assert synth.run_dir.name.startswith("reference-synth-v")


def test_older_run_folder_says_so(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    run_with("tone", "tone", data=str(bench), out=out, **QUIET)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["spec"]
    manifest["cafe"] = {"format": 1}
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunError, match="written by an older cafe .run folder format 1"):
        run_with("tone", "tone", data=str(bench), out=out, **QUIET)


def test_subset_of_a_finished_folder_with_a_model_failure_reads_it_as_failed(
    tmp_path: Path,
) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH])
    rows = [json.loads(x) for x in meta.read_text().splitlines()]
    rows[1]["id"] = "fail-me"  # the tone adapter fails it every time
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, log = tmp_path / "r", tmp_path / "calls.log"
    run_with("tone", "tone", data=str(meta), out=out, options={"log": str(log)}, **QUIET)
    calls = _calls(log)
    part = run_with("tone", "tone", data=str(meta), out=out, limit=2, options={"log": str(log)},
               **QUIET)  # fmt: skip
    assert _calls(log) == calls  # read, not retried: the full command retries failures
    acc = part.metrics["accuracy"]
    assert acc["total"] == {"correct": 1, "total": 2, "acc": 50.0} and acc["failed"] == 1
