"""The result of ``envguard manage``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.protect import Protection
    from envguard.restore.backups import Backups


@dataclass(frozen=True, kw_only=True)
class ExportDone(Result):
    kind: ClassVar[str] = "export"
    output: str
    format: str
    packages: int

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "format": self.format, "packages": self.packages}


@dataclass(frozen=True, kw_only=True)
class ProtectDone(Result):
    kind: ClassVar[str] = "protect"
    protection: Protection

    def to_dict(self) -> dict[str, Any]:
        p = self.protection
        return {"venv": p.venv, "constraints": p.constraints, "pins": list(p.pins)}


@dataclass(frozen=True, kw_only=True)
class UnprotectDone(Result):
    kind: ClassVar[str] = "unprotect"
    venv: str
    lifted: bool

    def to_dict(self) -> dict[str, Any]:
        return {"venv": self.venv, "lifted": self.lifted}


@dataclass(frozen=True, kw_only=True)
class BackupsDone(Result):
    kind: ClassVar[str] = "backups"
    backups: Backups

    def to_dict(self) -> dict[str, Any]:
        return self.backups.to_dict()
