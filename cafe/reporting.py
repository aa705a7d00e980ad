"""The one channel library code reports through: a warning is a line handed to ``warn``, which
writes it to stderr (tests read it with capsys). Library modules never print or import click for
this (only the command-line layer does)."""

from __future__ import annotations

import sys


def warn(line: str) -> None:
    """Report one warning line ("warning: " is added)."""
    print(f"warning: {line}", file=sys.stderr)


def note(line: str) -> None:
    """Report one line as it is (a state the user should know, not a warning)."""
    print(line, file=sys.stderr)
