"""The call cache: one root read at call time, counters exact under threads, several threads and
two processes writing one file, and a writer SIGKILLed mid-write leaves it readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from cafe.cache import Cache, cache_file, cache_root

WRITER = textwrap.dedent(
    """
    import sys
    from cafe.cache import Cache
    c = Cache(sys.argv[1])
    tag, n = sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    for i in range(n):
        c.put(f"{tag}-{i}", {"text": f"{tag} value {i}", "pad": "x" * 2000})
    print("done", flush=True)
    """
)


def test_cache_root_is_read_when_used(monkeypatch, tmp_path):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "a"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "b"))  # after import: still honoured
    assert cache_file("judge.sqlite") == tmp_path / "b" / "judge.sqlite"
    monkeypatch.delenv("CAFE_CACHE")
    assert cache_root() == Path.home() / ".cache" / "cafe"


def test_counters_are_exact_under_threads(tmp_path):
    c = Cache(tmp_path / "c.sqlite")
    for i in range(50):
        c.put(f"k{i}", {"v": i})

    def reader(t: int) -> None:
        for i in range(100):  # 50 hits (k0..k49) and 50 misses (m0..m49) per thread
            c.get(f"k{i}" if i < 50 else f"m{t}-{i}")

    threads = [threading.Thread(target=reader, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (c.hits, c.misses) == (8 * 50, 8 * 50)


def _spawn(path: Path, tag: str, n: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), tag, str(n)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _rows(path: Path) -> int:
    """Rows committed so far, read by another connection while the writer writes."""
    import sqlite3

    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    finally:
        db.close()


def test_threads_and_two_processes_share_one_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    procs = [_spawn(path, f"p{i}", 200) for i in range(2)]
    c = Cache(path)

    def writer(t: int) -> None:
        for i in range(100):
            c.put(f"t{t}-{i}", {"text": f"t{t} value {i}"})

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        assert p.wait(timeout=120) == 0
    fresh = Cache(path)
    assert all(
        fresh.get(f"p{i}-{j}")["text"] == f"p{i} value {j}" for i in (0, 1) for j in (0, 199)
    )
    assert all(
        fresh.get(f"t{t}-{j}")["text"] == f"t{t} value {j}" for t in range(4) for j in (0, 99)
    )
    n = fresh._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]  # type: ignore[union-attr]
    assert n == 2 * 200 + 4 * 100


def test_sigkill_during_writes_leaves_the_cache_readable(tmp_path):
    path = tmp_path / "killed.sqlite"
    Cache(path).put("before", {"text": "kept"})
    p = _spawn(path, "w", 1_000_000)  # writes until killed
    deadline = time.monotonic() + 60  # a safety net, not a timing claim
    while _rows(path) < 3 and time.monotonic() < deadline:  # killed once it is writing
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    c = Cache(path)
    assert c.get("before") == {"text": "kept"}
    n = c._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]  # type: ignore[union-attr]
    assert n > 1  # the killed writer got some rows in, and every committed row reads back
    rows = c._db.execute("SELECT key, value FROM calls").fetchall()  # type: ignore[union-attr]
    assert all(c.get(k) is not None for k, _ in rows)
    c.put("after", {"text": "new"})
    assert Cache(path).get("after") == {"text": "new"}
    assert c._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # type: ignore[union-attr]


def test_a_file_that_is_not_a_cache_is_one_warning_and_no_cache(tmp_path, capsys):
    bad = tmp_path / "judge.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    c = Cache(bad)
    assert c.get("k") is None
    c.put("k", {"v": 1})  # a no-op, never a traceback
    err = capsys.readouterr().err
    assert str(bad) in err and "running without it" in err and len(err.strip().splitlines()) == 1
    assert bad.read_bytes().startswith(b"this is not a database")  # nothing overwritten
