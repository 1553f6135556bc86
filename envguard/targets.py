"""Which lock, venv and repo a command works on: decided here, once, for every command."""

from __future__ import annotations

from pathlib import Path

from envguard import lockfile
from envguard.errors import VenvError
from envguard.model import Snapshot
from envguard.probes.venv import default_venv_path, locate


def venv(explicit: Path | None) -> Path:
    """The venv a command without a lock works on: --venv, else the active one, else ./.venv."""
    return default_venv_path(explicit)


def venv_for(lock: Snapshot, explicit: Path | None) -> Path:
    """The live venv to compare with ``lock``: --venv, else the venv the lock recorded (the
    training venv, whatever venv happens to be active: pre-commit's, a tool's), else the
    active one or ./.venv (a lock brought from another machine)."""
    if explicit is not None:
        return explicit
    recorded = Path(lock.venv.path)
    if recorded.is_dir():
        return recorded
    try:
        return default_venv_path(None)
    except VenvError:
        raise VenvError(
            f"the lock's venv {recorded} does not exist here: pass --venv PATH"
        ) from None


def lock_for(explicit: Path | None, venv_path: Path | None) -> tuple[Path, Snapshot, Path]:
    """(lockfile, its snapshot, the venv to compare it with) for ``diff [LOCK] [--venv]``."""
    if explicit is not None:
        locked = lockfile.read(explicit)
        return explicit, locked, venv_for(locked, venv_path)
    target = venv(venv_path)
    env = locate(target)
    path = lockfile.find_for_venv(env.name, env.info.path)
    return path, lockfile.read(path), target
