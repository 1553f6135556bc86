"""One root error; the CLI turns any of them into one red line and exit 2."""

from __future__ import annotations


class EnvguardError(Exception):
    """Root of every error envguard raises on purpose. ``str(err)`` is the user-facing line."""


class VenvError(EnvguardError):
    """The target is not a usable Python environment."""


class LockfileError(EnvguardError):
    """A lockfile is missing, unreadable, malformed or from a newer schema."""


class RepoError(EnvguardError):
    """A git repository was asked for and is not usable."""


class CommandError(EnvguardError):
    """A subprocess could not be run or failed."""


class NotRestored(EnvguardError):
    """A restore stopped on purpose (venv in use, uv failed, verify mismatch): the old venv is
    untouched. The CLI exits 1, not 2: the input was fine, the outcome is "not restored"."""
