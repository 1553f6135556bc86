"""``envguard diff``: the lock against the live environment, or two lockfiles."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from envguard import drift, journal, lockfile, snapshot, targets
from envguard.config import Config
from envguard.drift import DriftReport
from envguard.errors import ArgumentError, JournalError
from envguard.model import Snapshot
from envguard.results.diff import DiffDone
from envguard.snapshot import Progress


def diff(
    cfg: Config,
    locks: tuple[Path, ...] = (),
    *,
    venv: Path | None = None,
    repo: Path | None = None,
    progress: Progress | None = None,
) -> DiffDone:
    cfg.judging()  # before reading anything: a policy that judges nothing is an error
    if len(locks) == 2:
        if venv is not None or repo is not None:
            raise ArgumentError(
                "--venv and --repo name a live environment; two lockfiles compare no live one"
            )
        old = lockfile.read(locks[0])
        new = snapshot.stored_against(old, lockfile.read(locks[1]))
        report = _compared(old, new, locks[0])
        return DiffDone(
            report=apply(report, cfg),
            fail_on=cfg.fail_on,
            lock=_absolute(locks[0]),
            other=_absolute(locks[1]),
        )
    path, old, venv_path = targets.lock_for(locks[0] if locks else None, venv, cfg)
    live = snapshot.live_for(old, venv_path, repo=repo, lock_path=path, progress=progress)
    report = apply(_compared(old, live, path), cfg)
    return DiffDone(
        report=report,
        fail_on=cfg.fail_on,
        lock=_absolute(path),
        venv=live.venv.path,
        # drift that was meant is accepted into this lock; only drift needs saying so
        accept=targets.resnapshot(path, old, venv_path, cfg, repo)
        if report.fails(cfg.fail_on)
        else None,
    )


def _absolute(path: Path) -> str:
    """For JSON: absolute, and without the ``..`` a relative path brought along."""
    return os.path.normpath(path.absolute())


def apply(report: DriftReport, cfg: Config) -> DriftReport:
    """The project's policy: the areas judged, the variables and code paths left out."""
    return cfg.judged(report)


def _compared(old: Snapshot, new: Snapshot, lock: Path) -> DriftReport:
    """``drift.compare`` with the lock's install journal; a damaged journal leaves causes
    to inference, and says so (``envguard log`` names the line)."""
    try:
        entries = journal.read(journal.path_for(lock))
    except JournalError as exc:
        report = drift.compare(old, new)
        return dataclasses.replace(
            report, notes=(*report.notes, f"{exc}; causes are inferred instead")
        )
    return drift.compare(old, new, entries)
