"""One root error, each kind carrying its exit code; the CLI turns any of them into one line.

``str(err)`` is the user-facing line. ``exit_code`` is what ``envguard`` exits with: 2 for
bad input or an environment envguard cannot use, 1 for an outcome that is "no" on purpose
(not restored: the old venv is untouched).

Each error says its concern, so that a caller catches the one it can act on (a damaged
journal leaves causes to inference; a lockfile error does not) and never a neighbour's.
The boundary (:func:`envguard._entry.errors`) catches them all alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from envguard import exits


class EnvguardError(Exception):
    """Root of every error envguard raises on purpose."""

    exit_code = exits.ERROR


class ArgumentError(EnvguardError):
    """A flag or argument that cannot be used as given: a bad value, two that clash, one
    that is missing (the library's arguments too: ``guard(fail_on=...)``)."""


class VenvError(EnvguardError):
    """The target is not a usable Python environment."""


class LockfileError(EnvguardError):
    """A lockfile is missing, unreadable, malformed or from a newer schema."""


class JournalError(EnvguardError):
    """A venv's install journal cannot be read: a damaged line, a newer schema. Not a
    lockfile's error: diff and restore read the lock without it."""


class RepoError(EnvguardError):
    """A git repository was asked for and is not usable, or a git command failed."""


class CommandError(EnvguardError):
    """A subprocess could not be run or failed."""


class ConfigError(EnvguardError):
    """The project's envguard configuration is malformed."""


class UvError(EnvguardError):
    """uv failed; ``missing`` names the pins it could not find ("numpy==2.3.0"). A restore
    whose build uv fails is not restored (the old venv stays)."""

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class UvNotFound(EnvguardError):
    """No uv to run (its package or binary): envguard's own install is broken. Not a
    :class:`UvError`, which a restore says as "not restored": nothing was tried."""


class InterpreterError(EnvguardError):
    """No interpreter to build a venv with: none of the locked version on this machine, a
    ``--python`` that names none, or one of another version."""


class InstallerError(EnvguardError):
    """An install command given to ``preflight`` or ``run`` that envguard refuses (not an
    install, one that installs outside the venv) or whose dry run failed."""


class CacheArchiveError(EnvguardError):
    """Saved compile caches that cannot be written or read: none to save, no archive, one
    that is not envguard's."""


class RestoreError(EnvguardError):
    """A restore refused before it changed anything: the target is not a venv, the
    snapshot recorded no code to put back."""


class ExportError(EnvguardError):
    """A lock that cannot be written as a valid PEP 751 pylock."""


class ProtectError(EnvguardError):
    """``envguard protect`` cannot pin the venv: a package the lock lacks, a pip.conf or
    activate script it will not rewrite."""


class ToolError(EnvguardError):
    """A tool that cannot be added, found or removed."""


class BisectError(EnvguardError):
    """A bisect that cannot start: nothing that differs is a move a trial can make, or
    GOOD's code cannot be rebuilt from the lock (its commit absent, its patch redacted)."""


class BenchmarkError(EnvguardError):
    """The known-good state's benchmark (``snapshot --bench``) cannot be measured: its
    command is not found, breaks, prints no metric or fails. Nothing is written."""


class TrackingError(EnvguardError):
    """A lock in an MLflow or W&B run cannot be fetched: the tracker is not installed, the
    download failed, the URI is refused."""


class ConfinementError(EnvguardError):
    """Data from elsewhere (a lockfile, its patch, a cache archive) that would be written
    outside the folder it is written into, or through a symbolic link: refused, nothing
    written there."""


class NotRestored(EnvguardError):
    """A restore stopped on purpose (venv in use, uv failed, verify mismatch): the old venv is
    untouched. The input was fine; the outcome is "not restored"."""

    exit_code = exits.DRIFT
