"""The result of ``envguard preflight``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.preflight import Forecast
    from envguard.price import Price


@dataclass(frozen=True, kw_only=True)
class PreflightDone(Result):
    kind: ClassVar[str] = "preflight"
    forecast: Forecast
    venv: str
    hint: str = ""  # when it would break the training set: the tool venv way instead
    price: Price | None = None  # --bench: what it would cost the lock's benchmark

    @property
    def exit_code(self) -> int:
        """1 when the install would change something critical, or cost the benchmark (or
        break it, or cost what the noise cannot tell from nothing)."""
        from envguard.price import GAIN, NONE

        costs = self.price is not None and self.price.verdict not in (NONE, GAIN)
        return 1 if self.forecast.critical() or costs else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "venv": self.venv,
            "reasons": list(self.forecast.reasons),
            "hint": self.hint,
            **self.forecast.report.to_dict(),
            **({"price": self.price.to_dict()} if self.price is not None else {}),
        }
