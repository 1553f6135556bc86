"""``restore --code``: the lock's commit and uncommitted patch put back in the repository
(through :mod:`.checkout`), the user's own work stashed first and said."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import RestoreError
from envguard.model import CodeState, Snapshot
from envguard.record import Record
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
    # symbolic links the snapshot's patch makes, "path -> target": git applies them as
    # links and never writes through one; said because a link may point anywhere
    links: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WorkMoved(Record):
    """Where the user's uncommitted work is now: said the moment it moves."""

    stash: str | None  # None: back in the working tree


def put_back(
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
            files=len(state.changed), links=_links(state),
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
        links=_links(state),
    )


def _links(state: CodeState) -> tuple[str, ...]:
    return tuple(f"{path} -> {target}" for path, target in sorted(state.links().items()))
