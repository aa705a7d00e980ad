"""The newcomer's path, round two (issue 46): click errors that give the one-word form of an
option's value, and a run whose clips are missing says so once with where to get them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.cli import main
from cafe.runner.main import run_with

register()


@pytest.mark.parametrize(
    "argv,hint",
    [
        (["run", "--model", "random", "-o", "temperature", "0.7"],
         "-o takes KEY=VALUE as one word: -o temperature=0.7"),
        (["run", "--controls", "silence", "text-only"],
         "--controls takes a comma-separated list as one word: --controls silence,text-only"),
        (["sweep", "--budgets", "0", "8", "64"],
         "--budgets takes a comma-separated list as one word: --budgets 0,8,64"),
    ],
)  # fmt: skip
def test_a_value_written_as_two_words_gets_its_one_word_form(argv, hint) -> None:
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2 and hint in res.output, res.output


def test_a_real_extra_argument_keeps_clicks_own_error() -> None:
    res = CliRunner().invoke(main, ["bench", "list", "stray"])
    assert res.exit_code == 2 and "unexpected extra argument (stray)" in res.output
    assert "one word" not in res.output


@pytest.mark.parametrize("model", ["random", "tone"])
def test_missing_clips_are_said_once_with_where_to_get_them(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 3)
    run_with(model, "tone", data=str(meta), out=tmp_path / "whole", progress=False, judge="none")
    assert "clips are missing" not in capsys.readouterr().err  # every clip there: no line
    for i in (0, 1, 4):
        (tmp_path / "b" / f"t{i}.wav").unlink()
    run_with(model, "tone", data=str(meta), out=tmp_path / "r", progress=False, judge="none")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "clips are missing" in ln]
    assert len(lines) == 1, lines
    assert "3 of 6 tone clips are missing" in lines[0] and "t0.wav" in lines[0]
    assert "docs/benchmarks.md" in lines[0]
    assert ("reads no audio" in lines[0]) == (model == "random")
