"""The result of ``envguard diff``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.drift import DriftReport
    from envguard.targets import Resnapshot


@dataclass(frozen=True, kw_only=True)
class DiffDone(Result):
    """What ``envguard diff`` found, judged by ``fail_on``."""

    kind: ClassVar[str] = "diff"
    report: DriftReport
    fail_on: str
    lock: str
    venv: str = ""  # "" for two lockfiles
    other: str = ""  # the second lockfile, compared with ``lock`` ("" against a venv)
    accept: Resnapshot | None = None  # how to record drift that was meant (none: no drift)

    @property
    def exit_code(self) -> int:
        return 1 if self.report.fails(self.fail_on) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "lockfile": self.lock,
            "venv": self.venv,
            "other_lockfile": self.other,
            "fail_on": self.fail_on,
        }
