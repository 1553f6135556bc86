"""The result of ``envguard fleet``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.fleet import FleetReport
    from envguard.targets import Resnapshot


@dataclass(frozen=True, kw_only=True)
class FleetDone(Result):
    kind: ClassVar[str] = "fleet"
    report: FleetReport
    fail_on: str
    lock: str = ""  # the lockfile the nodes were compared with, absolute
    accept: Resnapshot | None = None  # how to record drift that was meant (none: no drift)

    @property
    def exit_code(self) -> int:
        return 1 if self.report.drifted() else 2 if self.report.problems else 0

    def to_dict(self) -> dict[str, Any]:
        # problems and notes always, as diff's notes: a reader need not guess an absent key
        report = {"problems": [], "notes": [], **self.report.to_dict()}
        for i, node in enumerate(report["nodes"]):  # absolute in JSON, as every path there
            node["file"] = os.path.normpath(Path(node["file"]).absolute())
            # a reader indexes these on every node, the agreeing ones too
            report["nodes"][i] = {"differs": [], "changes": [], **node}
        return {"lockfile": self.lock, **report, "fail_on": self.fail_on}
