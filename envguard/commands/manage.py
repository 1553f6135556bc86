"""``export``, ``protect``, ``unprotect`` and ``backups``: what acts on a lock or a venv."""

from __future__ import annotations

from pathlib import Path

from envguard import export as export_mod
from envguard import lockfile, protect, targets
from envguard.config import Config
from envguard.restore import backups as backups_mod
from envguard.restore.plan import Overrides, target_path
from envguard.results.manage import BackupsDone, ExportDone, ProtectDone, UnprotectDone


def export(
    cfg: Config, lock: Path | None, output: Path, overrides: Overrides, *, resolve: bool
) -> ExportDone:
    export_mod.check_name(output)
    locked = lockfile.read(targets.lock_path(lock, None, cfg))
    data = export_mod.pylock(locked, overrides, resolve=resolve)
    export_mod.write(output, data)
    return ExportDone(output=str(output), format="pylock", packages=len(locked.packages))


def protect_venv(
    cfg: Config, lock: Path | None, *, venv: Path | None, extra: tuple[str, ...]
) -> ProtectDone:
    _, locked, target = targets.lock_for(lock, venv, cfg)  # the pair diff compares
    return ProtectDone(protection=protect.protect(locked, target, extra))


def unprotect_venv(cfg: Config, *, venv: Path | None) -> UnprotectDone:
    target = targets.recorded(venv, cfg)
    return UnprotectDone(venv=str(target), lifted=protect.unprotect(target))


def backups(cfg: Config, *, venv: Path | None, prune: bool, keep: int) -> BackupsDone:
    target = target_path(targets.recorded(venv, cfg))
    listed = backups_mod.prune(target, keep) if prune else backups_mod.listing(target)
    return BackupsDone(backups=listed)
