"""Replace a venv so that its path always holds the old venv or a verified new one.

The new venv is built beside the old one (``<venv>.envguard-new-<ts>``), verified, then swapped
in with one atomic exchange; the old one stays as ``<venv>.envguard-backup-<ts>``. A journal
beside the venv records each phase, so a restore killed at any point is reported and cleaned
up by the next one. A file lock makes a second concurrent restore of the same venv refuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envguard._fs import atomic_write, exchange
from envguard.errors import NotRestored


@dataclass(frozen=True, kw_only=True)
class Paths:
    venv: Path
    new: Path
    backup: Path
    journal: Path
    lock: Path

    @classmethod
    def for_venv(cls, venv: Path, stamp: str) -> Paths:
        venv = venv.absolute()
        side = venv.parent
        return cls(
            venv=venv,
            new=side / f"{venv.name}.envguard-new-{stamp}",
            backup=side / f"{venv.name}.envguard-backup-{stamp}",
            journal=side / f".{venv.name}.envguard-restore.json",
            lock=side / f".{venv.name}.envguard-restore.lock",
        )


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


@contextlib.contextmanager
def locked(paths: Paths) -> Iterator[None]:
    """Hold the venv's restore lock, or refuse with the holder's pid."""
    import fcntl

    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise NotRestored(
                f"another envguard restore of {paths.venv} is running (pid {holder}); "
                "wait for it or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def record(paths: Paths, phase: str, **extra: object) -> None:
    data = {
        "pid": os.getpid(),
        "phase": phase,
        "new": str(paths.new),
        "backup": str(paths.backup),
        "venv": str(paths.venv),
        **extra,
    }
    atomic_write(paths.journal, json.dumps(data, indent=2).encode())


def finish(paths: Paths) -> None:
    with contextlib.suppress(FileNotFoundError):
        paths.journal.unlink()


def recover(paths: Paths) -> list[str]:
    """Clean up after a restore that was killed; say what was found. Call under the lock."""
    try:
        data = json.loads(paths.journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        finish(paths)
        return [f"removed an unreadable restore journal {paths.journal}"]
    new, backup = Path(data.get("new", "")), Path(data.get("backup", ""))
    phase, old_ino = data.get("phase", "?"), data.get("old_inode")
    notes = [f"an earlier restore (pid {data.get('pid', '?')}) stopped while {phase}"]
    swapped = old_ino is not None and new.is_dir() and _inode(new) == old_ino
    if phase == "swapping" and not paths.venv.exists():
        # killed between the two renames of the fallback: finish the move it had verified
        (new if new.is_dir() else backup).rename(paths.venv)
        notes.append(f"finished the interrupted swap: {paths.venv} is in place again")
    elif swapped:
        new.rename(backup)  # the exchange happened: what sits at `new` is the old venv
        notes.append(f"{paths.venv} is the verified new venv; the old one is kept at {backup}")
    elif new.is_dir():
        shutil.rmtree(new, ignore_errors=True)
        notes.append(f"removed its half-built venv {new}; {paths.venv} was never touched")
    finish(paths)
    return notes


def swap_in(paths: Paths) -> Path | None:
    """Put the verified ``new`` venv at ``venv``; return where the old one went (or None)."""
    if not paths.venv.exists():
        paths.new.rename(paths.venv)
        return None
    record(paths, "swapping", old_inode=_inode(paths.venv))
    if exchange(paths.new, paths.venv):
        paths.new.rename(paths.backup)
    else:
        # No RENAME_EXCHANGE here: two renames, with the path empty between them for
        # microseconds; the journal lets the next run repair a kill in that window.
        paths.venv.rename(paths.backup)
        paths.new.rename(paths.venv)
    return paths.backup


def discard(paths: Paths) -> None:
    shutil.rmtree(paths.new, ignore_errors=True)
    finish(paths)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None
