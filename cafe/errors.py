"""The project's exception base. Library code raises these (never click exceptions), so the
Python API gets ordinary exceptions; the command line turns them into one line and an exit
status in one place (cafe.cli_options.cli_errors)."""

from __future__ import annotations


class CafeError(Exception):
    """Something the user must fix, said in one line (file, sample id, field where known)."""

    exit_code = 1

    @property
    def message(self) -> str:  # the name click exceptions use, for callers that read it
        return str(self)


class CafeUsageError(CafeError):
    """A bad combination of options or arguments; the CLI adds the usage line and exits 2."""

    exit_code = 2


class RunFolderError(CafeError, FileNotFoundError):
    """A run folder lacks what the operation reads (manifest, samples, predictions)."""


class ConfigError(CafeError, ValueError):
    """A file or setting the user gave that cannot be used as it is (names file and field)."""


def os_error_line(e: OSError) -> str:
    """A machine fault (full disk, read-only or missing folder, a file where a folder is
    expected, a name too long) as one line naming the file and what to do."""
    import errno

    path = e.filename if e.filename is not None else _file_being_written(e)
    other = f" -> {e.filename2}" if e.filename2 is not None else ""
    hint = {
        errno.ENOSPC: "free some space and run the same command again (finished items are kept)",
        errno.EDQUOT: "free some space and run the same command again (finished items are kept)",
        errno.EROFS: "the file system is read-only: make it writable or choose another --out, "
        "then run the same command again",
        errno.EACCES: "no permission: make it writable (or readable) or choose another path, "
        "then run the same command again",
        errno.EPERM: "no permission: make it writable (or readable) or choose another path, "
        "then run the same command again",
        errno.ENAMETOOLONG: "the name is too long for the file system: choose a shorter path",
        errno.ENOTDIR: "a file stands where a folder is expected: move it or choose another path",
        errno.EEXIST: "a file stands where a folder is expected: move it or choose another path",
        errno.EISDIR: "a folder stands where a file is expected: move it or choose another path",
        errno.ENOENT: "it does not exist: check the path",
    }.get(e.errno or 0, "check the path and run the same command again")
    return f"{path}{other}: {e.strerror or type(e).__name__}; {hint}"


def _file_being_written(e: BaseException) -> str:
    """The file an OSError without a file name was about to write (a write() or flush() on a
    full disk names none): the innermost frame's open file, else its path variable."""
    import io
    from pathlib import PurePath

    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        values = list(frame.f_locals.items())
        for _, v in values:
            if isinstance(v, io.IOBase) and isinstance(getattr(v, "name", None), str):
                return v.name
        for name, v in values:
            if name in ("path", "tmp", "target", "out", "dest") and isinstance(v, PurePath | str):
                return str(v)
    return "<a file being written>"
