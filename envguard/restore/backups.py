"""The old venvs restore keeps beside a venv: listed with their size, and pruned."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envguard.model import Record
from envguard.restore import processes, transaction


@dataclass(frozen=True, kw_only=True)
class Backup(Record):
    path: str
    bytes: int  # what removing it frees: files linked from uv's cache stay on disk
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
    return Backup(path=str(path), bytes=freed_by_removing(path), created=created)


def freed_by_removing(path: Path) -> int:
    """Bytes removing the tree gives back, in ``du``'s blocks: its folders, and each file
    once, when all its hard links are inside it. uv links a venv's files from its cache, so
    most of a backup stays on disk after it goes (10 GB "on disk", 12 MB freed)."""
    seen: dict[tuple[int, int], int] = {}  # inode: its links inside the tree
    owned: dict[tuple[int, int], os.stat_result] = {}
    total = 0
    for st in _entries(path):
        if stat.S_ISDIR(st.st_mode):
            total += st.st_blocks * 512
            continue
        key = (st.st_dev, st.st_ino)
        seen[key] = seen.get(key, 0) + 1
        owned[key] = st
    return total + sum(st.st_blocks * 512 for k, st in owned.items() if seen[k] >= st.st_nlink)


def _entries(path: Path) -> Iterator[os.stat_result]:
    """lstat of the tree's root and of everything under it, never following a symlink."""
    places = itertools.chain(
        [str(path)],
        (os.path.join(root, n) for root, dirs, files in os.walk(path) for n in (*dirs, *files)),  # noqa: PTH118
    )
    for place in places:
        try:
            st = os.lstat(place)
        except OSError:  # gone meanwhile, or unreadable: nothing it can say it frees
            continue
        yield st
