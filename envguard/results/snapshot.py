"""The result of ``envguard snapshot``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.model import Snapshot


@dataclass(frozen=True, kw_only=True)
class SnapshotDone(Result):
    """What ``envguard snapshot`` wrote."""

    kind: ClassVar[str] = "snapshot"
    lockfile: str
    snapshot: Snapshot
    archive: str | None = None
    archive_bytes: int = 0
    in_store: bool = False  # the archive went to the project's cache store, by its hash
    gitignore: str | None = None  # the .gitignore that keeps the archive out of git
    gitignore_added: bool = False  # this snapshot wrote its line there
    archive_tracked: bool = False  # git versions the archive all the same (committed before)
    venv_from: str = ""  # why that venv (targets.Chosen.why): the screen's, not the lock's

    @property
    def wrote_to_stdout(self) -> bool:
        from envguard._fs import descriptor

        return descriptor(Path(self.lockfile)) == 1

    def to_dict(self) -> dict[str, Any]:
        out = {"lockfile": self.lockfile, **self.snapshot.to_dict()}
        if self.archive:
            out["archive"] = self.archive
            out["archive_in_store"] = self.in_store
            out["gitignore"] = self.gitignore
            out["archive_tracked"] = self.archive_tracked
        return out
