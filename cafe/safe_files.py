"""Opening a file and writing into a folder without following a planted link, and replacing a
file whole: the primitives under the run folder's store and its writer lock (cafe.store,
cafe.locking), and the report writers."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.errors import RunFolderError


def open_no_follow(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that never follows a link at ``path`` and opens only a regular file: a link
    or a FIFO planted in a folder (a lock file, a records file) would have cafe write into a
    file elsewhere. Either is a RunFolderError in one line naming the file."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:  # O_NONBLOCK: opening a FIFO must not wait for a reader; it is refused below
        fd = os.open(path, flags | nofollow | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as e:
        if os.path.islink(path):
            raise RunFolderError(
                f"{path} is a symbolic link (to {os.readlink(path)}); cafe never writes through a "
                "link: remove it and run the same command again"
            ) from None
        raise e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RunFolderError(
            f"{path} is not a regular file; cafe writes only regular files there: remove it and "
            "run the same command again"
        )
    os.set_blocking(fd, True)
    return fd


def refuse_links_out(root: Path, folder: Path) -> None:
    """Before writing into ``folder`` (report/ of a run folder): refuse when it, or anything
    in it, is a link leading outside ``root``; writing through it would overwrite files
    elsewhere on the machine."""
    real_root = root.resolve()

    def outside(p: Path) -> bool:
        real = p.resolve()
        return real != real_root and real_root not in real.parents

    entries = [folder] if folder.is_symlink() or folder.exists() else []
    if folder.is_dir() and not outside(folder):
        for base, dirs, files in os.walk(folder):  # links are not followed
            entries += [Path(base, n) for n in dirs + files]
    for p in entries:
        if p.is_symlink() and outside(p):
            raise RunFolderError(
                f"{p}: a link leading outside the run folder (to {p.resolve()}); cafe writes "
                "nothing through it: remove the link, or give --out DIR"
            )


def _refuse_link_or_special(path: Path) -> None:
    if path.is_symlink():
        raise RunFolderError(
            f"{path} is a symbolic link (to {os.readlink(path)}); cafe never writes through a "
            "link: remove it and run the same command again"
        )
    if path.exists() and not path.is_file() and not path.is_dir():
        raise RunFolderError(
            f"{path} is not a regular file (a pipe, device or socket stands there); cafe writes "
            "only regular files: remove it, or give another path"
        )


def safe_dir(path: str | Path) -> Path:
    """``path`` as a folder to write into, made if absent: a link standing there (to a folder
    elsewhere) is refused in one line, never written through."""
    path = Path(path)
    _refuse_link_or_special(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_file(path: str | Path, data: str | bytes) -> Path:
    """The one writer of an output folder's files (reports, figures, tables, exports, sweeps):
    ``data`` (text as utf-8) written whole to a fresh temporary file beside ``path`` and renamed
    over it, so a link or a FIFO planted at ``path`` is never written through (refused in one
    line naming it), a reader never sees half a file, and a failure leaves the old one."""
    path = Path(path)
    _refuse_link_or_special(path)
    if path.is_dir():
        raise RunFolderError(f"{path} is a folder; cafe writes a file there: give another path")
    safe_dir(path.parent)
    body = data.encode("utf-8") if isinstance(data, str) else data
    # a fresh temporary file renamed over it: a link that appeared meanwhile is replaced
    replace_file(path, lambda f: f.buffer.write(body))
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform that cannot open folders: the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file(path: str | Path, write: Callable[[Any], None]) -> None:
    """Replace ``path`` whole: ``write(f)`` fills a unique temporary file in the same folder
    (text, utf-8), which is fsynced and renamed over ``path``, then the folder is fsynced. On
    any error the temporary file is removed and ``path`` is as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a run folder's files are not
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)
