"""The bad-input corpus, round three (issue 30): files outside the folder, a poisoned or
borrowed cache, secrets in names, exports and lists, absurd values. Each kind runs through the
same check as the first two rounds (tests/test_bad_input_corpus.py): one line naming the file,
nothing already on disk lost, the good items processed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bad_input_corpus import (
    _BUILT,
    GOOD,
    Case,
    _bench,
    _check_case,
    _cmd,
    _run_args,
    _run_folder,
    _yaml_file,
)


# -- nothing outside the folder ---------------------------------------------------------------
def _victim(tmp: Path, text: str = "precious\n") -> Path:
    return _yaml_file(tmp, "victim.json", text)


def lock_file_a_link(tmp):
    d = _run_folder(tmp)
    victim = _victim(tmp)
    (d / ".cafe.lock").unlink(missing_ok=True)
    (d / ".cafe.lock").symlink_to(victim)
    return Case(_cmd("run", d), [str(d / ".cafe.lock"), "symbolic link", "remove it"], 1,
                keep=(victim,))  # fmt: skip


def lock_file_a_dangling_link(tmp):
    d = _run_folder(tmp)
    target = tmp / "created-by-cafe.json"
    (d / ".cafe.lock").unlink(missing_ok=True)
    (d / ".cafe.lock").symlink_to(target)

    def check(out: str) -> None:  # a dangling link never creates its target
        assert not target.exists()

    return Case(_cmd("judge", d), [str(d / ".cafe.lock"), "symbolic link"], 1, check=check)


def lock_file_a_fifo(tmp):
    d = _run_folder(tmp)
    (d / ".cafe.lock").unlink(missing_ok=True)
    os.mkfifo(d / ".cafe.lock")
    return Case(_cmd("decay", d), [str(d / ".cafe.lock"), "not a regular file"], 1)


def leaderboard_lock_a_link(tmp):
    d = _run_folder(tmp)
    victim = _victim(tmp)
    board = d.parent / "lb.yaml"
    (d.parent / ".lb.yaml.lock").symlink_to(victim)
    return Case(_cmd("lb-add", d), [str(d.parent / ".lb.yaml.lock"), "symbolic link"], 1,
                keep=(victim,), check=lambda out: _absent(board))  # fmt: skip


def _absent(p: Path) -> None:
    assert not p.exists()


def predictions_a_link_out(tmp):
    d = _run_folder(tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "predictions.jsonl"
    (d / "predictions.jsonl").rename(victim)
    (d / "predictions.jsonl").symlink_to(victim)
    args = [*_cmd("run", d), "--runs", "2"]  # the second run of each item would append
    return Case(args, [str(d / "predictions.jsonl"), "outside the run folder"], 1, keep=(victim,),
                env=_built_cache())  # fmt: skip


def _built_cache() -> dict[str, str]:
    """The cache the shared run folder was built with: its synth clips are where its
    samples.jsonl says, so a resume does not rewrite that file."""
    return {"CAFE_CACHE": str(_BUILT["rf"].parent / "cache")}


def out_is_another_tools_folder(tmp):
    meta = _bench(tmp, GOOD)
    other = tmp / "run"
    other.mkdir()
    mine = (_yaml_file(other, "results.json", '{"acc": 0.9}'),
            _yaml_file(other, "config.yaml", "lr: 0.1\n"))  # fmt: skip

    def check(out: str) -> None:
        assert sorted(p.name for p in other.iterdir()) == ["config.yaml", "results.json"]

    return Case(_run_args(meta, tmp),
                [str(other), "not a cafe run folder", "results.json", "--out"], 1,
                keep=mine, check=check)  # fmt: skip


KINDS: list[Callable[[Path], Case]] = [
    lock_file_a_link, lock_file_a_dangling_link, lock_file_a_fifo, leaderboard_lock_a_link,
    predictions_a_link_out, out_is_another_tools_folder,
]  # fmt: skip


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CAFE_LOCK_WAIT", "0")
    monkeypatch.setattr(
        "cafe.judge.rule.default_vocabulary",
        lambda: {"dog_bark": ["dog barks", "bark"], "bell": ["church bell"], "rain": ["rainfall"]},
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_hostile_input_is_one_line_and_loses_nothing(kind, tmp_path, monkeypatch):
    case = kind(tmp_path)
    try:
        _check_case(case, tmp_path, monkeypatch)
    finally:
        if case.cleanup:
            case.cleanup()
