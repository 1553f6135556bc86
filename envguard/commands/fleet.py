"""``envguard fleet``: node snapshots against the lock and against each other."""

from __future__ import annotations

import os
from pathlib import Path

from envguard import fleet, lockfile, targets
from envguard.config import Config
from envguard.results.fleet import FleetDone


def compare(cfg: Config, lock: Path, snapshots: tuple[Path, ...]) -> FleetDone:
    locked = lockfile.read(lock)
    report = fleet.compare(locked, fleet.expand(snapshots), cfg.judging())
    # drift that was meant is recorded on a node that has it, from the venv the lock recorded
    accept = targets.resnapshot(lock, locked, Path(locked.venv.path), cfg)
    return FleetDone(
        report=report, fail_on=cfg.fail_on, lock=os.path.normpath(lock.absolute()),
        accept=accept if report.drifted() else None,
    )  # fmt: skip
