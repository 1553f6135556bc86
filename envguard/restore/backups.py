"""The old venvs restore keeps beside a venv: listed with their size, and pruned."""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from envguard.model import Record
from envguard.restore import processes, transaction


@dataclass(frozen=True, kw_only=True)
class Backup(Record):
    path: str
    bytes: int  # on disk, hard links counted once
    created: str  # ISO 8601 UTC, from the folder's mtime


@dataclass(frozen=True, kw_only=True)
class Backups(Record):
    venv: str
    backups: tuple[Backup, ...] = ()  # oldest first
    removed: tuple[Backup, ...] = ()
    kept_in_use: tuple[str, ...] = ()  # backups a process still runs from, not removed

    def to_dict(self) -> dict[str, object]:
        return {
            "venv": self.venv,
            "backups": [b.to_dict() for b in self.backups],
            "removed": [b.to_dict() for b in self.removed],
            "kept_in_use": list(self.kept_in_use),
        }


def listing(venv: Path) -> Backups:
    return Backups(venv=str(venv), backups=tuple(_describe(p) for p in transaction.backups(venv)))


def prune(venv: Path, keep: int) -> Backups:
    """Remove all but the ``keep`` newest backups; one a process still uses stays."""
    found = transaction.backups(venv)
    doomed = found[: max(0, len(found) - keep)]
    removed, in_use = [], []
    for path in doomed:
        if processes.using(path):
            in_use.append(str(path))
            continue
        removed.append(_describe(path))
        shutil.rmtree(path)
    return Backups(
        venv=str(venv),
        backups=tuple(_describe(p) for p in transaction.backups(venv)),
        removed=tuple(removed),
        kept_in_use=tuple(in_use),
    )


def _describe(path: Path) -> Backup:
    """``created``: when restore set the venv aside, from the stamp in its name (the folder's
    own mtime is when the old venv was last changed, not when it became a backup)."""
    m = re.search(r"(\d{8})-(\d{6})-[0-9a-f]{6}$", path.name)
    if m:
        day, hms = m.groups()
        created = f"{day[:4]}-{day[4:6]}-{day[6:]}T{hms[:2]}:{hms[2:4]}:{hms[4:]}Z"
    else:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))
    return Backup(path=str(path), bytes=transaction.size_on_disk(path), created=created)
