"""Compile caches: moved, gone cold, shrunk, grown. (Whether a cache fits its venv is a
finding of :mod:`envguard.checks`.)"""

from __future__ import annotations

from collections.abc import Iterator

from envguard._units import human_bytes
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change, cache_label
from envguard.model import CompileCache, Snapshot

AREA = named("caches")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    b_by_key = {key(c): c for c in new.caches}
    for a in old.caches:
        b = b_by_key.get(key(a))
        if b is not None:
            yield from _cache(a, b)


def key(c: CompileCache) -> str:
    """One cache across two snapshots: torch's and Triton's by kind (wherever their folder
    is), a custom one by its folder."""
    return c.kind if c.kind != "custom" else f"custom:{c.path}"


def _held(c: CompileCache) -> int:
    """What a cache holds: torch's and Triton's entries (compiled graphs, kernels), or a
    custom cache's files, whose kinds envguard cannot know (JIT-built extensions, AOT
    packages): counted by entries, one would read empty when full."""
    return c.entries if c.kind != "custom" else c.files


def _size(c: CompileCache) -> str:
    if not c.exists:
        return "absent"
    n = _held(c)
    held = f"{n} entr{'y' if n == 1 else 'ies'}" if c.kind != "custom" else _files(n)
    return f"{held} / {human_bytes(c.bytes)}"


def _said(c: CompileCache, compiled: str, built: str) -> str:
    """torch's and Triton's caches hold compiled graphs; a custom one, whatever its code built."""
    return compiled if c.kind != "custom" else built


def _files(n: int) -> str:
    return f"{n} file{'' if n == 1 else 's'}"


def _cache(a: CompileCache, b: CompileCache) -> Iterator[Change]:
    label = cache_label(a.kind, a.path)
    if a.path != b.path:
        yield AREA.change(
            subject=label,
            old=a.path,
            new=b.path,
            why="the cache folder moved; entries under the old path are not used",
        )
    if a.exists and _held(a) > 0 and b.exists and _held(b) == 0 and b.unreadable:
        yield AREA.change(
            subject=label,
            old=_size(a),
            new="unreadable",
            why=f"{label} cannot be read here ({b.unreadable} unreadable): whether it is warm "
            "is unknown",
        )
        return
    if a.exists and _held(a) > 0 and (not b.exists or _held(b) == 0):
        # one word, whether the folder went or only what it held: a run that writes into the
        # path makes a bare folder again, and the cache read "empty" in one screen and "gone"
        # in the next
        state = "gone"
        yield AREA.change(
            subject=label,
            old=_size(a),
            new=state,
            why=f"{label} is {state}: cold, "
            + _said(a, "the first steps will recompile", "what it held is built again when used"),
        )
        return
    if _held(b) and (_held(b) < _held(a) or b.bytes < a.bytes * 0.9):
        yield AREA.change(
            subject=label,
            old=_size(a),
            new=_size(b),
            why="shrunk: "
            + _said(a, "the graphs whose entries went will recompile", "what went is built again"),
        )
    elif a.fingerprint != b.fingerprint and b.exists:
        grew = "grew" if _held(b) > _held(a) else "contents changed"
        yield AREA.change(
            severity="info",
            subject=label,
            old=_size(a),
            new=_size(b),
            why=f"{grew}: "
            + _said(a, "graphs compiled since the snapshot", "written since the snapshot"),
        )
