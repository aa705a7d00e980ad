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
    """``json.dumps(data, **kw)`` as strict JSON (non-finite numbers as null) holding no lone
    surrogate. The common case costs one dumps and one scan."""
    try:
        text = json.dumps(data, allow_nan=False, **kw)
    except ValueError:  # a NaN or an infinity somewhere
        text = json.dumps(finite(data), allow_nan=False, **kw)
    return LONE_SURROGATE.sub("\ufffd", text) if not kw.get("ensure_ascii", True) else text
