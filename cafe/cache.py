"""Content-addressed cache of model and judge calls (after lmms-eval's response_cache, plus judge
calls). SQLite in WAL mode; a key is the sha256 of a canonical JSON of everything that determines
the reply (model or judge identity, template hash, inputs with audio by content hash, sampling
settings and seed). Empty or failed replies are never cached, so a re-run retries them.
API keys must never be part of a key: pass identities, not clients."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from cafe.redaction import scrub_text

DEFAULT_DIR = Path(os.environ.get("CAFE_CACHE", Path.home() / ".cache" / "cafe"))


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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT)")
            self._db.commit()

    def get(self, key: str) -> Any | None:
        if self._db is None:
            return None
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        if self._db is None or value is None or value == "" or value == {}:
            return
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, value) VALUES (?, ?)",
                (key, scrub_text(json.dumps(value, ensure_ascii=False))),
            )
            self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
