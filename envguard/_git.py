"""The one door to git: every command goes through ``run``, a subprocess of git itself.

A repository is found as git finds it (the nearest ``.git`` folder, or ``.git`` file naming
one), without starting anything: a snapshot outside any repository pays a few ``stat`` calls.
GitPython (~40 ms to import) is loaded only for the API restore's checkout uses (a
repository's branches and HEAD, :class:`Repo`'s last three properties), never on the snapshot
or diff path.

A failing git command (a locked index, a missing commit, a repository owned by another user)
becomes a :class:`~envguard.errors.RepoError` naming the command and git's own reason, never a
traceback.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import cached_property
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
# Each untracked file (not its folder), submodules looked into, no rename search (a staged
# rename is its two paths) and no walk of the history to count commits ahead of upstream.
STATUS = (
    "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all",
    "--ignore-submodules=none", "--no-renames", "--no-ahead-behind",
)  # fmt: skip
_BARE = "bare"


@dataclass(frozen=True)
class Repo:
    """A work tree and its git directory, as GitPython's ``Repo`` names them."""

    working_tree_dir: str
    git_dir: str

    @cached_property
    def gitpython(self) -> Any:
        """GitPython's view of this repository, for restore's checkout and stash."""
        import git

        try:
            return git.Repo(self.working_tree_dir)
        except git.GitError as exc:
            raise RepoError(f"{self.working_tree_dir}: unusable git repository ({exc})") from exc

    @property
    def active_branch(self) -> Any:
        return self.gitpython.active_branch

    @property
    def head(self) -> Any:
        return self.gitpython.head

    @property
    def heads(self) -> Any:
        return self.gitpython.heads


@dataclass(frozen=True)
class Status:
    """What ``git status --porcelain=v2 --branch`` says: HEAD ("" before the first commit),
    the branch (None when detached), the tracked paths that changed, the untracked files."""

    head: str
    branch: str | None
    changed: tuple[str, ...]
    untracked: tuple[str, ...]


def has_repo(path: Path) -> bool:
    """A ``.git`` here or above: what tells a snapshot to read the code at all."""
    return any((p / ".git").exists() for p in (path, *path.absolute().parents))


def open_repo(path: Path, *, required: bool) -> Any:
    """The :class:`Repo` containing ``path``, or None (or a RepoError when ``required``).
    Typed Any as GitPython's was: callers hold it in names they reuse for paths."""
    found = _find(path)
    if isinstance(found, Repo) and _git_found(required):
        return found
    if not required:
        return None
    if found == _BARE:
        raise RepoError(f"{path}: a bare repository has no working tree")
    raise RepoError(f"{path}: not inside a git repository")


def _git_found(required: bool) -> bool:
    """Whether a git executable is on PATH: without one a snapshot has no code to read."""
    import shutil

    if shutil.which("git"):
        return True
    if required:
        raise RepoError("git is not usable here: no git executable on PATH")
    return False


def _find(path: Path) -> Repo | str | None:
    """As GitPython walks up from ``path``: a folder's ``.git`` (a repository, or a file
    naming one: a worktree, a submodule), else the folder itself being a git directory (the
    ``.git`` folder of a work tree, or a bare repository)."""
    # normalized as GitPython did (abspath, not resolve): the root keeps the user's symlinks
    start = Path(os.path.normpath(path.expanduser().absolute()))
    if not start.exists():
        return None
    for folder in (start, *start.parents):
        dotgit = folder / ".git"
        if dotgit.is_file():
            named = _gitfile(dotgit)
            return Repo(str(folder), named) if named else None  # git stops at a broken one
        if _is_git_dir(dotgit):
            return Repo(str(folder), str(dotgit))
        if _is_git_dir(folder):
            return Repo(str(folder.parent), str(folder)) if folder.name == ".git" else _BARE
    return None


def _gitfile(dotgit: Path) -> str | None:
    """The git directory a ``gitdir: PATH`` file names, relative to the file's folder."""
    try:
        text = os.fsdecode(dotgit.read_bytes()[: 1 << 20]).rstrip("\r\n")
    except (OSError, UnicodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    named = os.path.normpath(dotgit.parent / text[len("gitdir: ") :])
    return named if _is_git_dir(Path(named)) else None


def _is_git_dir(folder: Path) -> bool:
    """A HEAD, and objects (or, for a worktree's, a commondir that has them)."""
    return (folder / "HEAD").is_file() and (
        (folder / "objects").is_dir() or (folder / "commondir").is_file()
    )


def status(repo: Repo) -> Status:
    """One ``git status``: HEAD, the branch, what changed and what is untracked."""
    return parse_status(output(repo, *PATCH_CONFIG, *STATUS))


def parse_status(raw: bytes) -> Status:
    """``--porcelain=v2 -z`` records: ``# branch.*`` headers, ``1`` (changed), ``2`` (renamed
    or copied: the original path follows in a field of its own), ``u`` (unmerged), ``?``
    (untracked). Paths are bytes as the file system has them, kept as surrogate escapes."""
    head, branch = "", None
    changed, untracked = [], []
    fields = iter(raw.split(b"\0"))
    for record in fields:
        text = _decoded(record)
        if text.startswith("# branch.oid "):
            head = "" if text.endswith(" (initial)") else text.rsplit(" ", 1)[1]
        elif text.startswith("# branch.head "):
            name = text.removeprefix("# branch.head ")
            branch = None if name == "(detached)" else name
        elif text[:2] in _FIELDS:
            changed.append(text.split(" ", _FIELDS[text[:2]])[-1])
            if text[:2] == "2 ":
                changed.append(_decoded(next(fields, b"")))
        elif text.startswith("? "):
            untracked.append(text[2:])
    return Status(head, branch, tuple(changed), tuple(untracked))


_FIELDS = {"1 ": 8, "2 ": 9, "u ": 10}  # the fields before a record's path


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def status_and_remote(repo: Repo) -> tuple[Status, str | None]:
    """:func:`status`, and the remote's URL read by a ``git config`` that runs meanwhile (a
    third of the probe's time when run after it)."""
    remote = _start(repo, ("config", "-z", "--show-scope", "--get-regexp", _URL_KEYS))
    try:
        now = status(repo)
    finally:
        code, out, _ = _finish(remote)
    return now, remote_url(out if code == 0 else b"")


def remote_url(raw: bytes) -> str | None:
    """``origin``'s URL, else the first remote's, as ``git remote get-url`` gives it (its
    ``url.<base>.insteadOf`` rewrites applied, the remote's name when it has no URL), from
    ``git config --show-scope --get-regexp``; the remotes are those of the repository's own
    config, as GitPython listed them."""
    urls: dict[str, list[str]] = {}
    local: list[str] = []
    rewrites: list[tuple[str, str]] = []  # (prefix, base)
    for scope, key, value in _config_entries(raw):
        if key.startswith("url.") and key.endswith(".insteadof"):
            rewrites.append((value, key[4 : -len(".insteadof")]))
            continue
        name, _, setting = key[len("remote.") :].rpartition(".")
        if not name:  # remote.pushdefault and the like: no remote's own
            continue
        if setting == "url":
            urls.setdefault(name, []).append(value)
        if scope == "local" and name not in local:
            local.append(name)
    chosen = "origin" if "origin" in local else next(iter(local), None)
    return _rewritten(urls.get(chosen, [chosen])[0], rewrites) if chosen else None


_URL_KEYS = r"^(remote\..+|url\..+\.insteadof)$"


def _config_entries(raw: bytes) -> list[tuple[str, str, str]]:
    """``scope\\0key\\nvalue\\0`` triples of ``git config -z --show-scope``."""
    fields = _decoded(raw).split("\0")
    out = []
    for scope, item in zip(fields[::2], fields[1::2], strict=False):
        key, _, value = item.partition("\n")
        out.append((scope, key, value))
    return out


def _rewritten(url: str, rewrites: list[tuple[str, str]]) -> str:
    """git's insteadOf: the longest matching prefix is replaced by its base."""
    best = max((r for r in rewrites if url.startswith(r[0])), key=lambda r: len(r[0]), default=None)
    return best[1] + url[len(best[0]) :] if best else url


def output(repo: Any, *args: str, check: bool = True) -> bytes:
    """``git <args>`` in ``repo``'s work tree; its stdout as bytes. A failure is a RepoError
    (with ``check``) or empty output (without)."""
    code, out, err = _exec(repo, args)
    if code == 0:
        return out
    if not check:
        return b""
    where = repo.working_tree_dir
    raise RepoError(f"git {_verb(args)} failed in {where}: {_why(repo, err, code)}")


def _exec(repo: Any, args: tuple[str, ...]) -> tuple[int, bytes, str]:
    """git's exit status, stdout and stderr."""
    return _finish(_start(repo, args))


def _start(repo: Any, args: tuple[str, ...]) -> subprocess.Popen[bytes]:
    """git started with its messages in English (what ``_reason`` reads), no optional lock
    taken (a snapshot does not write the index it reads, nor waits on a running git for it),
    no GIT_DIFF_OPTS or GIT_EXTERNAL_DIFF of the caller's shell."""
    env = {**os.environ, "LC_ALL": "C", "LANGUAGE": "C", "GIT_OPTIONAL_LOCKS": "0"}
    for name in ("GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF"):
        env.pop(name, None)
    try:
        return subprocess.Popen(
            ["git", *args], cwd=repo.working_tree_dir, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
    except OSError as exc:
        raise RepoError(f"git is not usable here: {exc}") from None


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, bytes, str]:
    # No kill on a ^C (subprocess.run would): git finishes what it started, a stash half
    # made being worse than one made late, and the rollback then sees where git left things.
    with proc:
        out, err = proc.communicate()
    return proc.returncode, out, err.decode("utf-8", "replace")


def _why(repo: Any, stderr: str, code: int) -> str:
    """git's own reason; some commands (stash) fail silently, so a held index lock, the
    usual cause, is named from the repository itself."""
    lock = Path(repo.git_dir) / "index.lock"
    if lock.exists():
        return (
            f"{lock} exists: another git process is running here (or one crashed: "
            "then remove that file)"
        )
    if "detected dubious ownership" in stderr:
        return _not_owned(stderr, repo.working_tree_dir)
    return _reason(stderr) if stderr.strip() else f"exit code {code}"


def _not_owned(stderr: str, where: str) -> str:
    """git refuses a repository another user owns (a clone on a shared disk, a container's
    root reading a mounted checkout): one line with the command git suggests."""
    said = [ln.strip() for ln in stderr.splitlines()]
    fix = next((ln for ln in said if ln.startswith("git config ")), "")
    fix = fix or f"git config --global --add safe.directory {where}"
    return f"{where} is owned by another user, so git will not read it; if you trust it: {fix}"


def text(repo: Any, *args: str, check: bool = True) -> str:
    return output(repo, *args, check=check).decode("utf-8", "replace").strip()


def commit_exists(repo: Any, sha: str) -> bool:
    if not sha:
        return False
    code, _, _ = _exec(repo, ("cat-file", "-e", f"{sha}^{{commit}}"))
    return code == 0


def _verb(args: tuple[str, ...]) -> str:
    words = [a for a in args if not a.startswith("-") and "=" not in a]
    return words[0] if words else "command"


SAYS = ("error:", "fatal:")


def _reason(stderr: str) -> str:
    """What git says went wrong: its first ``error:``/``fatal:`` line (else its first line that
    is no hint), with the paths it lists after a colon. Its last line is often neither
    (``Aborting``, or a ``hint:`` on how to silence the advice)."""
    lines = [ln.rstrip() for ln in stderr.strip().splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith(SAYS)]
    starts = starts or [i for i, ln in enumerate(lines) if not ln.startswith("hint:")]
    if not starts:
        return "git gave no reason"
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
