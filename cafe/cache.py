"""Content-addressed cache of model and judge calls (after lmms-eval's response_cache, plus judge
calls). SQLite in WAL mode; a key is the sha256 of a canonical JSON of everything that determines
the reply (model or judge identity, template hash, inputs with audio by content hash, sampling
settings and seed). Empty or failed replies are never cached, so a re-run retries them.
API keys must never be part of a key: pass identities, not clients.

One root for every cache file, resolved when it is used (``cache_root()``: $CAFE_CACHE, else
~/.cache/cafe), so setting CAFE_CACHE after import still takes effect. Several threads and
processes may share a file (WAL, busy timeout); a writer SIGKILLed mid-transaction leaves the
file readable (SQLite rolls the torn transaction back on next open)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.counters import count_share
from cafe.redaction import scrub_text

CACHE_ENV = "CAFE_CACHE"


def cache_root() -> Path:
    """$CAFE_CACHE, else ~/.cache/cafe: read at call time, the one place the root is derived."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "cafe"


def cache_file(name: str) -> Path:
    """A file under the cache root (calls.sqlite, judge.sqlite, captions.sqlite, synth/…)."""
    return cache_root() / name


#: the entries' format: a change of what an entry holds (or of what keys it) bumps it, so an
#: older cafe's entries are never read as this one's
SCHEMA = 2


def make_key(**parts: Any) -> str:
    canonical = json.dumps(
        {"cache_schema": SCHEMA, **parts}, sort_keys=True, ensure_ascii=False,
        separators=(",", ":"),
    )  # fmt: skip
    return hashlib.sha256(canonical.encode()).hexdigest()


def text_entry(value: Any) -> bool:
    """A judge call's entry: ``{"text": <non-empty str>}``."""
    return isinstance(value, dict) and isinstance(value.get("text"), str) and bool(value["text"])


def storable(value: Any) -> bool:
    """What may be cached: no empty reply, and a ``text`` (a reply's, where an entry has one)
    that is a non-empty string; a server's number or object in its place is never stored."""
    if value is None or value == "" or value == {}:
        return False
    return not (isinstance(value, dict) and "text" in value and not text_entry(value))


class Cache:
    """Thread-safe get/put of JSON values by key. ``Cache(None)`` is a disabled cache."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            try:
                self._db = self._open(self.path)
            except (sqlite3.Error, OSError) as e:  # not a database, unreadable, CAFE_CACHE
                self._disable(e)  # naming a file, a read-only folder: run without it

    def _disable(self, e: Exception) -> None:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        print(
            f"warning: cache {self.path} cannot be used ({why}); running without it "
            f"(delete or move what stands at {self.path}, or point {CACHE_ENV} at a folder, to "
            "have a cache again)",
            file=sys.stderr,
        )
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT)")
        db.commit()
        return db

    def get(self, key: str, valid: Callable[[Any], bool] | None = None) -> Any | None:
        """The value under ``key``, or None. An entry that cannot be decoded, or that fails
        ``valid`` (the caller's shape), is a miss: skipped, and replaced by the next put."""
        if self._db is None:
            return None
        with self._lock:
            try:
                row = (
                    None
                    if self._db is None
                    else self._db.execute(
                        "SELECT value FROM calls WHERE key = ?", (key,)
                    ).fetchone()
                )
            except sqlite3.Error as e:  # damaged or unreadable since it opened: a miss
                self._disable(e)
                row = None
            value = None
            if row is not None:
                try:
                    value = json.loads(row[0])
                except (ValueError, TypeError, RecursionError):  # damaged: a miss
                    value = None
                if value is not None and not (storable(value) and (valid is None or valid(value))):
                    value = None  # the wrong shape (a poisoned entry): a miss, replaced later
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
                count_share("cache_hits")  # the item being called: a hit of its own
        return value

    def put(self, key: str, value: Any) -> None:
        if self._db is None or not storable(value):
            return
        try:
            text = scrub_text(json.dumps(value, ensure_ascii=False, allow_nan=False))
            text.encode("utf-8")  # a lone surrogate cannot be stored: not cached
        except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
            return
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO calls (key, value) VALUES (?, ?)", (key, text)
                )
                self._db.commit()
            except sqlite3.Error as e:  # a full disk, a read-only file: the run goes on
                self._disable(e)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
