"""``restore --cache`` and ``--code``: the parts of a snapshot beside the venv.

``--all`` runs the venv, then the caches, then the code: the caches before the code, since a
code checkout must never take the cache archive (or the lockfile) with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envguard import snapshot
from envguard.errors import EnvguardError
from envguard.model import Record, Snapshot
from envguard.restore import cache_archive, checkout


@dataclass(frozen=True, kw_only=True)
class CodeStep(Record):
    root: str
    head: str
    dry_run: bool = False
    branch: str | None = None
    saved: str | None = None  # where the user's uncommitted work went
    files: int = 0  # files the snapshot's patch touches
    kept: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CacheStep(Record):
    archive: str
    dry_run: bool = False
    kind: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    files: tuple[int, ...] = ()


def caches(lock_path: Path, locked: Snapshot, venv: Path, *, dry_run: bool) -> CacheStep:
    archive = cache_archive.archive_path(lock_path)
    if dry_run:
        if not archive.is_file():
            raise EnvguardError(f"{archive}: no saved caches (envguard snapshot --save-cache)")
        return CacheStep(archive=str(archive), dry_run=True)
    live = snapshot.take(venv, default_caches=False, with_code=False)
    unpacked = cache_archive.restore(lock_path, locked, live)
    return CacheStep(
        archive=str(archive),
        kind=tuple(u.kind for u in unpacked),
        paths=tuple(u.path for u in unpacked),
        files=tuple(u.files for u in unpacked),
    )


def code(
    lock_path: Path,
    locked: Snapshot,
    repo: Path | None,
    *,
    dry_run: bool,
    on_saved: Callable[[str], None] | None = None,
) -> CodeStep:
    if locked.code is None:
        raise EnvguardError(f"{lock_path}: the snapshot recorded no git repository")
    state = locked.code
    if dry_run:
        root = str(repo) if repo else state.root
        return CodeStep(root=root, head=state.head, dry_run=True, files=len(state.changed))
    done = checkout.restore_code(state, repo, on_saved=on_saved)
    return CodeStep(
        **{
            k: v
            for k, v in dataclasses.asdict(done).items()
            if k in ("root", "head", "branch", "saved", "kept")
        },
        files=done.patched_files,
    )
