"""Table cells that stay cells whatever text they hold (a model name, a category, a metric key
from a run folder someone handed over): a Markdown cell never breaks its row nor carries HTML
or a link; a CSV text cell is never evaluated as a spreadsheet formula."""

from __future__ import annotations

import re
from typing import Any

#: a cell a spreadsheet would evaluate as a formula starts with one of these
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: a number as we format it (a negative one stays a number, not text)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
#: Markdown that would turn text into markup: emphasis, code, links, table pipes ("_" inside
#: a word, as in R_perception, is not emphasis)
_MD_SPECIAL = re.compile(r"([\\|*`\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def csv_cell(value: Any) -> str:
    """A CSV text cell a spreadsheet shows as text: one starting like a formula (a model named
    ``=HYPERLINK(…)``) gets a leading apostrophe (OWASP's CSV-injection advice); a number stays
    a number; line breaks are "\n" (quoted by the writer)."""
    s = "" if value is None else str(value)
    s = "'" + s if s.startswith(FORMULA_START) and not _NUMBER.fullmatch(s) else s
    # a bare CR is no line end to a writer ending lines in "\n": it would go out unquoted
    return s.replace("\r\n", "\n").replace("\r", "\n")


def md_cell(value: Any) -> str:
    """A Markdown table cell showing ``value`` as plain text: line breaks become spaces, HTML
    is escaped as entities, pipes and Markdown's emphasis, code and link marks get a
    backslash."""
    s = _LINE_BREAKS.sub(" ", "" if value is None else str(value))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)
