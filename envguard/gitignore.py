"""The ``.gitignore`` lines that keep a compile-cache archive out of git.

``snapshot --save-cache`` writes ``train.envguard-caches.tar.gz`` beside the lock, which the
team commits (``git add lockfiles``): tens of MB of cache in every clone, forever. So, in a
git work tree, snapshot writes or extends the ``.gitignore`` beside the archive with one
anchored line naming it, under a comment saying whose it is. Those lines are envguard's:
a ``.gitignore`` that differs from its committed self (or from nothing) by them alone is
not a change of the code (:func:`theirs`), as ``[tool.envguard]`` in pyproject.toml is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envguard import _git
from envguard._fs import atomic_write, read_regular

NAME = ".gitignore"
MARK = "# envguard: compile-cache archives stay out of git (envguard snapshot --save-cache)"
# An anchored file name (git's pattern escapes, so that "[x]" names itself) ending as an
# archive's does: what :func:`keep_out` writes, and nothing a person would write by hand.
_OURS = re.compile(r"^/(?:[^/\\]|\\[\\*?\[ ])+-caches\.tar\.gz$")
_SPECIAL = re.compile(r"([\\*?\[ ])")
_LIMIT = 1 << 20  # a .gitignore larger than this is no .gitignore envguard edits


@dataclass(frozen=True, kw_only=True)
class Kept:
    """Where the archive's line is: ``added`` by this snapshot or there before; ``tracked``:
    git already versions the archive (committed before), which no .gitignore undoes."""

    gitignore: Path
    added: bool
    tracked: bool


def is_ours(line: str) -> bool:
    """A line :func:`keep_out` writes: its comment, or an archive's anchored name."""
    line = line.rstrip("\r")
    return line == MARK or bool(_OURS.match(line))


def theirs(data: bytes) -> bytes:
    """A .gitignore's content less envguard's lines (and the newlines closing the file, which
    appending may have added): what the project wrote."""
    lines = data.split(b"\n")
    kept = [ln for ln in lines if not is_ours(ln.decode("utf-8", "surrogateescape"))]
    return b"\n".join(kept).rstrip(b"\n")


def keep_out(archive: Path) -> Kept | None:
    """Make git ignore ``archive`` through the .gitignore beside it; None outside a work tree
    (nothing to keep it out of), or for a name a .gitignore line cannot hold."""
    folder = archive.parent.absolute()
    # the lock's folder may not be there yet (the first snapshot makes lockfiles/)
    there = next(p for p in (folder, *folder.parents) if p.exists())
    repo = _git.open_repo(there, required=False)
    if repo is None or _inside_git_dir(folder, Path(repo.git_dir)):
        return None
    if any(c in archive.name for c in "\n\r\x00"):
        return None
    line = "/" + _SPECIAL.sub(r"\\\1", archive.name)
    path = folder / NAME
    try:
        data = read_regular(path, _LIMIT)
    except FileNotFoundError:
        data = b""
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    added = line not in (ln.rstrip("\r") for ln in lines)
    if added:
        text = data.decode("utf-8", "surrogateescape")
        if text and not text.endswith("\n"):
            text += "\n"
        if MARK not in lines:
            text += MARK + "\n"
        atomic_write(path, (text + line + "\n").encode("utf-8", "surrogateescape"))
    return Kept(gitignore=path, added=added, tracked=_tracked(repo, archive))


def _inside_git_dir(folder: Path, git_dir: Path) -> bool:
    try:
        folder.resolve().relative_to(git_dir.resolve())
    except (ValueError, OSError):
        return False
    return True


def _tracked(repo: object, archive: Path) -> bool:
    listed = _git.output(repo, "ls-files", "-z", "--", f":(literal){archive.absolute()}",
                         check=False)  # fmt: skip
    return bool(listed.strip(b"\0"))
