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
    b_by_key = {_key(c): c for c in new.caches}
    for a in old.caches:
        b = b_by_key.get(_key(a))
        if b is not None:
            yield from _cache(a, b)


def _key(c: CompileCache) -> str:
    return c.kind if c.kind != "custom" else f"custom:{c.path}"


def _size(c: CompileCache) -> str:
    if not c.exists:
        return "absent"
    entries = f"{c.entries} entr{'y' if c.entries == 1 else 'ies'}"
    return f"{entries} / {human_bytes(c.bytes)}"


def _cache(a: CompileCache, b: CompileCache) -> Iterator[Change]:
    label = cache_label(a.kind, a.path)
    if a.path != b.path:
        yield AREA.change(
            subject=label,
            old=a.path,
            new=b.path,
            why="the cache folder moved; entries under the old path are not used",
        )
    if a.exists and a.entries > 0 and b.exists and b.entries == 0 and b.unreadable:
        yield AREA.change(
            subject=label,
            old=_size(a),
            new="unreadable",
            why=f"{label} cannot be read here ({b.unreadable} unreadable): whether it is warm "
            "is unknown",
        )
        return
    if a.exists and a.entries > 0 and (not b.exists or b.entries == 0):
        state = "empty" if b.exists else "gone"
        yield AREA.change(
            subject=label,
            old=_size(a),
            new=state,
            why=f"{label} is {state}: cold, the first steps will recompile",
        )
        return
    if b.entries and (b.entries < a.entries or b.bytes < a.bytes * 0.9):
        yield AREA.change(
            subject=label,
            old=_size(a),
            new=_size(b),
            why="shrunk: the graphs whose entries went will recompile",
        )
    elif a.fingerprint != b.fingerprint and b.exists:
        grew = "grew" if b.entries > a.entries else "contents changed"
        yield AREA.change(
            severity="info",
            subject=label,
            old=_size(a),
            new=_size(b),
            why=f"{grew}: graphs compiled since the snapshot",
        )
