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
from pathlib import Path
from typing import Any

from cafe.redaction import scrub_text

CACHE_ENV = "CAFE_CACHE"


def cache_root() -> Path:
    """$CAFE_CACHE, else ~/.cache/cafe: read at call time, the one place the root is derived."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "cafe"


def cache_file(name: str) -> Path:
    """A file under the cache root (calls.sqlite, judge.sqlite, captions.sqlite, synth/…)."""
    return cache_root() / name


def make_key(**parts: Any) -> str:
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


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

    def get(self, key: str) -> Any | None:
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
                except ValueError:  # a damaged value is a miss; the next put replaces it
                    value = None
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        if self._db is None or value is None or value == "" or value == {}:
            return
        text = scrub_text(json.dumps(value, ensure_ascii=False))
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
