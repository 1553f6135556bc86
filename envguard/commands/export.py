"""``envguard export``: the lock as a PEP 751 ``pylock.toml``."""

from __future__ import annotations

from pathlib import Path

from envguard import export as pylock_export
from envguard import lockfile, targets
from envguard.config import Config
from envguard.restore.plan import Overrides
from envguard.results.export import ExportDone


def export(
    cfg: Config, lock: Path | None, output: Path, overrides: Overrides, *, resolve: bool
) -> ExportDone:
    pylock_export.check_name(output)
    locked = lockfile.read(targets.lock_path(lock, None, cfg))
    data = pylock_export.pylock(locked, overrides, resolve=resolve)
    pylock_export.write(output, data)
    return ExportDone(output=str(output), format="pylock", packages=len(locked.packages))
