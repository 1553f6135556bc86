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


def repo_for(lock: Snapshot) -> Path | None:
    """The repository to compare with ``lock``'s code: the one here when it holds the lock's
    commit (a worktree, a second clone, the same checkout), else the one the lock recorded,
    else whichever is here (None: the working directory's)."""
    from envguard import _git

    here = Path.cwd()
    recorded = Path(lock.code.root) if lock.code else None
    if not _git.has_repo(here):
        return recorded if recorded is not None and recorded.is_dir() else None
    if recorded is None or not recorded.is_dir() or _inside(here, recorded):
        return None
    repo = _git.open_repo(here, required=False)
    if repo is not None and lock.code and _git.commit_exists(repo, lock.code.head):
        return None
    return recorded


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def lock_for(explicit: Path | None, venv_path: Path | None) -> tuple[Path, Snapshot, Path]:
    """(lockfile, its snapshot, the venv to compare it with) for ``diff [LOCK] [--venv]``."""
    if explicit is not None:
        locked = lockfile.read(explicit)
        return explicit, locked, venv_for(locked, venv_path)
    target = venv(venv_path)
    env = locate(target)
    path = lockfile.find_for_venv(env.name, env.info.path)
    return path, lockfile.read(path), target
