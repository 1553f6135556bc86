"""``restore --cache``: the lock's saved compile caches put back where this venv's torch reads
them (through :mod:`.cache_archive`).

``--all`` puts the caches back before the code, since a code checkout must never take the
cache archive (or the lockfile) with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from envguard import snapshot
from envguard.model import Snapshot
from envguard.record import Record
from envguard.restore import cache_archive


@dataclass(frozen=True, kw_only=True)
class CacheStep(Record):
    archive: str
    dry_run: bool = False
    missing: bool = False  # no caches were saved beside the lock: nothing to restore
    kind: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    files: tuple[int, ...] = ()


def put_back(
    lock_path: Path,
    locked: Snapshot,
    venv: Path,
    *,
    dry_run: bool,
    optional: bool = False,
    allowed: tuple[Path, ...] = (),
    rebuilds_venv: bool = False,
    store: Path | None = None,
) -> CacheStep:
    """``allowed``: the custom cache folders the user lets a lockfile name. A dry run makes
    the real run's every check, so that it refuses what that refuses, in the same words;
    ``rebuilds_venv``: a dry run of a restore that rebuilds the venv first, whose caches are
    checked against the lock's packages, as the real run checks them against the new venv."""
    archive = cache_archive.located(lock_path, locked, store)
    if optional and not archive.is_file():
        return CacheStep(archive=str(archive), dry_run=dry_run, missing=True)
    live = _as_restored(locked) if rebuilds_venv else _live(venv)
    unpacked = cache_archive.restore(
        lock_path, locked, live, allowed=allowed, dry_run=dry_run, store=store
    )
    return CacheStep(
        archive=str(archive),
        dry_run=dry_run,
        kind=tuple(u.kind for u in unpacked),
        paths=tuple(u.path for u in unpacked),
        files=tuple(u.files for u in unpacked),
    )


def _live(venv: Path) -> Snapshot:
    return snapshot.take(venv, default_caches=False, with_code=False)


def _as_restored(locked: Snapshot) -> Snapshot:
    """The venv once restored from the lock, on this machine's GPUs."""
    from envguard.probes import gpu

    return dataclasses.replace(locked, gpu=gpu.probe())
