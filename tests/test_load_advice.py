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
