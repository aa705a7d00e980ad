"""README's shell blocks, run as written: every `cafe` line without a `[needs …]` mark (a GPU, a
key, a server, real benchmark data, minutes) runs in order in one fresh working folder and
exits 0, so a README line that breaks fails the suite; every `make` line names a real target.
The lines are read out of README.md: the test holds no list of them."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
NEEDS = re.compile(r"\[needs [^\]]+\]")


def shell_lines() -> list[str]:
    """Each command of README's bash blocks, continuation lines joined."""
    out = []
    for block in BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip())
    return out


def tour(prefix: str) -> list[str]:
    return [line for line in shell_lines() if line.startswith(prefix) and not NEEDS.search(line)]


def test_the_tour_holds_runnable_lines_and_marks_the_rest() -> None:
    lines = [line for line in shell_lines() if line.startswith("cafe ")]
    assert len(tour("cafe ")) >= 8 and len(tour("cafe ")) < len(lines)
    for line in lines:  # what a line needs is said by its mark, never guessed from its words
        argv = shlex.split(line, comments=True)
        if "--endpoint" in argv or "--judge-endpoint" in argv or "/data/" in line:
            assert NEEDS.search(line), f"README line needs a [needs …] mark: {line}"


def test_readme_cafe_lines_run_as_written(tmp_path, monkeypatch) -> None:
    from cafe.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAFE_LEADERBOARD", raising=False)
    runner = CliRunner()
    for line in tour("cafe "):
        argv = shlex.split(line, comments=True)[1:]
        res = runner.invoke(main, argv, catch_exceptions=False)
        assert res.exit_code == 0, f"README: `{line}` exited {res.exit_code}:\n{res.output}"
    assert (tmp_path / "mine.yaml").exists() and (tmp_path / "leaderboard.html").exists()
    assert (tmp_path / "mine.yaml.verified.json").exists()  # `leaderboard verify` kept its check


@pytest.mark.parametrize("line", tour("make "))
def test_readme_make_lines_name_real_targets(line: str, tmp_path) -> None:
    argv = shlex.split(line, comments=True)
    out = subprocess.run(["make", "-n", "-C", str(ROOT), *argv[1:], f"VENV={tmp_path}/v"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, f"README: `{line}`: {out.stderr}"
