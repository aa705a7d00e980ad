"""`cafe` command line. Thin: each subcommand lives in the module that owns the operation and is
imported only when invoked, so `cafe --help` stays fast and heavy extras stay optional."""

from __future__ import annotations

import importlib

import click

from cafe.cli_options import Group
from cafe.commands import TABLE
from cafe.steps import STEPS

# made from cafe.commands.TABLE (the one table of commands, cafe.api's too; cafe's own steps'
# rows from their registrations): `cafe NAME` -> "module:click_command" (defined next to the
# code it calls, or generated from the step), and its line in `cafe --help`
COMMANDS: dict[str, str] = {c.name: c.click for c in TABLE}
HELP: dict[str, str] = {c.name: c.help for c in TABLE}


def _plugin_steps() -> list[str]:
    """Steps registered after the table was made (by other packages, cafe.steps): each is
    `cafe NAME`."""
    return [n for n in STEPS.names() if n not in COMMANDS]


class LazyGroup(Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *_plugin_steps()])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            if name not in STEPS:
                return None
            from cafe.steps.cli import step_command  # a step's command, made from its options

            return step_command(STEPS.step(name))
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # help lines from the table, so `cafe --help` imports no command module
        plugin = "A step registered by a plugin (cafe.steps)."
        with formatter.section("Commands"):
            rows = [(n, HELP.get(n, "")) for n in sorted(COMMANDS)]
            rows += [(n, b.help if (b := STEPS.builtins.get(n)) else plugin)
                     for n in _plugin_steps()]  # fmt: skip
            formatter.write_dl(sorted(rows))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cafe-audio-eval")
def main() -> None:
    """cafe: audio reasoning evaluation with CAFE perception metrics and MPAR² training.

    Start with `cafe run` (the synthetic benchmark with the reference listener), then
    `cafe run --model NAME --bench mmar --data PATH`."""
    from cafe.execution import honour_interrupts

    honour_interrupts()  # `kill -INT` stops a backgrounded cafe too (the stop policy)


if __name__ == "__main__":
    main()
