"""The command-line surface: project errors become one line in one place, whether a command runs
through the `cafe` group or is invoked on its own."""

from __future__ import annotations

import hashlib
import importlib
import json

import click
import pytest
from click.testing import CliRunner

from cafe import cli
from cafe.cli_options import Command, Group, adapter_options
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


# every command: the cafe classes, and old spellings hidden but accepted -----------------------
def _all_commands() -> list[tuple[str, click.Command]]:
    out = []
    for name, target in cli.COMMANDS.items():
        module, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        out.append((name, cmd))
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            out.append((f"{name} {sub_name}", sub))
    return out


def test_every_command_resolves_to_a_cafe_command() -> None:
    commands = _all_commands()
    assert len(commands) > len(cli.COMMANDS)  # the groups' subcommands are in
    for name, cmd in commands:
        assert isinstance(cmd, click.Command), name
        assert isinstance(cmd, Command | Group), f"{name}: {type(cmd).__name__} not a cafe class"


def test_old_spellings_are_hidden_from_help() -> None:
    olds = {}
    for name, cmd in _all_commands():
        helped = CliRunner().invoke(cli.main, [*name.split(), "--help"])
        assert helped.exit_code == 0, helped.output
        for p in cmd.params:
            for old in getattr(p, "old", ()):
                olds[(name, old)] = p.opts[0]
                assert old not in helped.output.split(), (name, old)
    assert olds == {
        ("run", "--quiet"): "--no-progress",
        ("score", "--meta"): "--data",
        ("export", "--format"): "--bench",
        ("bench synth", "--n"): "--limit",
        ("doctor", "--n"): "--limit",
        ("judge", "--endpoint"): "--judge-endpoint",
        ("judge", "--concurrency"): "--judge-concurrency",
        ("train grpo", "--endpoint"): "--judge-endpoint",
    }


def test_shared_names_mean_one_thing() -> None:
    """--format is a file type wherever it appears; --endpoint is a model server."""
    for name, cmd in _all_commands():
        for p in cmd.params:
            shown = [o for o in p.opts if o not in getattr(p, "old", ())]
            if "--format" in shown:
                assert set(p.type.choices) <= {"md", "tex", "csv", "json", "jsonl"}, name
            if "--endpoint" in shown:
                assert p.name == "endpoints", name


def test_model_loading_commands_share_the_model_options() -> None:
    want = {"--model", "--checkpoint", "--cards", "--option", "--endpoint"}
    for name, cmd in _all_commands():
        if name in {"run", "doctor", "attention", "train data"}:
            got = {o for p in cmd.params for o in p.opts}
            assert want <= got, (name, want - got)
            assert "-o" in got


def test_adapter_options_parse_yaml_values_and_endpoints() -> None:
    opts = adapter_options(("model=served-x", "temperature=0.5", "seed=3"), ("http://a",))
    assert opts == {"model": "served-x", "temperature": 0.5, "seed": 3, "endpoints": ["http://a"]}
    with pytest.raises(CafeUsageError, match="--option 'novalue': expected KEY=VALUE"):
        adapter_options(("novalue",))


# doctor and attention: a served model, and missing weights in one line ------------------------
def _hearing_server_reply(body: dict) -> str:
    # a served model whose answer depends on the audio bytes it was sent
    return "heard " + hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:8]


def test_doctor_checks_a_served_model(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cafe.benchmarks.synth.generator import generate
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    data = generate(tmp_path / "synth", n=2, seed=0)
    args = ["doctor", "--model", "openai-compatible", "-o", "model=served-x", "--bench", "synth",
            "--data", str(data), "--limit", "2", "--strict"]  # fmt: skip
    with OpenAILoopback(reply=_hearing_server_reply) as srv:
        res = CliRunner().invoke(cli.main, [*args, "--endpoint", srv.url])
    assert res.exit_code == 0, res.output
    assert len(srv.requests) == 4  # 2 items, real and silent
    assert {b["model"] for b in srv.requests} == {"served-x"}
    assert res.output.splitlines()[-1].startswith("ok")
    # a server that ignores the audio fails --strict with the warning
    with OpenAILoopback(reply=lambda body: "same answer") as srv:
        res = CliRunner().invoke(cli.main, [*args, "--endpoint", srv.url])
    assert res.exit_code == 1
    assert "synth-00000: output UNCHANGED with silence" in res.output
    assert res.output.splitlines()[-1].startswith("WARNING")


@pytest.mark.parametrize("command", ["doctor", "attention"])
def test_missing_weights_are_one_line(command: str, tmp_path) -> None:
    res = CliRunner().invoke(
        cli.main,
        [
            command,
            "--model",
            "qwen2-audio",
            "--checkpoint",
            str(tmp_path / "no-weights"),
            "--bench",
            "synth",
            "--limit",
            "1",
        ],  # fmt: skip
    )
    assert res.exit_code == 1
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith(
        f"Error: cannot load model 'qwen2-audio' (adapter qwen2-audio, checkpoint {tmp_path}"
    )


def test_attention_on_a_served_model_says_why_in_one_line(tmp_path) -> None:
    """A served model loads through the same options, then attention says it needs weights."""
    res = CliRunner().invoke(
        cli.main,
        [
            "attention",
            "--model",
            "openai-compatible",
            "-o",
            "model=served-x",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--bench",
            "synth",
            "--limit",
            "1",
            "--out",
            str(tmp_path / "a.json"),
        ],  # fmt: skip
    )
    assert res.exit_code == 1
    assert res.output == (
        "Error: model 'openai-compatible': attention tracing needs a transformers adapter "
        "(adapter openai-compatible has no model weights to trace)\n"
    )
    assert not (tmp_path / "a.json").exists()
