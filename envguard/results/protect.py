"""The results of ``envguard protect`` and ``unprotect``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.protect import Protection


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
