"""What every command shares: the click classes that turn CafeError into one line, and (below)
the option decorators with the project's canonical names. Imports only click, so `cafe --help`
stays fast."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from cafe.errors import CafeError


@contextmanager
def cli_errors() -> Iterator[None]:
    """CafeError -> click's one-line error (exit 2 with the usage line for CafeUsageError)."""
    try:
        yield
    except CafeError as e:
        if e.exit_code == 2:
            raise click.UsageError(str(e), ctx=click.get_current_context(silent=True)) from None
        err = click.ClickException(str(e))
        err.exit_code = e.exit_code
        raise err from None


class Command(click.Command):
    """A cafe command: project errors become one line, also when invoked without the group."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        with cli_errors():
            return super().invoke(ctx)


class Group(click.Group):
    """A cafe command group; its subcommands are cafe Commands."""

    command_class = Command

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        with cli_errors():
            return super().invoke(ctx)


Group.group_class = Group
