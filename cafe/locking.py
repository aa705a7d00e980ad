"""One writer per run folder (and per leaderboard file): an advisory lock every writing command
holds while it plans from the folder and writes to it, so two terminals on one folder never pay
one (item, run) twice nor lose each other's metrics sections.

- ``folder_lock(root, command)``: ``fcntl.flock`` on ``ROOT/.cafe.lock``. The kernel drops the lock
  with its process, so a lock left by a killed command is simply free again (nothing to clean
  up, nothing stale to trust); a command that ends removes its lock file (no ``.x.lock`` stays
  in the user's folder). Re-entrant within a process (``cafe run`` holds it while its
  judge takes it again); another thread of the same process waits like another process does.
- A second writer waits up to ``$CAFE_LOCK_WAIT`` seconds (default 10), then refuses with one
  line naming the holder (command and PID) and what to do (``FolderBusy``).
- Readers (report, show, export, judge-agreement) never take it: every file is replaced whole
  (cafe.store), so a reader sees the old or the new file, never half of one."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cafe.errors import CafeError
from cafe.safe_files import open_no_follow, refuse_links_out

LOCK_NAME = ".cafe.lock"  # the writer lock's file in a run folder
WAIT_ENV = "CAFE_LOCK_WAIT"
DEFAULT_WAIT_S = 10.0
POLL_S = 0.05


class FolderBusy(CafeError):
    """Another command is writing this folder (or file); the message names it and what to do."""


class _Held:
    """This process's hold on one lock file: the descriptor, the depth, the owning thread."""

    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_registry: dict[str, _Held] = {}
_registry_guard = threading.Lock()


def current_command() -> str:
    """``cafe <subcommand>`` for the command line, else the program's name (an API caller)."""
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if prog in ("cafe", "cli.py", "__main__.py") and len(sys.argv) > 1:
        return f"cafe {sys.argv[1]}"
    return prog


def wait_seconds(wait_s: float | None = None) -> float:
    if wait_s is not None:
        return max(0.0, float(wait_s))
    raw = os.environ.get(WAIT_ENV)
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_WAIT_S
    except ValueError:
        return DEFAULT_WAIT_S


def _holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # the holder has the lock but has not written its name yet


def _busy(target: Path, lock_path: Path, waited: float, same_process: bool) -> FolderBusy:
    h = _holder(lock_path)
    if same_process:
        who = f"another thread of this process (PID {os.getpid()})"
    elif h.get("pid"):
        since = f", since {h['since']}" if h.get("since") else ""
        who = f"`{h.get('command') or 'a cafe command'}` (PID {h['pid']}{since})"
    else:
        who = "another cafe command"
    return FolderBusy(
        f"{target} is being written by {who}; waited {waited:g}s: let it finish (or stop it) "
        f"and run this again, or set {WAIT_ENV}=SECONDS to wait longer"
    )


def _try_flock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _still_there(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file ``fd`` holds (a released lock file is removed)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


@contextmanager
def file_lock(
    lock_path: str | Path,
    target: str | Path,
    command: str | None = None,
    wait_s: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the lock ``lock_path`` (``target`` names what it guards in messages)."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    key = str(lock_path.resolve())
    with _registry_guard:
        held = _registry.setdefault(key, _Held())
    wait = wait_seconds(wait_s)
    start = clock()
    got = held.thread_lock.acquire(timeout=wait) if wait > 0 else held.thread_lock.acquire(False)
    if not got:
        raise _busy(Path(target), lock_path, wait, same_process=True)
    try:
        if held.depth == 0:
            fd = open_no_follow(lock_path, os.O_RDWR | os.O_CREAT)  # a planted link: refused
            try:
                while not (_try_flock(fd) and _still_there(fd, lock_path)):
                    waited = clock() - start
                    if waited >= wait:
                        raise _busy(Path(target), lock_path, round(waited, 1), same_process=False)
                    sleep(POLL_S)
                    if not _still_there(fd, lock_path):  # its holder removed it on release
                        os.close(fd)
                        fd = open_no_follow(lock_path, os.O_RDWR | os.O_CREAT)
                me = {"pid": os.getpid(), "command": command or current_command(),
                      "since": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            held.fd = fd
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0 and held.fd is not None:
                # removed while still held (a waiter that opened it sees it gone and opens the
                # new one), so no lock file stays behind in the user's folder
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock_path)
                os.close(held.fd)  # closing the descriptor releases the flock
                held.fd = None
    finally:
        held.thread_lock.release()


@contextmanager
def folder_lock(
    root: str | Path, command: str | None = None, wait_s: float | None = None, **kw: Any
) -> Iterator[None]:
    """The run folder's writer lock (``ROOT/.cafe.lock``); the folder is created if needed.
    Held, it refuses a folder holding a link that leads outside it: every file the command
    writes stays inside the folder the user gave."""
    with file_lock(Path(root) / LOCK_NAME, root, command, wait_s, **kw):
        refuse_links_out(Path(root), Path(root))
        yield


def holds(root: str | Path) -> bool:
    """Whether this process holds ``root``'s writer lock now."""
    held = _registry.get(str((Path(root) / LOCK_NAME).resolve()))
    return held is not None and held.depth > 0
