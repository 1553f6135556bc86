"""The result of ``envguard export``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from envguard.results import Result


@dataclass(frozen=True, kw_only=True)
class ExportDone(Result):
    kind: ClassVar[str] = "export"
    output: str
    format: str
    packages: int
