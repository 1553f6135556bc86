"""The training code: which files differ from what the snapshot ran, committed or not.

A file's content then is its dirty blob in the lock, else its blob at the lock's commit; now
it is its dirty blob, else its blob at HEAD. Only files whose content differs are drift, so
committing the lockfile, or committing a dirty change exactly as it was, is not. Files that
cannot change a run (documentation, the repository's own metadata) are shown as info.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import ChangedFile, CodeState, HeadMove, MovedFile, Snapshot, UntrackedFile

AREA = named("code")

# Files a training run does not read: documentation and the repository's own metadata.
_NOT_RUN = (
    "*.md", "*.rst", "*.adoc", "LICENSE*", "COPYING*", "AUTHORS*", "CHANGELOG*", "NOTICE*",
    ".gitignore", ".gitattributes", ".mailmap", ".github/*", ".gitlab-ci.yml",
    ".pre-commit-config.yaml", "docs/*",
)  # fmt: skip


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    yield from _code(old.code, new.code)


def _code(a: CodeState | None, b: CodeState | None) -> Iterator[Change]:
    if a is None or b is None:
        if a is not None:
            yield AREA.change(
                severity="warning",
                subject="repository",
                old=a.root,
                new="not found here",
                why="the lock's repository is not here, so its code was not compared: "
                "run in the repository, or pass --repo",
            )
        elif b is not None:
            yield AREA.change(
                severity="info",
                subject="repository",
                old="not captured",
                new=b.root,
                why="the lock recorded no repository: its code cannot be compared",
            )
        return
    own = _owner(a, b)
    if a.head == b.head:
        if a.branch != b.branch:
            yield AREA.change(
                severity="info",
                subject="git branch",
                old=a.branch or "detached",
                new=b.branch or "detached",
                why="same commit, another branch name",
            )
        yield from _files(a, b, None, own)
    elif b.since is not None and b.since.found:
        yield from _moved_head(a, b, b.since, own)
    else:
        yield _unknown_head(a, b)
        yield from _files(a, b, None, own)
    yield from _untracked(a, b, own)


def _owner(a: CodeState, b: CodeState) -> Callable[[str], bool]:
    return lambda path: a.is_own(path) or b.is_own(path)


def _config_only(path: str, then: str, now: str) -> bool:
    """A pyproject.toml that holds nothing but ``[tool.envguard]`` on each side, or is absent:
    the probe records such a file by its content less that table, which is then empty. New,
    it is envguard's configuration, as a new table in an existing pyproject.toml already is."""
    if path.rsplit("/", 1)[-1] != "pyproject.toml":
        return False
    return {then, now} <= {"", _no_config()}


@functools.cache
def _no_config() -> str:
    # the probe's own identity of an empty configuration, so that the two never disagree
    from envguard.probes.code import _config_identity

    return _config_identity(b"")


def _not_run(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in _NOT_RUN)


def _unknown_head(a: CodeState, b: CodeState) -> Change:
    if b.since is not None:  # looked for, and not there
        why = (
            f"the snapshot's commit {a.head[:12]} is not in this repository (rebased away, "
            "or not fetched): the code cannot be compared with it"
        )
    else:
        why = "the committed code is not the snapshot's"
    return AREA.change(
        subject="git HEAD",
        old=a.head[:12] or "no commits",
        new=b.head[:12] + (f" on {b.branch}" if b.branch else " (detached)"),
        why=why,
    )


def _moved_head(
    a: CodeState, b: CodeState, since: HeadMove, own: Callable[[str], bool]
) -> Iterator[Change]:
    differing = list(_files(a, b, since, own))
    ours = [m.own or own(m.path) or _config_only(m.path, m.old_blob, m.new_blob)
            for m in since.files]  # fmt: skip
    mine = [m.path for m, o in zip(since.files, ours, strict=True) if o]
    code = [m.path for m, o in zip(since.files, ours, strict=True) if not o]
    if not code:
        what = "only envguard's own files" if mine else "no file"
        why = f"moved by commits that changed {what}" + (f" ({_list(mine)})" if mine else "")
    else:
        why = f"{len(code)} file{'s' if len(code) != 1 else ''} changed by commits since: "
        why += _list(code)
        if not [c for c in differing if c.severity == "critical"]:
            why += "; the working tree has the snapshot's code all the same"
    yield AREA.change(
        severity="info",
        subject="git HEAD",
        old=a.head[:12] or "no commits",
        new=b.head[:12] + (f" on {b.branch}" if b.branch else " (detached)"),
        why=why,
    )
    yield from differing


def _list(paths: list[str], most: int = 4) -> str:
    shown = ", ".join(paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def _files(
    a: CodeState, b: CodeState, since: HeadMove | None, own: Callable[[str], bool]
) -> Iterator[Change]:
    then = {f.path: f for f in a.changed}
    if not a.head and b.head:  # a first commit since: the untracked files then were the code
        then.update({u.path: _as_changed(u) for u in a.untracked if u.blob and u.path not in then})
    now = {f.path: f for f in b.changed}
    moved = {m.path: m for m in since.files} if since else {}
    sections = b.file_patches()
    for path in sorted(set(then) | set(now) | set(moved)):
        # a commit that changed only envguard's part of a file hides no edit on either side
        if own(path) or (path in moved and moved[path].own and path not in then | now):
            continue
        x, y, m = then.get(path), now.get(path), moved.get(path)
        if not _differs(x, y, m) or _config_only(path, *_contents(x, y, m)):
            continue
        yield AREA.change(
            severity="info" if _not_run(path) else AREA.severity,
            subject=path,
            old=_stat(x) if x else "clean",
            new=_stat(y) if y else ("committed" if m else "clean"),
            why=_why(path, x, y, m) + ("; not read by a run" if _not_run(path) else ""),
            patch=sections.get(path, "") if y else (m.patch if m else ""),
        )


def _as_changed(u: UntrackedFile) -> ChangedFile:
    return ChangedFile(path=u.path, added=0, removed=0, sha256="", blob=u.blob)


def _differs(x: ChangedFile | None, y: ChangedFile | None, m: MovedFile | None) -> bool:
    if not all(f.blob or f.base_blob for f in (x, y) if f is not None):
        # no blob ids (a hand-made lock): the patch sections decide
        return x is None or y is None or x.sha256 != y.sha256
    return not _same_blob(*_contents(x, y, m))


def _contents(x: ChangedFile | None, y: ChangedFile | None, m: MovedFile | None) -> tuple[str, str]:
    """The file's content then and now, as blob ids ("" for no file)."""
    then, now = _blob(x, m, then=True), _blob(y, m, then=False)
    base = (x.base_blob if x else y.base_blob if y else "") if m is None else ""
    return (base if then == _UNCHANGED else then), (base if now == _UNCHANGED else now)


def _same_blob(a: str, b: str) -> bool:
    """Blob ids may be abbreviated (locks of older envguards kept git's 7-character index
    lines): one id naming the other's prefix is the same blob."""
    if not a or not b:
        return a == b
    return a.startswith(b) or b.startswith(a)


def _blob(f: ChangedFile | None, m: MovedFile | None, *, then: bool) -> str:
    """The file's content as a git blob id ("" for no file): its dirty blob, else its blob at
    the commit (the lock's for ``then``, HEAD's for now)."""
    if f is not None:
        return f.blob
    if m is not None:
        return m.old_blob if then else m.new_blob
    return _UNCHANGED


# Neither dirty nor changed by commits on this side: its blob at HEAD, which the other side's
# dirty change names as its base.
_UNCHANGED = "\0unchanged"


def _why(path: str, x: ChangedFile | None, y: ChangedFile | None, m: MovedFile | None) -> str:
    if y is not None and x is not None:
        return f"{path}: uncommitted change differs ({_stat(x)} then, {_stat(y)} now)"
    if y is not None:
        return f"{path} has an uncommitted change not in the snapshot ({_stat(y)})"
    if m is not None and x is not None:
        return f"{path} was committed since the snapshot, but not as the snapshot had it"
    if m is not None:
        return f"{path} was changed by commits since the snapshot"
    return f"{path}: the snapshot's uncommitted change ({_stat(x)}) is gone"


def _stat(f: ChangedFile | None) -> str:
    if f is None:
        return ""
    return "binary" if f.added < 0 else f"+{f.added} −{f.removed}"


def _untracked(a: CodeState, b: CodeState, own: Callable[[str], bool]) -> Iterator[Change]:
    x = {f.path: f for f in a.untracked if not own(f.path)}
    y = {f.path: f for f in b.untracked if not own(f.path)}
    unversioned = not a.head and not b.head  # a repository without commits: this is the code
    for path in sorted(set(x) | set(y)):
        fx, fy = x.get(path), y.get(path)
        if fx and fy and _same_untracked(fx, fy):
            continue
        state = "new" if fx is None else "gone" if fy is None else "changed"
        severe = unversioned and state != "new" and not _not_run(path)
        yield AREA.change(
            severity=AREA.severity if severe else "info",
            subject=path,
            old=f"{fx.size} B" if fx else "absent",
            new=f"{fy.size} B" if fy else "absent",
            why=f"untracked file {state}; "
            + ("the repository has no commits, so this is the code" if severe else
               "git does not version it"),
        )  # fmt: skip


def _same_untracked(fx: UntrackedFile, fy: UntrackedFile) -> bool:
    if fx.blob and fy.blob:
        return fx.blob == fy.blob
    return fx.size == fy.size  # past 64 MB a file has no blob id: its size is all we know
