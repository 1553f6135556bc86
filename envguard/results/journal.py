"""The result of ``envguard journal`` and ``run``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.journal import Entry
    from envguard.recording import Recorded


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
    recorded: Recorded
    hint: str = ""  # when it changed the training set critically: how to split it out

    @property
    def exit_code(self) -> int:
        return self.recorded.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.recorded.journal_path),
            "hint": self.hint,
            **self.recorded.entry.to_dict(),
        }
