"""The result of ``envguard journal`` and ``run``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.journal import Entry
    from envguard.price import Price
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
    price: Price | None = None  # --max-cost: what it was priced at, within the most

    @property
    def exit_code(self) -> int:
        return self.recorded.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.recorded.journal_path),
            "hint": self.hint,
            **self.recorded.entry.to_dict(),
            **({"price": self.price.to_dict()} if self.price is not None else {}),
        }


@dataclass(frozen=True, kw_only=True)
class RunRefused(Result):
    """``run --max-cost``: the install priced above the most it may cost, and not run."""

    kind: ClassVar[str] = "run refused"
    price: Price
    max_cost: float  # the share given
    venv: str

    @property
    def command_name(self) -> str:
        return "run"

    @property
    def exit_code(self) -> int:
        return 1

    def to_dict(self) -> dict[str, Any]:
        return {"refused": True, "venv": self.venv, "max_cost": self.max_cost,
                "price": self.price.to_dict()}  # fmt: skip
