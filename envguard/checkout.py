"""Put a repository back at a snapshot's code: its HEAD, with its uncommitted patch applied.

The user's current uncommitted work is stashed first (untracked files included) and the stash
is named in the outcome; if anything fails, the repository goes back to where it was and the
stash is popped, so that work is never lost.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard.errors import EnvguardError, NotRestored
from envguard.model import CodeState
from envguard.probes import code as code_probe
from envguard.redact import REDACTED


@dataclass(frozen=True, kw_only=True)
class CodeOutcome:
    root: str
    head: str
    branch: str | None
    saved: str | None  # "stash@{0} (envguard restore …)" when there was work to keep
    patched_files: int


def restore_code(state: CodeState, repo_path: Path | None) -> CodeOutcome:
    repo = _open(repo_path or Path(state.root))
    _require_commit(repo, state.head)
    if REDACTED in state.patch:
        raise NotRestored(
            "the snapshot's patch had secret values redacted, so it cannot be "
            "applied byte-exact; nothing was changed"
        )
    origin = _where(repo)
    saved = _stash(repo)
    try:
        branch = _checkout(repo, state)
        if state.patch:
            _apply(repo, state.patch_bytes())
        now, _ = code_probe.probe(Path(repo.working_tree_dir), required=True)
        if now is None or now.patch_sha256 != state.patch_sha256:
            raise NotRestored("after applying, the working tree does not match the snapshot")
    except BaseException:
        _back(repo, origin, saved)
        raise
    return CodeOutcome(
        root=str(repo.working_tree_dir),
        head=state.head,
        branch=branch,
        saved=saved,
        patched_files=len(state.changed),
    )


def _open(path: Path) -> Any:
    state, _ = code_probe.probe(path, required=True)  # clear errors for non-repos
    import git

    assert state is not None
    return git.Repo(state.root)


def _require_commit(repo: Any, head: str) -> None:
    if not head:
        raise EnvguardError("the snapshot's repository had no commits: nothing to check out")
    try:
        repo.git.cat_file("-e", f"{head}^{{commit}}")
    except Exception as exc:
        raise NotRestored(
            f"commit {head[:12]} is not in {repo.working_tree_dir}; fetch it (git fetch --all) "
            "and run restore again. Nothing was changed"
        ) from exc


def _where(repo: Any) -> str:
    try:
        return str(repo.active_branch.name)
    except TypeError:
        return str(repo.head.commit.hexsha)


def _stash(repo: Any) -> str | None:
    if not repo.is_dirty(untracked_files=True):
        return None
    message = f"envguard restore {time.strftime('%Y-%m-%d %H:%M:%S')}"
    repo.git.stash("push", "--include-untracked", "-m", message)
    sha = repo.git.rev_parse("stash@{0}")
    return f"stash@{{0}} {sha[:12]} ({message}); `git stash pop` brings it back"


def _checkout(repo: Any, state: CodeState) -> str | None:
    heads = {h.name: h for h in repo.heads}
    if state.branch in heads and heads[state.branch].commit.hexsha == state.head:
        repo.git.checkout(state.branch)
        return state.branch
    repo.git.checkout("--detach", state.head)
    return None


def _apply(repo: Any, patch: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".patch") as fh:
        fh.write(patch)
        fh.flush()
        try:
            repo.git.apply("--binary", "--whitespace=nowarn", fh.name)
        except Exception as exc:
            raise NotRestored(f"the snapshot's patch does not apply: {_first_line(exc)}") from exc


def _back(repo: Any, origin: str, saved: str | None) -> None:
    repo.git.reset("--hard")
    repo.git.clean("-fd")
    repo.git.checkout(origin)
    if saved:
        repo.git.stash("pop")


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "stderr", "") or exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
