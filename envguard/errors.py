"""One root error, each kind carrying its exit code; the CLI turns any of them into one line.

``str(err)`` is the user-facing line. ``exit_code`` is what ``envguard`` exits with: 2 for
bad input or an environment envguard cannot use, 1 for an outcome that is "no" on purpose
(not restored: the old venv is untouched).
"""

from __future__ import annotations


class EnvguardError(Exception):
    """Root of every error envguard raises on purpose."""

    exit_code = 2


class VenvError(EnvguardError):
    """The target is not a usable Python environment."""


class LockfileError(EnvguardError):
    """A lockfile is missing, unreadable, malformed or from a newer schema."""


class RepoError(EnvguardError):
    """A git repository was asked for and is not usable, or a git command failed."""


class CommandError(EnvguardError):
    """A subprocess could not be run or failed."""


class ConfigError(EnvguardError):
    """The project's envguard configuration is malformed."""


class NotRestored(EnvguardError):
    """A restore stopped on purpose (venv in use, uv failed, verify mismatch): the old venv is
    untouched. The input was fine; the outcome is "not restored"."""

    exit_code = 1
