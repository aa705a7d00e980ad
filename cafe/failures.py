"""How failed items are classified, summarised and logged, for every command that processes
items (run, judge, caption, attention).

Failure kinds recorded in a failed prediction's ``sections["failure"]``:
- ``input``: the metadata item itself is bad (fix the file; it is re-read on every run);
- ``audio``: the clip is missing or unreadable: retried on the next run once the file changed
  (added, replaced), so adding the files and running the same command again finishes the run;
- ``model``: a transient failure (network, 429, 5xx, timeouts) left after the client's bounded
  retries with backoff: retried on the next run;
- ``adapter``: an exception raised by adapter code (a bug, not the weather): recorded once, with
  its traceback in the run folder's run.log, and not retried by re-runs (``--retry-failed``
  retries it after a fix)."""

from __future__ import annotations

import re
import threading
import traceback
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from cafe.store import RUN_LOG

RETRIED = ("model",)  # kinds a plain re-run tries again ("audio": once its file changed)
#: distinct reasons printed in a summary (the rest are counted)
MAX_REASONS = 8

_PATHISH = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*(?:/[\w.@:+~-]+)+/?")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def reason_key(error: str, sample_id: str | None = None) -> str:
    """An error with what varies per item (sample id, file paths, numbers) taken out, so the
    same cause counts once: "/d/x.wav: sample 7: field audio: file not found" ->
    "<path>: sample <id>: field audio: file not found"."""
    text = error.splitlines()[0] if error else "no reason given"
    if sample_id:
        text = text.replace(str(sample_id), "<id>")
    text = _PATHISH.sub("<path>", text)
    return _NUMBER.sub("N", text)


def most_failed(failed: int, total: int) -> bool:
    """More than half of the items failed (or there was nothing to produce)."""
    return total == 0 or 2 * failed > total


def summary_lines(
    what: str,
    failures: Iterable[tuple[str, str | None]],
    total: int,
    hint: str | None = None,
    verb: str = "failed",
) -> list[str]:
    """``failures``: (error, sample id) pairs. One header line with the count, then each distinct
    reason with its count and one example, most frequent first."""
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for error, sid in failures:
        key = reason_key(error, sid)
        counts[key] += 1
        line = error.splitlines()[0] if error else key
        if sid and f"sample {sid}" not in line:  # every line names its item
            line = f"sample {sid}: {line}"
        example.setdefault(key, line)
    n = sum(counts.values())
    if not n:
        return []
    lines = [f"{n} of {total} {what} {verb} ({len(counts)} distinct reason(s)):"]
    for key, c in counts.most_common(MAX_REASONS):
        lines.append(f"  {c} x {example[key]}")
    if len(counts) > MAX_REASONS:
        rest = sum(c for _, c in counts.most_common()[MAX_REASONS:])
        lines.append(f"  … {rest} more in {len(counts) - MAX_REASONS} other reason(s)")
    if hint:
        lines.append(hint)
    return lines


class RunLog:
    """Append-only run.log in a run folder: each distinct traceback once (scrubbed of secrets),
    so an adapter bug hit by 3000 items is one entry, not 3000."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / RUN_LOG
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def exception(self, context: str, exc: BaseException) -> None:
        from cafe.manifest import now
        from cafe.redaction import scrub_text

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        key = reason_key(tb)
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(scrub_text(f"[{now()}] {context}\n{tb}\n"))
