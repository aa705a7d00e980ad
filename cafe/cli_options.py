"""What every command shares: the click classes that turn CafeError into one line, and (below)
the option decorators with the project's canonical names. Imports only click, so `cafe --help`
stays fast."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from cafe.errors import CafeError


@contextmanager
def cli_errors() -> Iterator[None]:
    """CafeError -> click's one-line error (exit 2 with the usage line for CafeUsageError).
    Every command also runs with its printed lines, log records and error messages scrubbed of
    secrets (cafe.redaction): the last net under the scrubbing each writer does."""
    from cafe.redaction import ScrubbingStream, install_log_scrubbing, scrub_exception, scrub_text

    install_log_scrubbing()
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ScrubbingStream):  # nested command: already wrapped
        sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    try:
        yield
    except CafeError as e:
        msg = scrub_text(str(e))
        if e.exit_code == 2:
            raise click.UsageError(msg, ctx=click.get_current_context(silent=True)) from None
        err = click.ClickException(msg)
        err.exit_code = e.exit_code
        raise err from None
    except Exception as e:
        raise scrub_exception(e) from e.__cause__
    finally:
        sys.stdout, sys.stderr = saved


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
