"""README's shell blocks, run as written: every `cafe` line without a `[needs …]` mark (a GPU, a
key, a server, real benchmark data, minutes) runs in order in one fresh working folder and
exits 0, so a README line that breaks fails the suite; every `make` line names a real target.
The lines are read out of README.md: the test holds no list of them."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
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


def _block_after(heading: str) -> list[str]:
    """The commands of the first bash block under README's ``heading``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = BLOCK.search(text, text.index(heading)).group(1)
    return [ln.strip() for ln in block.replace("\\\n", " ").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]  # fmt: skip


def _new_shell_env(venv_bin: str) -> dict[str, str]:
    """A login's environment: no venv on PATH, none activated (PYTHONPATH stays: it picks the
    checkout under test, as the editable install does)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CAFE_LEADERBOARD")}
    keep = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != Path(venv_bin)]
    env["PATH"] = os.pathsep.join(keep or ["/usr/bin", "/bin"])
    return env


def test_a_new_shell_reaches_cafe_after_the_readme_setup_lines(tmp_path) -> None:
    """`make run` makes .venv (here: the venv this suite runs in, linked where README's make
    puts it); every other set-up line runs verbatim in a new shell, then the first "First
    steps" line as written. Without the set-up lines the same shell cannot find `cafe`."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the suite does not run in a venv: nothing stands in for `make run`'s .venv")
    setup = _block_after("## Two commands")
    first = _block_after("## First steps")[0]
    assert setup[0].startswith("make run") and first.startswith("cafe ")
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    env = _new_shell_env(str(Path(sys.prefix) / "bin"))
    env["CAFE_CACHE"] = str(tmp_path / "cache")

    def shell(lines: list[str]) -> subprocess.CompletedProcess[str]:
        script = "set -e\n" + "\n".join(lines) + "\n"
        return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=tmp_path,
                              env=env, capture_output=True, text=True, check=False)  # fmt: skip

    bare = shell([first])
    assert bare.returncode == 127 and "cafe: command not found" in bare.stderr
    made = shell([*(ln for ln in setup if not ln.startswith("make ")), first])
    assert made.returncode == 0, f"README set-up, then `{first}`:\n{made.stdout}\n{made.stderr}"
    assert list((tmp_path / "runs").glob("*/predictions.jsonl")), made.stdout
