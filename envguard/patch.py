"""Sections of a ``git diff``: where one file's part starts, which file it is about, and its
facts (the section's sha256, the blob ids on each side), read byte for byte as git wrote it."""

from __future__ import annotations

import re


def split_patch(patch: str) -> list[str]:
    """A ``git diff`` cut into its per-file sections, each byte for byte as git wrote it
    (its trailing newline included), so that a file's section never depends on its neighbours.

    A section starts at a line beginning ``diff --git ``; no content line can (hunk lines start
    with a space, ``+`` or ``-``; binary patches are base85, which has no space).
    """
    starts = [m.start() for m in _SECTION.finditer(patch)]
    if not starts:
        return [patch] if patch else []
    if starts[0] != 0:
        starts.insert(0, 0)
    return [patch[a:b] for a, b in zip(starts, [*starts[1:], len(patch)], strict=True)]


_SECTION = re.compile(r"^diff --git ", re.MULTILINE)
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.MULTILINE)


def section_path(section: bytes) -> str | None:
    """The file a section of ``git diff --no-renames`` is about, from its header line
    (``diff --git a/P b/P``: both sides are one path; git quotes unusual names)."""
    line = section.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
    rest = line.removeprefix("diff --git ")
    if rest == line:
        return None
    if rest.startswith('"'):
        return _unquote(rest)
    n = (len(rest) - 5) // 2
    return rest[2 : 2 + n] if rest[:2] == "a/" and rest[n + 2 : n + 5] == " b/" else None


def _unquote(rest: str) -> str | None:
    """git's C-style quoting of ``"a/path"``, the first of the two."""
    import ast

    end, i = None, 1
    while i < len(rest):
        if rest[i] == "\\":
            i += 2
            continue
        if rest[i] == '"':
            end = i
            break
        i += 1
    if end is None:
        return None
    try:
        raw = ast.literal_eval("b" + rest[: end + 1])
    except (ValueError, SyntaxError):
        return None
    text = bytes(raw).decode("utf-8", "surrogateescape")
    return text[2:] if text.startswith("a/") else None


def section_facts(section: bytes) -> tuple[str, str, str]:
    """(sha256 of the section, the file's blob id now, its blob id at HEAD) of one file's part
    of a ``git diff --binary`` (which implies ``--full-index``). A blob id of zeros (a file
    added or deleted) and a section without an index line (a mode change) give "".
    """
    import hashlib

    m = _INDEX.search(section.decode("latin-1"))
    base, blob = (m.group(1), m.group(2)) if m else ("", "")
    return (
        hashlib.sha256(section).hexdigest(),
        "" if set(blob) <= {"0"} else blob,
        "" if set(base) <= {"0"} else base,
    )


_LINK_MODE = re.compile(r"^(?:new file mode 120000|new mode 120000|index \S+ 120000)$", re.M)


def link_target(section: bytes) -> str | None:
    """Where the symbolic link a section makes or changes points (its ``+`` line), or None
    when the section leaves no link (a file, a link deleted). A patch applies a link as a
    link; what is written *under* it must not be written through it."""
    text = section.decode("utf-8", "surrogateescape")
    head, _, body = text.partition("\n@@")
    if not _LINK_MODE.search(head):
        return None
    added = [line[1:] for line in body.split("\n")[1:] if line.startswith("+")]
    return added[-1] if added else None


def is_new_file(section: bytes) -> bool:
    """Whether a section adds its file (or link): ``git diff HEAD`` shows it only once the
    index knows of it, as a staged new file is."""
    head = section.decode("utf-8", "surrogateescape").partition("\n@@")[0]
    return _NEW_FILE.search(head) is not None


_NEW_FILE = re.compile(r"^new file mode \d+$", re.M)
