"""The result of ``envguard restore``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.restore.command import Result as RestoreResult


@dataclass(frozen=True, kw_only=True)
class RestoreDone(Result):
    kind: ClassVar[str] = "restore"
    result: RestoreResult

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        for key in ("plan", "venv", "caches", "code", "saved", "error"):
            out.setdefault(key, None)
        return out
