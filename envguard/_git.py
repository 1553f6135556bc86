"""The one door to git: GitPython opens repositories, every command goes through ``run``.

A failing git command (a locked index, a missing commit, a broken repository) becomes a
:class:`~envguard.errors.RepoError` naming the command and git's own reason, never a
GitPython traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envguard.errors import RepoError

# Pin the settings that change a patch's bytes (or its counts, or a submodule's "-dirty"), so
# that `git apply` takes what we store and two machines with different git configs record the
# same patch. Keys this git does not know (diff.srcPrefix before 2.45) are ignored by it.
PATCH_CONFIG = (
    "-c", "core.quotepath=off", "-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false",
    "-c", "diff.srcPrefix=a/", "-c", "diff.dstPrefix=b/",
    "-c", "diff.relative=false", "-c", "diff.renames=false", "-c", "diff.submodule=short",
    "-c", "diff.ignoreSubmodules=none", "-c", "core.autocrlf=false",
    "-c", "diff.context=3", "-c", "diff.interHunkContext=0", "-c", "diff.algorithm=myers",
    "-c", "diff.indentHeuristic=true", "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.orderFile=/dev/null", "-c", "status.showUntrackedFiles=normal",
)  # fmt: skip
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def has_repo(path: Path) -> bool:
    """A ``.git`` here or above: checked before paying GitPython's import (~50 ms)."""
    return any((p / ".git").exists() for p in (path, *path.absolute().parents))


def open_repo(path: Path, *, required: bool) -> Any:
    """The repository containing ``path``, or None (or a RepoError when ``required``)."""
    if not required and not has_repo(path):
        return None
    try:
        import git
    except ImportError as exc:  # GitPython raises ImportError when no git binary exists
        if required:
            raise RepoError(f"git is not usable here: {exc}") from exc
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        if required:
            raise RepoError(f"{path}: not inside a git repository") from exc
        return None
    except git.GitError as exc:
        raise RepoError(f"{path}: unusable git repository ({_reason(exc)})") from exc
    if repo.bare:
        if required:
            raise RepoError(f"{path}: a bare repository has no working tree")
        return None
    return repo


def run(repo: Any, *args: str, check: bool = True) -> bytes:
    """``git <args>`` in ``repo``; its stdout as bytes. A failure is a RepoError (with
    ``check``) or empty output (without)."""
    import git

    try:
        out = repo.git.execute(
            ["git", *args], stdout_as_string=False, strip_newline_in_stdout=False
        )
    except git.GitCommandError as exc:
        if not check:
            return b""
        where = repo.working_tree_dir
        raise RepoError(f"git {_verb(args)} failed in {where}: {_why(repo, exc)}") from None
    return bytes(out)


def _why(repo: Any, exc: Any) -> str:
    """git's own reason; some commands (stash) fail silently, so a held index lock, the
    usual cause, is named from the repository itself."""
    lock = Path(repo.git_dir) / "index.lock"
    if lock.exists():
        return (
            f"{lock} exists: another git process is running here (or one crashed: "
            "then remove that file)"
        )
    stderr = str(getattr(exc, "stderr", "") or "").strip()
    return _reason(exc) if stderr else f"exit code {getattr(exc, 'status', '?')}"


def text(repo: Any, *args: str, check: bool = True) -> str:
    return run(repo, *args, check=check).decode("utf-8", "replace").strip()


def commit_exists(repo: Any, sha: str) -> bool:
    import git

    if not sha:
        return False
    try:
        repo.git.execute(["git", "cat-file", "-e", f"{sha}^{{commit}}"])
    except git.GitCommandError:
        return False
    return True


def _verb(args: tuple[str, ...]) -> str:
    words = [a for a in args if not a.startswith("-") and "=" not in a]
    return words[0] if words else "command"


SAYS = ("error:", "fatal:")


def _reason(exc: BaseException) -> str:
    """What git says went wrong: its first ``error:``/``fatal:`` line (else its first line that
    is no hint), with the paths it lists after a colon. Its last line is often neither
    (``Aborting``, or a ``hint:`` on how to silence the advice)."""
    lines = _stderr_lines(exc)
    starts = [i for i, ln in enumerate(lines) if ln.startswith(SAYS)]
    starts = starts or [i for i, ln in enumerate(lines) if not ln.startswith("hint:")]
    if not starts:
        return type(exc).__name__
    at = starts[0]
    head = lines[at].removeprefix("error:").removeprefix("fatal:").strip()
    return f"{head} {_listed(lines[at + 1 :])}".strip() if head.endswith(":") else head


def _listed(rest: list[str]) -> str:
    """The paths under a line ending in a colon: indented (checkout), or plain up to the next
    error or hint (add)."""
    indented = bool(rest) and rest[0][:1].isspace()
    items = []
    for line in rest:
        if (indented and not line[:1].isspace()) or line.startswith((*SAYS, "hint:")):
            break
        items.append(line.strip())
    return ", ".join(items[:3]) + (" …" if len(items) > 3 else "")


def _stderr_lines(exc: BaseException) -> list[str]:
    """git's stderr as lines, indentation kept; GitPython wraps it in ``stderr: '…'``."""
    text = str(getattr(exc, "stderr", "") or exc).strip().removeprefix("stderr:").strip()
    return [ln.rstrip() for ln in text.strip("'\"").splitlines() if ln.strip()]
