"""Put a repository back at a snapshot's code: its HEAD, with its uncommitted patch applied.

The user's uncommitted work is stashed first (untracked files included) and the stash is
named in the outcome; envguard's own files (the lockfile being restored from, its journal,
cache archives, envguard.toml) never go into the stash and stay where they are, whatever
the checkout does to the tracked tree. If anything fails, the repository goes back to where
it was and the stash is popped, so that work is never lost. Every git call goes through
``envguard._git``: a locked index is one line, not a traceback.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import _git, catalog
from envguard._fs import atomic_write
from envguard.errors import EnvguardError, NotRestored, RepoError
from envguard.model import CodeState
from envguard.probes import code as code_probe
from envguard.redact import REDACTED


@dataclass(frozen=True, kw_only=True)
class CodeOutcome:
    root: str
    head: str
    branch: str | None
    saved: str | None  # "stash@{0} 1a2b3c4d5e6f (envguard restore …)" when work was kept
    patched_files: int
    kept: tuple[str, ...] = ()  # envguard's own files left in place across the checkout


def restore_code(
    state: CodeState, repo_path: Path | None, on_saved: Callable[[str], None] | None = None
) -> CodeOutcome:
    """``on_saved`` hears of the stash as soon as it exists, so the user learns where their
    work went even if a later step fails."""
    repo = _open(repo_path or Path(state.root))
    _require_commit(repo, state.head)
    if REDACTED in state.patch_bytes().decode("utf-8", "replace"):
        raise NotRestored(
            "the snapshot's patch had secret values redacted, so it cannot be "
            "applied byte-exact; nothing was changed"
        )
    origin = _where(repo)
    own = _own_files(repo)
    saved = _stash(repo, list(own))
    if saved and on_saved is not None:
        on_saved(saved)
    try:
        _release(repo, own)
        branch = _checkout(repo, state)
        if state.patch:
            _apply(repo, state.patch_bytes())
        _put_back(repo, own)
        now, _ = code_probe.probe(Path(repo.working_tree_dir), required=True)
        if now is None or not _same_code(now, state):
            raise NotRestored("after applying, the working tree does not match the snapshot")
    except BaseException:
        _back(repo, origin, saved, own)
        raise
    return CodeOutcome(
        root=str(repo.working_tree_dir),
        head=state.head,
        branch=branch,
        saved=saved,
        patched_files=len(state.changed),
        kept=tuple(sorted(own)),
    )


def _open(path: Path) -> Any:
    repo = _git.open_repo(path, required=True)
    assert repo is not None
    return repo


def _same_code(now: CodeState, state: CodeState) -> bool:
    """The working tree is the snapshot's: the same dirty files with the same blobs
    (envguard's own files aside, which are kept as they were)."""

    def files(s: CodeState) -> set[tuple[str, str]]:
        return {(f.path, f.blob or f.sha256) for f in s.changed if not catalog.is_own_file(f.path)}

    if all(f.blob for f in state.changed):
        return files(now) == files(state)
    return now.patch_sha256 == state.patch_sha256


def _require_commit(repo: Any, head: str) -> None:
    if not head:
        raise EnvguardError("the snapshot's repository had no commits: nothing to check out")
    if not _git.commit_exists(repo, head):
        raise NotRestored(
            f"commit {head[:12]} is not in {repo.working_tree_dir}; fetch it (git fetch --all) "
            "and run restore again. Nothing was changed"
        )


def _where(repo: Any) -> str:
    try:
        return str(repo.active_branch.name)
    except TypeError:
        return str(repo.head.commit.hexsha)


def _own_files(repo: Any) -> dict[str, bytes]:
    """envguard's own files in the working tree, tracked or not, and their bytes."""
    listed = _git.run(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    root = Path(repo.working_tree_dir)
    out = {}
    for rel in listed.decode("utf-8", "surrogateescape").split("\0"):
        if rel and catalog.is_own_file(rel) and (root / rel).is_file():
            out[rel] = (root / rel).read_bytes()
    return out


def _stash(repo: Any, own: list[str]) -> str | None:
    """Stash the user's uncommitted work, untracked files included, envguard's own not."""
    keep_out = [f":(exclude,literal){rel}" for rel in own]
    status = _git.text(repo, "status", "--porcelain", "-uall", "--", ".", *keep_out)
    if not status:
        return None
    message = f"envguard restore {time.strftime('%Y-%m-%d %H:%M:%S')}"
    _git.run(repo, "stash", "push", "--include-untracked", "-m", message, "--", ".", *keep_out)
    sha = _git.text(repo, "rev-parse", "stash@{0}")
    return f"stash@{{0}} {sha[:12]} ({message}); `git stash pop` brings it back"


def _release(repo: Any, own: dict[str, bytes]) -> None:
    """Let the checkout move own files freely (their bytes are held and put back after):
    tracked ones as HEAD has them, untracked ones out of its way."""
    if not own:
        return
    listed = _git.run(repo, "ls-files", "-z", "--", *(f":(literal){rel}" for rel in own))
    tracked = {t for t in listed.decode("utf-8", "surrogateescape").split("\0") if t}
    if tracked:
        _git.run(repo, "checkout", "HEAD", "--", *(f":(literal){t}" for t in tracked))
    root = Path(repo.working_tree_dir)
    for rel in own.keys() - tracked:
        (root / rel).unlink(missing_ok=True)


def _put_back(repo: Any, own: dict[str, bytes]) -> None:
    root = Path(repo.working_tree_dir)
    for rel, data in own.items():
        path = root / rel
        if not path.is_file() or path.read_bytes() != data:
            atomic_write(path, data)


def _checkout(repo: Any, state: CodeState) -> str | None:
    heads = {h.name: h for h in repo.heads}
    branch = state.branch
    if branch is not None and branch in heads and heads[branch].commit.hexsha == state.head:
        _git.run(repo, "checkout", "--quiet", branch)
        return branch
    _git.run(repo, "checkout", "--quiet", "--detach", state.head)
    return None


def _apply(repo: Any, patch: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".patch") as fh:
        fh.write(patch)
        fh.flush()
        try:
            _git.run(repo, "apply", "--binary", "--whitespace=nowarn", fh.name)
        except RepoError as exc:
            raise NotRestored(f"the snapshot's patch does not apply: {exc}") from exc


def _back(repo: Any, origin: str, saved: str | None, own: dict[str, bytes]) -> None:
    """Undo a failed restore: the tree as it was, the stash popped, own files in place."""
    _git.run(repo, "reset", "--quiet", "--hard", check=False)
    keep_out = [f":(exclude,literal){rel}" for rel in own]
    _git.run(repo, "clean", "-fdq", "--", ".", *keep_out, check=False)
    _git.run(repo, "checkout", "--quiet", origin, check=False)
    if saved:
        _git.run(repo, "stash", "pop", "--quiet")
    _put_back(repo, own)
