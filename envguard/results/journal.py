"""The result of ``envguard journal`` and ``run``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.journal import Entry
    from envguard.watch import Watched


@dataclass(frozen=True, kw_only=True)
class LogDone(Result):
    kind: ClassVar[str] = "log"
    journal: str
    entries: tuple[Entry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"journal": self.journal, "entries": [e.to_dict() for e in self.entries]}


@dataclass(frozen=True, kw_only=True)
class RunDone(Result):
    kind: ClassVar[str] = "run"
    watched: Watched
    hint: str = ""  # when it changed the training set critically: how to split it out

    @property
    def exit_code(self) -> int:
        return self.watched.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.watched.journal_path),
            "hint": self.hint,
            **self.watched.entry.to_dict(),
        }
