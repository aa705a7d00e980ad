"""The one channel library code reports through: a warning is a line handed to ``warn``, which
writes it to stderr unless a caller (a test, an embedding application) installs its own sink.
Library modules never print or import click for this (only the command-line layer does)."""

from __future__ import annotations

import sys
from collections.abc import Callable

_sink: Callable[[str], None] | None = None


def warn(line: str) -> None:
    """Report one warning line ("warning: " is added)."""
    text = f"warning: {line}"
    if _sink is not None:
        _sink(text)
    else:
        print(text, file=sys.stderr)


def note(line: str) -> None:
    """Report one line as it is (a state the user should know, not a warning)."""
    if _sink is not None:
        _sink(line)
    else:
        print(line, file=sys.stderr)


def set_sink(sink: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Send warnings to ``sink`` (None: stderr again); returns the previous sink."""
    global _sink
    previous, _sink = _sink, sink
    return previous
