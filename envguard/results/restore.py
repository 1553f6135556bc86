"""The results of ``envguard restore``: its plan, shown before anything changes, and what it
did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.restore.plan import Plan
    from envguard.restore.steps import Request, Restored


@dataclass(frozen=True, kw_only=True)
class RestorePlanned:
    """The first half of a restore: what was asked and the venv step's plan, shown (and the
    venv's replacing confirmed) before anything is changed. No envelope of its own: --json
    prints the run's result, which holds the plan too."""

    request: Request
    plan: Plan | None  # None without a venv step (--code, --cache)
    unchanged: bool = False  # the venv already matches the lock: nothing is rebuilt

    @property
    def dry_run(self) -> bool:
        return self.request.dry_run

    @property
    def replaces(self) -> str | None:
        """The venv this restore would replace, which is confirmed first; None where it
        replaces none: a dry run, a venv that matches, a new path, no venv step."""
        if self.plan is None or self.dry_run or self.unchanged:
            return None
        return self.plan.venv if self.plan.replaces_existing else None


@dataclass(frozen=True, kw_only=True)
class RestoreDone(Result):
    kind: ClassVar[str] = "restore"
    result: Restored

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def failure(self) -> str | None:
        """The error line of a restore that left a part undone, as the boundary says an
        error: its parts are in the result (--json's too), and which failed and why here."""
        if self.result.error is None:
            return None
        return ("not restored: " if self.exit_code == 1 else "") + self.result.error

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        for key in ("plan", "venv", "caches", "code", "saved", "error"):
            out.setdefault(key, None)
        return out
