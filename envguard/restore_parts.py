"""``restore --code`` and ``--cache``: the parts of a snapshot beside the venv."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envguard import cache_archive, checkout, snapshot
from envguard.errors import EnvguardError
from envguard.model import Snapshot


def run(
    lock_path: Path,
    locked: Snapshot,
    venv: Path,
    *,
    code: bool,
    repo: Path | None,
    cache: bool,
    dry_run: bool,
) -> dict[str, object]:
    """Restore the code and/or caches; a dict for the JSON envelope and the renderer."""
    result: dict[str, object] = {}
    if code:
        if locked.code is None:
            raise EnvguardError(f"{lock_path}: the snapshot recorded no git repository")
        if dry_run:
            result["code"] = {"head": locked.code.head, "files": len(locked.code.changed)}
        else:
            result["code"] = dataclasses.asdict(checkout.restore_code(locked.code, repo))
    if cache:
        if dry_run:
            result["cache"] = {"archive": str(cache_archive.archive_path(lock_path))}
        else:
            live = snapshot.take(venv, default_caches=False, with_code=False)
            unpacked = cache_archive.restore(lock_path, live)
            result["cache"] = [dataclasses.asdict(u) for u in unpacked]
    return result
