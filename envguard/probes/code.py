"""The training code's state through GitPython: HEAD, branch, remote, the dirty patch itself."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from envguard.errors import RepoError
from envguard.model import ChangedFile, CodeState, UntrackedFile
from envguard.redact import is_secret_name, redact_text, strip_url_credentials

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
MAX_UNTRACKED = 500
MAX_CONTENT = 16 * 1024
MAX_CONTENT_TOTAL = 256 * 1024  # keeps a lockfile reviewable when a repo has many scratch files
# Pin the settings that change a patch's bytes, so `git apply` takes what we store.
_DIFF_CONFIG = (
    "-c",
    "core.quotepath=off",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicprefix=false",
    "-c",
    "diff.relative=false",
)
_SECRET_FILES = (".env", ".netrc", ".pypirc", ".npmrc", "id_rsa", "id_ed25519")


def probe(path: Path, *, required: bool) -> tuple[CodeState | None, tuple[str, ...]]:
    repo = _open(path, required=required)
    if repo is None:
        return None, ()
    head = _head(repo)
    raw = _git_bytes(
        repo, "diff", head or EMPTY_TREE, "--binary", "--no-color", "--no-ext-diff", "--no-textconv"
    )
    patch, encoding, redacted = _encode_patch(raw)
    untracked, omitted = _untracked(repo)
    state = CodeState(
        root=str(repo.working_tree_dir),
        head=head,
        branch=_branch(repo),
        remote=_remote(repo),
        dirty=bool(raw),
        patch_sha256=hashlib.sha256(patch.encode()).hexdigest() if patch else "",
        patch=patch,
        patch_encoding=encoding,
        changed=_changed_files(repo, head, patch if encoding == "utf-8" else ""),
        untracked=untracked,
        untracked_omitted=omitted,
    )
    warn = (f"code: {redacted} secret-looking line(s) of the uncommitted patch redacted",)
    return state, warn if redacted else ()


def _open(path: Path, *, required: bool) -> Any:
    if not required and not any((p / ".git").exists() for p in (path, *path.absolute().parents)):
        return None  # GitPython costs ~50 ms to import; skip it where there is no repo
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
    if repo.bare:
        if required:
            raise RepoError(f"{path}: a bare repository has no working tree to snapshot")
        return None
    return repo


def _head(repo: Any) -> str:
    try:
        return str(repo.head.commit.hexsha)
    except ValueError:  # no commits yet
        return ""


def _branch(repo: Any) -> str | None:
    try:
        return str(repo.active_branch.name)
    except TypeError:  # detached HEAD
        return None


def _remote(repo: Any) -> str | None:
    remotes = {r.name: r for r in repo.remotes}
    chosen = remotes.get("origin") or next(iter(remotes.values()), None)
    if chosen is None:
        return None
    try:
        return strip_url_credentials(str(next(iter(chosen.urls))))
    except Exception:  # a remote without url: nothing worth failing a snapshot over
        return None


def _git_bytes(repo: Any, *args: str) -> bytes:
    out = repo.git.execute(
        ["git", *_DIFF_CONFIG, *args], stdout_as_string=False, strip_newline_in_stdout=False
    )
    return bytes(out)


def _encode_patch(raw: bytes) -> tuple[str, str, int]:
    """Redact, then keep the patch as text when TOML can hold it byte-exact, else base64."""
    # surrogateescape carries non-UTF-8 bytes through redaction unchanged.
    redacted, changed = redact_text(raw.decode("utf-8", "surrogateescape"), code=True)
    data = redacted.encode("utf-8", "surrogateescape")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\r"
    if "\r" in text:  # not UTF-8, or CRLF files: base64 is the only byte-exact TOML string
        return base64.b64encode(data).decode(), "base64", changed
    return text, "utf-8", changed


def _changed_files(repo: Any, head: str, patch: str) -> tuple[ChangedFile, ...]:
    stats = _git_bytes(repo, "diff", head or EMPTY_TREE, "--numstat", "-z", "--no-color").decode(
        "utf-8", "replace"
    )
    rows = _parse_numstat_z(stats)
    parts = patch.split("\ndiff --git ")
    sections = [parts[0], *("diff --git " + p for p in parts[1:])] if patch else []
    out = []
    for i, (path, added, removed) in enumerate(rows):
        section = sections[i] if i < len(sections) else ""
        digest = hashlib.sha256(section.encode()).hexdigest() if section else ""
        out.append(ChangedFile(path=path, added=added, removed=removed, sha256=digest))
    return tuple(out)


def _parse_numstat_z(text: str) -> list[tuple[str, int, int]]:
    """``added\\tremoved\\tpath\\0``, or ``added\\tremoved\\t\\0old\\0new\\0`` for a rename."""
    fields = text.split("\0")
    rows, i = [], 0
    while i < len(fields) and fields[i]:
        added, removed, path = fields[i].split("\t", 2)
        if not path:  # rename: the two paths follow
            path = fields[i + 2] if i + 2 < len(fields) else fields[i + 1]
            i += 2
        i += 1
        rows.append(
            (path, -1 if added == "-" else int(added), -1 if removed == "-" else int(removed))
        )
    return rows


def _untracked(repo: Any) -> tuple[tuple[UntrackedFile, ...], int]:
    # envguard's own lockfiles land in the repo by default; they are not the code's state.
    names = sorted(n for n in repo.untracked_files if not n.endswith(".envguard.toml"))
    root = Path(repo.working_tree_dir)
    out, budget = [], MAX_CONTENT_TOTAL
    for name in names[:MAX_UNTRACKED]:
        try:
            size = (root / name).stat().st_size
        except OSError:
            continue
        content = _small_text(root / name, size) if size <= budget else None
        budget -= len(content or "")
        out.append(UntrackedFile(path=name, size=size, content=content))
    return tuple(out), max(0, len(names) - MAX_UNTRACKED)


def _small_text(path: Path, size: int) -> str | None:
    base = path.name.lower()
    if size > MAX_CONTENT or base.startswith(_SECRET_FILES) or is_secret_name(base):
        return None
    if base.endswith((".pem", ".key", ".p12", ".crt")):
        return None
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "\0" in text:
        return None
    return redact_text(text)[0]
