"""``envguard backups``: the venvs restore kept, listed or pruned."""

from __future__ import annotations

from pathlib import Path

from envguard import targets
from envguard.config import Config
from envguard.restore import backups as kept
from envguard.restore.plan import target_path
from envguard.results.backups import BackupsDone


def backups(cfg: Config, *, venv: Path | None, prune: bool, keep: int) -> BackupsDone:
    target = target_path(targets.recorded(venv, cfg))
    listed = kept.prune(target, keep) if prune else kept.listing(target)
    return BackupsDone(backups=listed)
