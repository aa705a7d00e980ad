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


def cache_root() -> Path:
    """$CAFE_CACHE, else ~/.cache/cafe: read at call time, the one place the root is derived."""
    env = os.environ.get("CAFE_CACHE")
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
            except sqlite3.DatabaseError as e:  # not a database, unreadable: run without it
                print(
                    f"warning: cache {self.path} cannot be used ({e}); running without it "
                    "(delete or move the file to start a fresh cache)",
                    file=sys.stderr,
                )
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
            row = self._db.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
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
            self._db.execute("INSERT OR REPLACE INTO calls (key, value) VALUES (?, ?)", (key, text))
            self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
