"""``envguard fleet``: node snapshots against the lock and against each other."""

from __future__ import annotations

import os
from pathlib import Path

from envguard import fleet, lockfile
from envguard.config import Config
from envguard.results.fleet import FleetDone


def run(cfg: Config, lock: Path, snapshots: tuple[Path, ...]) -> FleetDone:
    report = fleet.compare(lockfile.read(lock), fleet.expand(snapshots), cfg.judging())
    return FleetDone(report=report, fail_on=cfg.fail_on, lock=os.path.normpath(lock.absolute()))
