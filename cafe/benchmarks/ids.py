"""`cafe run --ids FILE`: run only the listed items (one id a line, as `cafe necessity
--export` writes; blank lines and lines starting with # skipped). The list is part of the
run's identity by its hash, so another list gets another folder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.records import Sample


def read_ids(path: str | Path) -> list[str]:
    from cafe.errors import CafeError
    from cafe.store import read_regular

    try:  # a FIFO or device there: one line, not a read that waits forever for a writer
        text = read_regular(path).decode("utf-8")
    except (CafeError, OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the id list ({e})") from None
    ids = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not ids:
        raise ValueError(f"{path}: the id list is empty (one sample id a line)")
    return list(dict.fromkeys(ids))


def select_ids(
    pool: Sequence[Sample], path: str | Path, limit: int | None
) -> tuple[list[Sample], dict[str, Any]]:
    """The pool's items whose id is listed, in the benchmark's order, the first ``limit`` of
    them; and the selection's identity. An id the benchmark lacks is an error naming it."""
    ids = read_ids(path)
    known = {s.id for s in pool}
    missing = [i for i in ids if i not in known]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if missing[3:] else "")
        raise ValueError(f"{path}: id(s) not in the benchmark: {shown}")
    wanted = set(ids)
    picked = [s for s in pool if s.id in wanted][:limit]
    digest = hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()
    return picked, {"sha256": digest, "n": len(ids)}


def selected_ids(request: Any, samples: list[Sample], pool: list[Sample]) -> tuple[list, Any]:
    """The sample transform of RunRequest.ids: the listed items of the pool, then --limit."""
    return select_ids(pool, request.ids, request.limit)
