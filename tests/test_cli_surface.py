"""The command-line surface: project errors become one line in one place, whether a command runs
through the `cafe` group or is invoked on its own."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cafe import cli
from cafe.cli_options import Command
from cafe.errors import CafeError, CafeUsageError
from cafe.registry import Registry, UnknownNameError


@click.command(cls=Command)
@click.option("--usage", is_flag=True)
def failing_command(usage: bool) -> None:
    raise (CafeUsageError if usage else CafeError)("data.json: sample s1: field audio: missing")


@click.command()  # a plain click command: the group still converts its project errors
def plain_failing_command() -> None:
    raise CafeError("plain: broken")


def test_command_turns_cafe_error_into_one_line() -> None:
    res = CliRunner().invoke(failing_command, [])
    assert res.exit_code == 1
    assert res.output == "Error: data.json: sample s1: field audio: missing\n"
    res = CliRunner().invoke(failing_command, ["--usage"])
    assert res.exit_code == 2
    assert res.output.splitlines()[-1] == "Error: data.json: sample s1: field audio: missing"
    assert res.output.startswith("Usage:")


def test_group_converts_project_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.COMMANDS, "boom", "test_cli_surface:plain_failing_command")
    res = CliRunner().invoke(cli.main, ["boom"])
    assert (res.exit_code, res.output) == (1, "Error: plain: broken\n")


def test_unknown_name_is_a_project_error_and_a_key_error() -> None:
    reg: Registry[int] = Registry("metric")
    with pytest.raises(CafeError):
        reg.get("nope")
    with pytest.raises(KeyError):
        reg.get("nope")
    assert issubclass(UnknownNameError, CafeError)
