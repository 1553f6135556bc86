"""The training code's state through git: HEAD, branch, remote, the dirty patch itself.

Each dirty file is recorded with git's blob ids (its content now, and at HEAD), so that its
content, not its neighbours or git's settings, says whether it changed. Taken against a lock
(``base``), the snapshot also records each file that changed between the lock's commit and
HEAD: drift can then tell "the lockfile was committed" (not drift) from "the training script
was committed" (drift), and a dirty change committed as is from one that was not.

Every git command runs through :mod:`envguard._git`, with the settings that change a patch's
bytes pinned (``_git.PATCH_CONFIG``): one machine's ``diff.submodule=log`` must not change
what another reads. HEAD, the branch, whether anything tracked changed and the untracked files
come from one ``git status``; ``git diff`` runs only when something tracked did, and the line
counts are read off its patch (``git diff --numstat`` only when a section cannot say).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envguard import _git, catalog, gitignore, redact
from envguard._fs import read_regular
from envguard.model import ChangedFile, CodeState, HeadMove, MovedFile, UntrackedFile
from envguard.patch import section_facts, section_path, split_patch
from envguard.redact import REDACTED, redact_text, strip_url_credentials

MAX_UNTRACKED = 500
MAX_HASHED = 64 << 20  # untracked files larger than this are compared by size alone
MAX_MOVED_PATCHES = 50
MAX_MOVED_PATCH = 64 * 1024
_DIFF = (
    "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
    "--submodule=short", "--ignore-submodules=none",
)  # fmt: skip
_PATCH = ("--binary", "--full-index")
PROJECT_CONFIG = "pyproject.toml"


def probe(
    path: Path,
    *,
    required: bool,
    base: str | None = None,
    exclude: Iterable[Path] = (),
    own: Iterable[Path] = (),
) -> tuple[CodeState | None, tuple[str, ...]]:
    """``base``: the lock's commit, to record what changed since; ``exclude``: folders inside
    the repository that are not code (the venv, when it lives there); ``own``: files that are
    envguard's whatever their name (the lockfile compared with)."""
    repo = _git.open_repo(path, required=required)
    if repo is None:
        return None, ()
    status, remote = _git.status_and_remote(repo)
    head = status.head
    root = Path(repo.working_tree_dir)
    skip = _relative(root, exclude, folder=True)
    own_paths = _relative(root, own, folder=False)
    # git diff only when status saw a tracked change: else its patch is empty
    raw = _patch(repo, head) if status.changed else b""
    patch, encoding, redacted = _encode_patch(raw)
    untracked, omitted = _untracked(root, status.untracked, skip, own_paths)
    state = CodeState(
        root=str(root),
        head=head,
        branch=status.branch,
        remote=strip_url_credentials(remote) if remote is not None else None,
        dirty=bool(raw),
        patch_sha256=hashlib.sha256(patch.encode()).hexdigest() if patch else "",
        patch=patch,
        patch_encoding=encoding,
        changed=_changed_files(repo, root, head, raw, skip),
        untracked=untracked,
        untracked_omitted=omitted,
        since=_since(repo, base, head, skip) if base is not None and head else None,
        own=own_paths,
        redacted=redacted,
    )
    warn = (f"code: {redacted} secret-looking line(s) of the uncommitted patch redacted",)
    return state, warn if redacted else ()


def _patch(repo: Any, head: str) -> bytes:
    """HEAD against the work tree, byte-exact for ``git apply``."""
    return _git.output(repo, *_git.PATCH_CONFIG, "diff", head or _git.EMPTY_TREE, *_PATCH, *_DIFF)


def _encode_patch(raw: bytes) -> tuple[str, str, int]:
    """Redact, then keep the patch as text when TOML can hold it byte-exact, else base64."""
    raw, binaries = _redact_binaries(raw)
    # surrogateescape carries non-UTF-8 bytes through redaction unchanged.
    redacted, changed = redact_text(raw.decode("utf-8", "surrogateescape"), code=True)
    changed += binaries
    data = redacted.encode("utf-8", "surrogateescape")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\r"
    if "\r" in text:  # not UTF-8, or CRLF files: base64 is the only byte-exact TOML string
        return base64.b64encode(data).decode(), "base64", changed
    return text, "utf-8", changed


def _redact_binaries(raw: bytes) -> tuple[bytes, int]:
    """A binary file's patch is git's zlib + base85 of its content, which text redaction
    cannot see into: decoded, and dropped (the section's header and blob ids stay) when the
    content holds a secret."""
    sections = [s.encode("latin-1") for s in split_patch(raw.decode("latin-1"))]
    out, dropped = [], 0
    for section in sections:
        head, marker, payload = section.partition(b"\nGIT binary patch\n")
        if marker and redact.binary_holds_secrets(_inflate(payload)):
            out.append(head + marker + REDACTED.encode() + b"\n")
            dropped += 1
        else:
            out.append(section)
    return b"".join(out), dropped


def _inflate(payload: bytes) -> bytes:
    """The bytes of git's binary hunks (``literal N`` / ``delta N``, then base85 lines whose
    first letter gives their length)."""
    import zlib

    found, chunk = [], bytearray()
    for line in [*payload.split(b"\n"), b""]:
        if len(line) > 1 and line[:1].isalpha() and not line.startswith((b"literal", b"delta")):
            size = line[0] - 64 if line[:1].isupper() else line[0] - 70
            with contextlib.suppress(ValueError):
                chunk += base64.b85decode(line[1:])[:size]
            continue
        if chunk:
            with contextlib.suppress(zlib.error):
                found.append(zlib.decompress(bytes(chunk)))
            chunk = bytearray()
    return b"".join(found)


def _changed_files(
    repo: Any, root: Path, head: str, raw: bytes, skip: tuple[str, ...]
) -> tuple[ChangedFile, ...]:
    """Each dirty file: +/- lines, its section's hash and its blob ids (taken from the raw,
    unredacted patch: a rotated secret is a changed file)."""
    if not raw:
        return ()
    sections = [s.encode("latin-1") for s in split_patch(raw.decode("latin-1"))]
    rows = _counted(sections)
    if rows is None:
        rows = _numstat(repo, head)
    facts = {}
    for section in sections:
        path = section_path(section)
        if path is not None:
            facts[path] = section_facts(section), b"-dirty" in section
    out = []
    unknown = []
    for path, (added, removed) in sorted(rows.items()):
        if path.startswith(skip):
            continue
        (digest, blob, base_blob), dirty_module = facts.get(path, (("", "", ""), False))
        if _envguard_lines_only(repo, path, root / path, base_blob):
            continue  # the archive's line snapshot --save-cache added: not the code's change
        if dirty_module:
            blob = f"{blob}-dirty-{_submodule_state(root / path)}"
        elif path.rsplit("/", 1)[-1] == PROJECT_CONFIG:
            blob, base_blob = _project_config(repo, root / path), _config_blob(repo, base_blob)
        if not blob and not base_blob:
            unknown.append(path)
        out.append(
            ChangedFile(
                path=_shown(path),
                added=added,
                removed=removed,
                sha256=digest,
                blob=blob,
                base_blob=base_blob,
            )
        )
    return _mode_only(repo, head, tuple(out), set(unknown))


def _counted(sections: list[bytes]) -> dict[str, tuple[int, int]] | None:
    """Each file's added and removed lines read off its section, as ``--numstat`` counts
    them (-1 for a binary); None when a section cannot say: no hunk and no binary patch (a
    mode change or an empty file, binary or not as git's attributes say), a type change's two
    sections, a header that does not parse. Then ``git diff --numstat`` says."""
    rows: dict[str, tuple[int, int]] = {}
    for section in sections:
        path = section_path(section)
        if path is None or path in rows:
            return None
        if _SAME_GITLINK.search(section):
            rows[path] = 0, 0
        elif (at := section.find(b"\n@@ ")) >= 0:  # every line after it is a hunk's
            hunks = section[at:]
            rows[path] = hunks.count(b"\n+"), hunks.count(b"\n-")
        elif b"\nGIT binary patch\n" in section:
            rows[path] = -1, -1
        else:
            return None
    return rows


# A dirty submodule at its recorded commit: git writes a hunk ("-dirty" appended) but no index
# line, and numstat, seeing the same commit on both sides, counts nothing.
_SAME_GITLINK = re.compile(rb"\n-Subproject commit ([0-9a-f]+)\n\+Subproject commit \1-dirty\n")


def _numstat(repo: Any, head: str) -> dict[str, tuple[int, int]]:
    stats = _git.output(
        repo, *_git.PATCH_CONFIG, "diff", head or _git.EMPTY_TREE, "--numstat", "-z", *_DIFF
    )
    return {p: (a, r) for p, a, r in _parse_numstat_z(stats.decode("utf-8", "surrogateescape"))}


def _shown(path: str) -> str:
    """A file name as text: bytes that are not UTF-8 shown as U+FFFD (a lockfile is UTF-8)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _mode_only(
    repo: Any, head: str, files: tuple[ChangedFile, ...], unknown: set[str]
) -> tuple[ChangedFile, ...]:
    """A section without an index line changed only the mode (``chmod +x``): its content is
    HEAD's blob on both sides, which is what says it did not change what runs."""
    if not unknown or not head:
        return files
    listed = _git.output(repo, "ls-tree", "-z", head, "--", *(f":(literal){p}" for p in unknown))
    blobs = {}
    for row in listed.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = row.partition("\t")
        if path:
            blobs[path] = meta.split()[-1]
    shown = {_shown(p): b for p, b in blobs.items()}
    return tuple(
        ChangedFile(**{**f.to_dict(), "blob": shown[f.path], "base_blob": shown[f.path]})
        if f.path in shown and f.added == 0 and f.removed == 0
        else f
        for f in files
    )


def _submodule_state(path: Path) -> str:
    """A dirty submodule's own changes, hashed: its gitlink says only "-dirty"."""
    sub = _git.open_repo(path, required=False)
    if sub is None:
        return "unknown"
    h = hashlib.sha256()
    h.update(_git.output(sub, *_git.PATCH_CONFIG, "diff", "HEAD", *_PATCH, *_DIFF, check=False))
    others = _git.output(sub, "ls-files", "-z", "--others", "--exclude-standard", check=False)
    for rel in sorted(others.split(b"\0")):
        h.update(rel + b"\0")
        target = path / rel.decode("utf-8", "surrogateescape")
        if rel and target.is_file():
            h.update(hashlib.sha256(target.read_bytes()).digest())
    return h.hexdigest()[:16]


def _project_config(repo: Any, path: Path) -> str:
    """pyproject.toml's content less its ``[tool.envguard]`` table: a change to envguard's
    own settings there is not a change of the code."""
    try:
        return _config_identity(path.read_bytes())
    except OSError:
        return ""


def _config_blob(repo: Any, blob: str) -> str:
    if not blob:
        return ""
    return _config_identity(_git.output(repo, "cat-file", "blob", blob, check=False))


def _config_identity(data: bytes) -> str:
    doc = _toml(data)
    if doc is None:
        return "raw-" + hashlib.sha256(data).hexdigest()
    tool = doc.get("tool")
    if isinstance(tool, dict):
        tool.pop("envguard", None)
        if not tool:
            del doc["tool"]
    canonical = json.dumps(doc, sort_keys=True, default=str).encode()
    return "toml-" + hashlib.sha256(canonical).hexdigest()


def _toml(data: bytes) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        doc: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    return doc


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


def _since(repo: Any, base: str, head: str, skip: tuple[str, ...]) -> HeadMove | None:
    """What changed between the lock's commit ``base`` and ``head``, file by file: every
    file (only the patches shown by --show-patch are capped)."""
    if base == head:
        return None
    if base and not _git.commit_exists(repo, base):
        return HeadMove(base=base, found=False)
    raw = _git.output(
        repo, *_git.PATCH_CONFIG, "diff", "--raw", "-z", "--no-abbrev", *_DIFF,
        base or _git.EMPTY_TREE, head,
    )  # fmt: skip
    files = []
    patches = 0
    for path, old_blob, new_blob in _parse_raw_z(raw.decode("utf-8", "surrogateescape")):
        own = path.startswith(skip) or _is_own(repo, path, old_blob, new_blob)
        if path.rsplit("/", 1)[-1] == PROJECT_CONFIG:
            old_blob, new_blob = _config_blob(repo, old_blob), _config_blob(repo, new_blob)
        patch = ""
        if not own and patches < MAX_MOVED_PATCHES:
            patches += 1
            patch = _moved_patch(repo, base or _git.EMPTY_TREE, head, path)
        files.append(
            MovedFile(path=_shown(path), old_blob=old_blob, new_blob=new_blob, own=own, patch=patch)
        )
    return HeadMove(base=base, found=True, files=tuple(files))


def since(root: Path, base: str, head: str) -> HeadMove | None:
    """What changed between two commits of the repository at ``root`` (a stored snapshot
    compared with a lock: a fleet node, or ``diff LOCK_A LOCK_B``); None without a repo."""
    repo = _git.open_repo(root, required=False)
    if repo is None or not head or not _git.commit_exists(repo, head):
        return None
    return _since(repo, base, head, ())


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
    """envguard's own file, a .gitignore whose only change is envguard's lines, or a
    pyproject.toml whose only change is ``[tool.envguard]``."""
    if catalog.is_own_file(path):
        return True
    if new_blob and _envguard_lines_only(repo, path, new_blob, old_blob):
        return True
    if path.rsplit("/", 1)[-1] != PROJECT_CONFIG or not old_blob or not new_blob:
        return False
    return _config_blob(repo, old_blob) == _config_blob(repo, new_blob)


def _envguard_lines_only(repo: Any, path: str, now: Path | str, base_blob: str) -> bool:
    """``path`` is a .gitignore whose content ``now`` (a file, or a blob id) differs from
    its ``base_blob`` ("" for none) by envguard's own lines alone (:mod:`envguard.gitignore`)."""
    if path.rsplit("/", 1)[-1] != gitignore.NAME:
        return False
    data = _read(now) if isinstance(now, Path) else _blob_bytes(repo, now)
    if data is None:
        return False
    base = _blob_bytes(repo, base_blob) if base_blob else b""
    # an empty new .gitignore is not envguard's: something must differ, and only by its lines
    return data.rstrip(b"\n") != base.rstrip(b"\n") and gitignore.theirs(data) == gitignore.theirs(
        base
    )


def is_envguard_gitignore(root: Path, path: str) -> bool:
    """``path``, untracked, is a .gitignore holding envguard's lines and nothing else."""
    return _envguard_lines_only(None, path, root / path, "")


def _blob_bytes(repo: Any, blob: str) -> bytes:
    return _git.output(repo, "cat-file", "blob", blob, check=False)


def _read(path: Path) -> bytes | None:
    try:
        return read_regular(path, 1 << 20)
    except OSError:
        return None


def _moved_patch(repo: Any, base: str, head: str, path: str) -> str:
    raw = _git.output(
        repo, *_git.PATCH_CONFIG, "diff", *_DIFF, base, head, "--", f":(literal){path}",
        check=False,
    )  # fmt: skip
    text, _ = redact_text(raw[:MAX_MOVED_PATCH].decode("utf-8", "replace"), code=True)
    return text + ("\n… (cut)\n" if len(raw) > MAX_MOVED_PATCH else "")


def _relative(root: Path, paths: Iterable[Path], *, folder: bool) -> tuple[str, ...]:
    out = []
    for path in paths:
        try:
            rel = path.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            continue
        if rel.parts:
            out.append(rel.as_posix() + ("/" if folder else ""))
    return tuple(out)


def _untracked(
    root: Path, listed: tuple[str, ...], skip: tuple[str, ...], own: tuple[str, ...]
) -> tuple[tuple[UntrackedFile, ...], int]:
    # envguard's own files and a venv inside the repo are not the code's state. Names as
    # git's status gives them: one that is not UTF-8 must not stop a snapshot.
    names = sorted(
        n
        for n in listed
        if n
        and not catalog.is_own_file(n)
        and n not in own
        and not n.startswith(skip)
        and not is_envguard_gitignore(root, n)
    )
    # By size and hash, never their content: a scratch script or notes file is where secrets
    # live (curl -u user:pass), and the hash alone says whether it changed.
    out = []
    for name in names[:MAX_UNTRACKED]:
        path = root / name
        try:
            size = path.stat().st_size
        except OSError:
            continue
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        out.append(UntrackedFile(path=shown, size=size, blob=_blob_id(path, size)))
    return tuple(out), max(0, len(names) - MAX_UNTRACKED)


def _blob_id(path: Path, size: int) -> str:
    """git's id of a file's content (sha1 of "blob <size>\\0" + content), as git would give
    it if the file were committed."""
    if size > MAX_HASHED:
        return ""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
