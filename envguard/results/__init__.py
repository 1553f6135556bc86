"""One typed result per command: what it found or did, and the exit code that says so.

A result knows nothing of screens; :mod:`envguard.output` renders it as text or as the
versioned JSON envelope. ``kind`` names the command in that envelope.

Each command's result lives in the module named after it (``results/diff.py``…): a command
imports only its own, so ``snapshot`` does not build fifteen classes it never returns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar


class Result:
    kind: ClassVar[str]

    @property
    def exit_code(self) -> int:
        return 0

    @property
    def command_name(self) -> str:
        """The command, as the envelope's ``kind`` names it."""
        return self.kind

    @property
    def error(self) -> str | None:
        return None

    @property
    def wrote_to_stdout(self) -> bool:
        """The command's product went to stdout itself (``snapshot -o /dev/stdout``): what is
        said about it goes to stderr, so that stdout stays that product alone."""
        return False

    def to_dict(self) -> dict[str, Any]:
        """The result's fields, by name and in order (records as their tables): a result
        whose JSON is more or less than its fields says so by its own ``to_dict``."""
        from envguard.record import encode

        return {f.name: encode(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class Failed(Result):
    """What an error is, for ``--json``: the envelope still comes, with ``error`` set."""

    kind: ClassVar[str] = "error"
    command: str
    message: str
    code: int = 2

    @property
    def exit_code(self) -> int:
        return self.code

    @property
    def command_name(self) -> str:
        return self.command

    @property
    def error(self) -> str | None:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {}
