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
from envguard.errors import RestoreError
from envguard.model import Record, Snapshot
from envguard.restore import cache_archive, checkout


@dataclass(frozen=True, kw_only=True)
class CodeStep(Record):
    root: str
    head: str  # where HEAD is (or would be) after the step
    snapshot_head: str = ""  # the snapshot's commit: another than ``head`` when HEAD stays
    dry_run: bool = False
    branch: str | None = None
    saved: str | None = None  # where the user's uncommitted work went
    files: int = 0  # files the snapshot's patch touches
    kept: tuple[str, ...] = ()
    back: str = ""  # how to return to where the user was
    recovered: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WorkMoved(Record):
    """Where the user's uncommitted work is now: said the moment it moves."""

    stash: str | None  # None: back in the working tree


@dataclass(frozen=True, kw_only=True)
class CacheStep(Record):
    archive: str
    dry_run: bool = False
    missing: bool = False  # no caches were saved beside the lock: nothing to restore
    kind: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    files: tuple[int, ...] = ()


def caches(
    lock_path: Path,
    locked: Snapshot,
    venv: Path,
    *,
    dry_run: bool,
    optional: bool = False,
    allowed: tuple[Path, ...] = (),
    rebuilds_venv: bool = False,
) -> CacheStep:
    """``allowed``: the custom cache folders the user lets a lockfile name. A dry run makes
    the real run's every check, so that it refuses what that refuses, in the same words;
    ``rebuilds_venv``: a dry run of a restore that rebuilds the venv first, whose caches are
    checked against the lock's packages, as the real run checks them against the new venv."""
    archive = cache_archive.archive_path(lock_path)
    if optional and not archive.is_file():
        return CacheStep(archive=str(archive), dry_run=dry_run, missing=True)
    live = _as_restored(locked) if rebuilds_venv else _live(venv)
    unpacked = cache_archive.restore(lock_path, locked, live, allowed=allowed, dry_run=dry_run)
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


def code(
    lock_path: Path,
    locked: Snapshot,
    repo: Path | None,
    *,
    dry_run: bool,
    on_work: Callable[[str | None], None] | None = None,
) -> CodeStep:
    from envguard import targets

    if locked.code is None:
        raise RestoreError(f"{lock_path}: the snapshot recorded no git repository")
    state = locked.code
    root = repo or targets.code_repo(lock_path, locked)
    if dry_run:
        from envguard import _git

        repo = _git.open_repo(root, required=True)
        head = state.head
        if checkout.stays(repo, state, root):
            head = _git.text(repo, "rev-parse", "HEAD")
        return CodeStep(
            root=str(root), head=head, snapshot_head=state.head, dry_run=True,
            files=len(state.changed),
        )  # fmt: skip
    done = checkout.restore_code(
        state,
        root,
        on_work=on_work,
        own=(lock_path, cache_archive.archive_path(lock_path)),
        venvs=(Path(locked.venv.path),),
    )
    return CodeStep(
        root=done.root,
        head=done.head,
        snapshot_head=state.head,
        branch=done.branch,
        saved=done.saved,
        files=done.patched_files,
        kept=done.kept,
        back=done.back,
        recovered=done.recovered,
    )
