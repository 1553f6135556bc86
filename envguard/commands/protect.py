"""``envguard protect`` and ``unprotect``: the lock's pins as the venv's pip and uv constraints."""

from __future__ import annotations

from pathlib import Path

from envguard import protect as protection
from envguard import targets
from envguard.config import Config
from envguard.results.protect import ProtectDone, UnprotectDone


def protect(
    cfg: Config, lock: Path | None, *, venv: Path | None, extra: tuple[str, ...]
) -> ProtectDone:
    _, locked, target = targets.lock_for(lock, venv, cfg)  # the pair diff compares
    return ProtectDone(protection=protection.protect(locked, target, extra))


def unprotect(cfg: Config, *, venv: Path | None) -> UnprotectDone:
    target = targets.recorded(venv, cfg)
    return UnprotectDone(venv=str(target), lifted=protection.unprotect(target))
