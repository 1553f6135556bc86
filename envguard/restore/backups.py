"""The old venvs restore keeps beside a venv: listed with their size, and pruned; and the
half-made new venvs that killed restores left beside it, found, and removed by prune."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import NotRestored
from envguard.record import Record
from envguard.restore import processes, transaction


@dataclass(frozen=True, kw_only=True)
class Backup(Record):
    path: str
    bytes: int  # what removing it frees: files linked from uv's cache stay on disk
    created: str  # ISO 8601 UTC, from the folder's mtime
    interrupted: bool = False  # a half-made new venv a killed restore left, not a backup


@dataclass(frozen=True, kw_only=True)
class Backups(Record):
    venv: str
    backups: tuple[Backup, ...] = ()  # oldest first
    removed: tuple[Backup, ...] = ()
    kept_in_use: tuple[str, ...] = ()  # backups a process still runs from, not removed
    left_over: tuple[Backup, ...] = ()  # what killed restores left: prune removes them
    building: tuple[Backup, ...] = ()  # the new venv a restore running now builds
    running: int | None = None  # that restore's pid (0: not written yet); prune waits for it
    recovered: tuple[str, ...] = ()  # what prune put right first, as the next restore would

    def to_dict(self) -> dict[str, object]:
        return {
            "venv": self.venv,
            "backups": [b.to_dict() for b in self.backups],
            "removed": [b.to_dict() for b in self.removed],
            "kept_in_use": list(self.kept_in_use),
            "left_over": [b.to_dict() for b in self.left_over],
            "building": [b.to_dict() for b in self.building],
            "running": self.running,
            "recovered": list(self.recovered),
        }


def listing(venv: Path) -> Backups:
    run = transaction.running(venv)
    building = run[1] if run else None
    new = transaction.new_folders(venv)
    return Backups(
        venv=str(venv),
        backups=tuple(_describe(p) for p in transaction.backups(venv)),
        left_over=tuple(_describe(p, interrupted=True) for p in new if p != building),
        building=tuple(_describe(p) for p in new if p == building),
        running=run[0] if run else None,
    )


def prune(venv: Path, keep: int) -> Backups:
    """Remove what killed restores left, then all but the ``keep`` newest backups; one a
    process still uses stays."""
    recovered, removed, in_use = _left_over_removed(venv)
    found = transaction.backups(venv)
    for path in found[: max(0, len(found) - keep)]:
        if processes.using(path):
            in_use.append(str(path))
            continue
        removed.append(_describe(path))
        shutil.rmtree(path)
    return dataclasses.replace(
        listing(venv), removed=tuple(removed), kept_in_use=tuple(in_use), recovered=tuple(recovered)
    )


def _left_over_removed(venv: Path) -> tuple[list[str], list[Backup], list[str]]:
    """Under the venv's restore lock, taken without waiting: the journal's folder put right
    as the next restore would (recover: a swap it interrupted is finished, its old venv kept
    as a backup), then every other half-made venv removed. A restore running now holds the
    lock: it builds one of them, and may be putting another right; all stay."""
    paths = transaction.Paths.for_venv(venv, transaction.stamp())
    try:
        with transaction.locked(paths):
            return _put_right(venv, paths)
    except NotRestored:
        return [], [], []


def _put_right(venv: Path, paths: transaction.Paths) -> tuple[list[str], list[Backup], list[str]]:
    found = {p: (_describe(p, interrupted=True), _inode(p)) for p in transaction.new_folders(venv)}
    recovered = transaction.recover(paths)
    in_use = [str(p) for p in transaction.new_folders(venv) if processes.using(p)]
    for path in transaction.new_folders(venv):
        if str(path) not in in_use:
            shutil.rmtree(path)
    # what recover moved (into place, or aside as a backup) is not removed
    kept = {_inode(p) for p in (venv, *transaction.backups(venv))}
    removed = [d for p, (d, ino) in found.items() if not p.exists() and ino not in kept]
    return recovered, removed, in_use


def _inode(path: Path) -> int | None:
    try:
        return path.lstat().st_ino
    except OSError:
        return None


def _describe(path: Path, *, interrupted: bool = False) -> Backup:
    """``created``: when restore set the venv aside, from the stamp in its name (the folder's
    own mtime is when the old venv was last changed, not when it became a backup)."""
    m = re.search(r"(\d{8})-(\d{6})-[0-9a-f]{6}$", path.name)
    if m:
        day, hms = m.groups()
        created = f"{day[:4]}-{day[4:6]}-{day[6:]}T{hms[:2]}:{hms[2:4]}:{hms[4:]}Z"
    else:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))
    return Backup(
        path=str(path), bytes=freed_by_removing(path), created=created, interrupted=interrupted
    )


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
