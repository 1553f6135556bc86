"""Replace a venv so that its path always holds the old venv or a verified new one.

The new venv is built beside the old one (``<venv>.envguard-new-<id>``), verified, then
swapped in with one atomic exchange; the old one stays as ``<venv>.envguard-backup-<id>``. The
``id`` is the time and a random part, so two restores in one second never share a name. A
journal beside the venv records each phase, so a restore killed at any point (kill -9
included) is reported and put right by the next one, from every phase. A file lock makes a
second concurrent restore of the same venv refuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envguard._fs import atomic_write, exchange
from envguard.errors import NotRestored

NEW, BACKUP = ".envguard-new-", ".envguard-backup-"


@dataclass(frozen=True, kw_only=True)
class Paths:
    venv: Path
    new: Path
    backup: Path
    journal: Path
    lock: Path

    @classmethod
    def for_venv(cls, venv: Path, stamp: str) -> Paths:
        side = venv.parent
        return cls(
            venv=venv,
            new=side / f"{venv.name}{NEW}{stamp}",
            backup=side / f"{venv.name}{BACKUP}{stamp}",
            journal=side / f".{venv.name}.envguard-restore.json",
            lock=side / f".{venv.name}.envguard-restore.lock",
        )


def stamp() -> str:
    """Sorts by time; the random part keeps two restores in one second apart."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


@contextlib.contextmanager
def locked(paths: Paths) -> Iterator[None]:
    """Hold the venv's restore lock, or refuse with the holder's pid."""
    import fcntl

    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise NotRestored(
                f"another envguard restore of {paths.venv} is running (pid {holder}); "
                "wait for it or stop it"
            ) from None
        # the holder before us removes the file as it lets go: a lock on that removed file
        # would exclude no one, so take the one now at the path
        if _inode(paths.lock) == os.fstat(fd).st_ino:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        # no lock file left beside the venv once the restore is over (still held: no race)
        with contextlib.suppress(OSError):
            paths.lock.unlink()
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
    """Put right what a killed restore left; say what was found. Call under the lock."""
    notes = _stale_temp_files(paths)
    try:
        data = json.loads(paths.journal.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except FileNotFoundError:
        return notes
    except (OSError, ValueError):
        finish(paths)
        return [*notes, f"removed an unreadable restore journal {paths.journal}"]
    new = Path(str(data.get("new", "")))
    backup = Path(str(data.get("backup", "")))
    if not (_ours(paths, new, NEW) and _ours(paths, backup, BACKUP)):
        finish(paths)  # a journal naming anything but restore's own folders is not acted on
        return [*notes, f"removed a restore journal naming other folders ({paths.journal})"]
    notes.append(
        f"an earlier restore (pid {data.get('pid', '?')}) stopped while {data.get('phase', '?')}"
    )
    notes.extend(_put_right(paths, new, backup, data.get("phase"), data.get("old_inode")))
    finish(paths)
    return notes


def _put_right(paths: Paths, new: Path, backup: Path, phase: object, old_ino: object) -> list[str]:
    venv = paths.venv
    if phase == "swapping" and not venv.exists():
        # killed between the two renames of the fallback swap: finish the verified move
        source = new if new.is_dir() else backup
        if not source.is_dir():
            return [f"{venv} is missing and nothing was left to put back"]
        source.rename(venv)
        return [f"finished the interrupted swap: {venv} is in place again"]
    if phase == "swapping" and new.is_dir() and old_ino is not None and _inode(new) == old_ino:
        kept = _free(backup)
        new.rename(kept)  # the exchange happened: what sits at `new` is the old venv
        return [f"{venv} is the verified new venv; the old one is kept at {kept}"]
    if new.is_dir():
        shutil.rmtree(new, ignore_errors=True)
        return [f"removed its unfinished venv {new}; {venv} was never touched"]
    return [f"{venv} is in place; nothing was left to clean up"]


_STAMP = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def _ours(paths: Paths, path: Path, marker: str) -> bool:
    """``<venv>.envguard-new-<stamp>`` (or -backup-) beside the venv, and nothing else."""
    prefix = f"{paths.venv.name}{marker}"
    return (
        path.parent == paths.venv.parent
        and path.name.startswith(prefix)
        and _STAMP.match(path.name[len(prefix) :]) is not None
    )


def _free(path: Path) -> Path:
    """``path``, or a fresh sibling name if something already sits there."""
    while path.exists():
        path = path.with_name(f"{path.name}-{secrets.token_hex(2)}")
    return path


def _stale_temp_files(paths: Paths) -> list[str]:
    """Temp files of an atomic journal write that a kill -9 interrupted."""
    notes = []
    for tmp in paths.venv.parent.glob(f".{paths.journal.name}.*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()
            notes.append(f"removed a temp file a killed restore left ({tmp.name})")
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


# --- backups --------------------------------------------------------------------------------


def backups(venv: Path) -> list[Path]:
    """The old venvs restore kept beside ``venv``, oldest first."""
    return sorted(
        (p for p in venv.parent.glob(f"{venv.name}{BACKUP}*") if p.is_dir() and not p.is_symlink()),
        key=lambda p: p.name,
    )


def new_folders(venv: Path) -> list[Path]:
    """The new venvs restores began beside ``venv``, oldest first: the one a restore running
    now builds, and what killed ones left (a kill -9 leaves its folder to the next restore,
    which removes only the one its journal names). Restore's own names only."""
    paths = Paths.for_venv(venv, "")
    found = venv.parent.glob(f"{venv.name}{NEW}*")
    return sorted(
        (p for p in found if p.is_dir() and not p.is_symlink() and _ours(paths, p, NEW)),
        key=lambda p: p.name,
    )


def running(venv: Path) -> tuple[int, Path | None] | None:
    """The restore of ``venv`` running now: its pid (0 until it has written it) and the new
    venv its journal names; None when no one holds the lock. The lock is tested without
    waiting, and only where a file is left (a holder keeps it as long as it holds it)."""
    import fcntl

    paths = Paths.for_venv(venv, "")
    try:
        fd = os.open(paths.lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # a killed restore's file: closing lets go at once
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
    finally:
        os.close(fd)
    return (int(pid) if pid.isdigit() else 0), _journal_new(paths, pid)


def _journal_new(paths: Paths, pid: str) -> Path | None:
    """The new venv the journal names, if the restore ``pid`` wrote it."""
    try:
        data = json.loads(paths.journal.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or str(data.get("pid")) != pid:
        return None
    return Path(str(data.get("new", "")))
