"""JSON text as cafe writes it: strict (no NaN or Infinity, which no JSON parser but Python's
reads; a missing number is null) and UTF-8-encodable (a lone surrogate, which JSON escapes may
carry in, becomes U+FFFD instead of failing the write of a whole batch)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def finite(v: Any) -> Any:
    """``v`` with every non-finite float (NaN, inf) as None."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v


def strict_dumps(data: Any, **kw: Any) -> str:
    """``json.dumps(data, **kw)`` as strict JSON (non-finite numbers as null) that cafe's own
    readers accept (bad_text): each NUL and lone surrogate in a string or key, which a model's
    reply may carry in, is written as U+FFFD. The common case costs one dumps and one scan."""
    try:
        text = json.dumps(data, allow_nan=False, **kw)
    except ValueError:  # a NaN or an infinity somewhere
        data = finite(data)
        text = json.dumps(data, allow_nan=False, **kw)
    if _SUSPECT_TEXT.search(text) is None:
        return text
    text = json.dumps(readable(data), allow_nan=False, **kw)  # (a surrogate pair is kept)
    return LONE_SURROGATE.sub("\ufffd", text) if not kw.get("ensure_ascii", True) else text


def unreadable_text(s: str) -> bool:
    """Whether ``s`` holds what strict_dumps writes as U+FFFD (a NUL, a lone surrogate)."""
    return "\x00" in s or LONE_SURROGATE.search(s) is not None


def readable(v: Any) -> Any:
    """``v`` with each NUL and lone surrogate in its strings and keys as U+FFFD: what no file
    cafe reads may hold (bad_text) written as the replacement character instead."""
    if isinstance(v, str):
        return LONE_SURROGATE.sub("\ufffd", v.replace("\x00", "\ufffd"))
    if isinstance(v, dict):
        return {readable(k) if isinstance(k, str) else k: readable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [readable(x) for x in v]
    return v


#: deepest nesting a JSON or YAML value read from a file may have: deeper is refused with one
#: line (every later reader, writer and page recurses over it)
MAX_DEPTH = 64


#: what a line must contain for bad_text to find anything: an escaped surrogate or NUL, a raw
#: NUL (or surrogate, in text), or enough brackets to nest past MAX_DEPTH
_SUSPECT = re.compile(rb"\\u[dD][89a-fA-F]|\\u0000|\x00")
_SUSPECT_TEXT = re.compile(r"\\u[dD][89a-fA-F]|\\u0000|\x00|[\ud800-\udfff]")


def bad_text_in_line(raw: str | bytes, value: Any) -> tuple[str, str] | None:
    """bad_text(value) for ``value`` parsed from ``raw``, skipping the walk when ``raw`` shows
    that nothing can be found (about a microsecond per line)."""
    if isinstance(raw, bytes):
        clean = (b"\\u" not in raw or _SUSPECT.search(raw) is None) and b"\x00" not in raw
        opens = raw.count(b"{") + raw.count(b"[")
    else:
        clean = _SUSPECT_TEXT.search(raw) is None
        opens = raw.count("{") + raw.count("[")
    return None if clean and opens <= MAX_DEPTH else bad_text(value)


def bad_text(value: Any, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """(field, why) for the first thing in ``value`` (a parsed JSON/YAML value) that no file
    cafe writes may hold: a lone surrogate or NUL in a string or key, nesting past
    ``max_depth``. ``field`` is the top-level key it is under ("" for the value itself)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        v, depth, top = stack.pop()
        if depth > max_depth:
            return top, f"nested more than {max_depth} levels deep"
        if isinstance(v, str):
            why = _bad_chars(v)
            if why:
                return top, why
        elif isinstance(v, dict):
            for k, x in v.items():
                why = _bad_chars(k) if isinstance(k, str) else None
                if why:  # named in escapes: the key itself cannot be printed
                    shown = str(k).encode("ascii", "backslashreplace").decode()
                    return top or shown, f"a key {why}"
                stack.append((x, depth + 1, top or str(k)))
        elif isinstance(v, list):
            stack.extend((x, depth + 1, top) for x in v)
    return None


def _bad_chars(s: str) -> str | None:
    if "\x00" in s:
        return "holds a NUL character"
    m = LONE_SURROGATE.search(s)
    if m:
        return f"holds a lone surrogate (U+{ord(m.group()):04X}), which is not text"
    return None


def loads_line(raw: str | bytes) -> Any:
    """json.loads for one line or file; nesting too deep for the parser is a ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
