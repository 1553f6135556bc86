"""The result of ``envguard backups``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.restore.backups import Backups


@dataclass(frozen=True, kw_only=True)
class BackupsDone(Result):
    kind: ClassVar[str] = "backups"
    backups: Backups

    def to_dict(self) -> dict[str, Any]:
        return self.backups.to_dict()
