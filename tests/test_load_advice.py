"""Loading fails fast with advice (issue 21): weights that are neither local nor cached while the
hub is off or unreachable, and an engine that is not installed, fail in one line that says what
to do, before any network wait and before any run folder is made. Counted in connection
attempts, not seconds."""

from __future__ import annotations

import importlib.util
import socket

import pytest
from click.testing import CliRunner

from cafe.cli import main


@pytest.fixture
def connects(monkeypatch, tmp_path):
    """Every outgoing connection attempt (host, port), refused; an empty hub cache."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    seen = []

    def refuse(address, *a, **k):
        seen.append(address)
        raise ConnectionRefusedError("refused (test)")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return seen


def _run(tmp_path, model):
    out = tmp_path / "run"
    args = ["run", "--model", model, "--bench", "synth", "--version", "n4-seed0",
            "--out", str(out), "--no-progress", "--judge", "none"]  # fmt: skip
    return CliRunner().invoke(main, args), out


def test_offline_card_without_local_weights_names_checkpoint_repo_and_offline(
    tmp_path, monkeypatch, connects
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res, out = _run(tmp_path, "qwen2-audio-7b-instruct")
    assert res.exit_code == 1
    for said in ("--checkpoint PATH", "Qwen/Qwen2-Audio-7B-Instruct", "HF_HUB_OFFLINE=1"):
        assert said in res.output
    assert connects == [] and not out.exists()
    assert "Traceback" not in res.output


def test_unreachable_hub_fails_after_one_probe_with_the_same_advice(
    tmp_path, monkeypatch, connects
):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    res, out = _run(tmp_path, "qwen2-audio-7b-instruct")
    assert res.exit_code == 1
    assert "cannot be reached" in res.output and "https://hub.invalid" in res.output
    for said in ("--checkpoint PATH", "Qwen/Qwen2-Audio-7B-Instruct", "HF_HUB_OFFLINE=1"):
        assert said in res.output
    assert connects == [("hub.invalid", 443)]  # one probe, no retries
    assert not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_engine_names_its_extra_before_touching_the_hub(tmp_path, monkeypatch, connects):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    res, out = _run(tmp_path, "qwen2-audio-7b-instruct-vllm")
    assert res.exit_code == 1
    assert 'pip install -e ".[vllm]"' in res.output and "vllm" in res.output
    assert connects == [] and not out.exists()


def test_a_local_checkpoint_is_not_checked_against_the_hub(tmp_path, monkeypatch, connects):
    from cafe.adapters.resolve import check_loadable, resolve_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "ckpt").mkdir()
    check_loadable(resolve_model("qwen2-audio-7b-instruct", str(tmp_path / "ckpt")))
    assert connects == []


def test_ctrl_c_says_what_was_saved_and_how_to_resume(tmp_path, monkeypatch):
    import json

    from cafe.adapters.reference import ReferenceAdapter

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    real = ReferenceAdapter.generate
    calls = []

    def interrupted_third(self, requests):
        calls.append(len(requests))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, requests)

    monkeypatch.setattr(ReferenceAdapter, "generate", interrupted_third)
    out = tmp_path / "run"
    args = ["run", "--bench", "synth", "--version", "n10-seed0", "--out", str(out),
            "--no-progress", "--judge", "none", "--batch-size", "2", "--concurrency", "1",
            "--no-cache"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 130
    # batches finish in order on one thread; which of the finished ones the runner took before
    # the interrupt reached it varies (2 or 4 predictions): the message says the number on disk
    saved = len((out / "predictions.jsonl").read_text().splitlines())
    assert saved in (2, 4)
    assert f"{saved} of 10 predictions saved in {out}" in res.output
    assert "run the same command again to resume" in res.output
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    monkeypatch.setattr(ReferenceAdapter, "generate", real)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and f"{10 - saved} new predictions" in again.output


def test_data_that_is_not_the_benchmark_is_one_error_and_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    readme = tmp_path / "README.md"
    readme.write_text("# a readme\n\nsome text\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--bench", "mmar", "--data", str(readme),
                                    "--out", str(out), "--no-progress"])  # fmt: skip
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "no usable mmar item" in lines[0] and str(readme) in lines[0]
    assert not out.exists()


def test_bench_typo_gets_a_case_insensitive_suggestion_and_no_hidden_option():
    res = CliRunner().invoke(main, ["run", "--bench", "MMAR"])
    assert res.exit_code != 0 and "did you mean mmar" in res.output
    res = CliRunner().invoke(main, ["run", "--limt", "3"])
    assert "--limit" in res.output and "--quiet" not in res.output


def test_missing_cafe_figures_print_as_a_dash_never_none():
    from cafe.metrics.listening import format_listening
    from cafe.reports.summary import summary_table

    text = summary_table({"cafe": {"acc_per": None, "err_per": None, "err_use": None,
                                   "err_omit": 100.0}})  # fmt: skip
    cafe_line = text.splitlines()[-1]
    assert "None" not in cafe_line and "acc_per –" in cafe_line and "err_omit 100.00" in cafe_line
    section = {"chance": 25.0, "controls": {"shuffled": {
        "real_acc": 100.0, "acc": 30.0, "gap": 70.0, "ci95": None, "n": 20,
        "cafe": {"acc_per": 0.0, "err_per": 0.0, "judged": 0}}}}  # fmt: skip
    line = format_listening(section).splitlines()[-1]
    assert "nothing judged" in line and "Acc_per 0.00" not in line


def test_a_load_that_fails_late_removes_the_folder_it_made(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    # a served model with no server named: it fails in the adapter, after the folder was made
    res = CliRunner().invoke(main, ["run", "--model", "openai-compatible", "-o", "model=m",
                                    "--bench", "synth", "--version", "n4-seed0",
                                    "--out", str(out), "--no-progress"])  # fmt: skip
    assert res.exit_code == 1 and "--endpoint URL" in res.output
    assert not out.exists()
