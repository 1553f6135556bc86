"""The training code's state through GitPython: HEAD, branch, remote, the dirty patch itself.

Taken against a lock (``base``), it also records what changed between the lock's commit and
HEAD, file by file with git's blob ids, so that drift can tell "the lockfile was committed"
(not drift) from "the training script was committed" (drift), and a dirty change that was
since committed as is from one that was not.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envguard import _git, catalog
from envguard.model import (
    ChangedFile,
    CodeState,
    HeadMove,
    MovedFile,
    UntrackedFile,
    section_facts,
    split_patch,
)
from envguard.redact import is_secret_name, redact_text, strip_url_credentials

MAX_UNTRACKED = 500
MAX_CONTENT = 16 * 1024
MAX_CONTENT_TOTAL = 256 * 1024  # keeps a lockfile reviewable when a repo has many scratch files
MAX_MOVED = 500
MAX_MOVED_PATCHES = 50
MAX_MOVED_PATCH = 64 * 1024
_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-renames")
_PATCH = ("--binary", "--full-index")
_SECRET_FILES = (".env", ".netrc", ".pypirc", ".npmrc", "id_rsa", "id_ed25519")
PROJECT_CONFIG = "pyproject.toml"


def probe(
    path: Path,
    *,
    required: bool,
    base: str | None = None,
    exclude: Iterable[Path] = (),
) -> tuple[CodeState | None, tuple[str, ...]]:
    """``base``: the lock's commit, to record what changed since; ``exclude``: folders inside
    the repository that are not code (the venv itself, when it lives there)."""
    repo = _git.open_repo(path, required=required)
    if repo is None:
        return None, ()
    head = _head(repo)
    # --full-index: each file's blob ids, which say whether its content changed
    raw = _git.run(repo, *_git.PATCH_CONFIG, "diff", head or _git.EMPTY_TREE, *_PATCH, *_DIFF)
    patch, encoding, redacted = _encode_patch(raw)
    root = Path(repo.working_tree_dir)
    untracked, omitted = _untracked(repo, root, _relative_dirs(root, exclude))
    state = CodeState(
        root=str(root),
        head=head,
        branch=_branch(repo),
        remote=_remote(repo),
        dirty=bool(raw),
        patch_sha256=hashlib.sha256(patch.encode()).hexdigest() if patch else "",
        patch=patch,
        patch_encoding=encoding,
        changed=_changed_files(repo, head, _stored_bytes(patch, encoding)),
        untracked=untracked,
        untracked_omitted=omitted,
        since=_since(repo, base, head) if base is not None and head else None,
    )
    warn = (f"code: {redacted} secret-looking line(s) of the uncommitted patch redacted",)
    return state, warn if redacted else ()


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


def _stored_bytes(patch: str, encoding: str) -> bytes:
    return base64.b64decode(patch) if encoding == "base64" else patch.encode("utf-8")


def _changed_files(repo: Any, head: str, patch: bytes) -> tuple[ChangedFile, ...]:
    stats = _git.run(
        repo, *_git.PATCH_CONFIG, "diff", head or _git.EMPTY_TREE, "--numstat", "-z", *_DIFF
    )
    rows = _parse_numstat_z(stats.decode("utf-8", "replace"))
    sections = [s.encode("latin-1") for s in split_patch(patch.decode("latin-1"))]
    out = []
    for i, (path, added, removed) in enumerate(rows):
        digest, blob, base_blob = section_facts(sections[i]) if i < len(sections) else ("", "", "")
        out.append(
            ChangedFile(
                path=path,
                added=added,
                removed=removed,
                sha256=digest,
                blob=blob,
                base_blob=base_blob,
            )
        )
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


def _since(repo: Any, base: str, head: str) -> HeadMove | None:
    """What changed between the lock's commit ``base`` and ``head``, file by file."""
    if base == head or not base:
        return None
    if not _git.commit_exists(repo, base):
        return HeadMove(base=base, found=False)
    raw = _git.run(
        repo, *_git.PATCH_CONFIG, "diff", "--raw", "-z", "--no-abbrev", *_DIFF, base, head
    )
    moved = _parse_raw_z(raw.decode("utf-8", "surrogateescape"))
    files = []
    patches = 0
    for path, old_blob, new_blob in moved[:MAX_MOVED]:
        own = _is_own(repo, path, old_blob, new_blob)
        patch = ""
        if not own and patches < MAX_MOVED_PATCHES:
            patches += 1
            patch = _moved_patch(repo, base, head, path)
        files.append(
            MovedFile(path=path, old_blob=old_blob, new_blob=new_blob, own=own, patch=patch)
        )
    return HeadMove(
        base=base, found=True, files=tuple(files), omitted=max(0, len(moved) - MAX_MOVED)
    )


def _parse_raw_z(text: str) -> list[tuple[str, str, str]]:
    """``:oldmode newmode oldsha newsha status\\0path\\0`` rows of ``git diff --raw -z``."""
    fields = text.split("\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        head, path = fields[i], fields[i + 1]
        parts = head.lstrip(":").split()
        if len(parts) < 5:
            continue
        old, new = parts[2], parts[3]
        out.append((path, "" if set(old) <= {"0"} else old, "" if set(new) <= {"0"} else new))
    return out


def _is_own(repo: Any, path: str, old_blob: str, new_blob: str) -> bool:
    """envguard's own file, or a pyproject.toml whose only change is ``[tool.envguard]``."""
    if catalog.is_own_file(path):
        return True
    if path.rsplit("/", 1)[-1] != PROJECT_CONFIG or not old_blob or not new_blob:
        return False
    old, new = _toml_blob(repo, old_blob), _toml_blob(repo, new_blob)
    if old is None or new is None:
        return False
    for doc in (old, new):
        tool = doc.get("tool")
        if isinstance(tool, dict):
            tool.pop("envguard", None)
            if not tool:
                del doc["tool"]
    return old == new


def _toml_blob(repo: Any, blob: str) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    data = _git.run(repo, "cat-file", "blob", blob, check=False)
    try:
        doc: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return doc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None


def _moved_patch(repo: Any, base: str, head: str, path: str) -> str:
    raw = _git.run(repo, *_git.PATCH_CONFIG, "diff", *_DIFF, base, head, "--", path, check=False)
    text, _ = redact_text(raw[:MAX_MOVED_PATCH].decode("utf-8", "replace"), code=True)
    return text + ("\n… (cut)\n" if len(raw) > MAX_MOVED_PATCH else "")


def _relative_dirs(root: Path, exclude: Iterable[Path]) -> tuple[str, ...]:
    out = []
    for path in exclude:
        try:
            rel = path.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            continue
        if rel.parts:
            out.append(rel.as_posix() + "/")
    return tuple(out)


def _untracked(
    repo: Any, root: Path, skip_dirs: tuple[str, ...]
) -> tuple[tuple[UntrackedFile, ...], int]:
    # envguard's own files and a venv inside the repo are not the code's state.
    names = sorted(
        n
        for n in repo.untracked_files
        if not catalog.is_own_file(n) and not n.startswith(skip_dirs)
    )
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
