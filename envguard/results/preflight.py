"""The result of ``envguard preflight``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.preflight import Forecast


@dataclass(frozen=True, kw_only=True)
class PreflightDone(Result):
    kind: ClassVar[str] = "preflight"
    forecast: Forecast
    venv: str
    hint: str = ""  # when it would break the training set: the tool venv way instead

    @property
    def exit_code(self) -> int:
        return 1 if self.forecast.critical() else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "venv": self.venv,
            "reasons": list(self.forecast.reasons),
            "hint": self.hint,
            **self.forecast.report.to_dict(),
        }
