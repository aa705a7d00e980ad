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
