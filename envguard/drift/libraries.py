"""torch's C++ extensions and Triton (the torch family, built for one torch), and the key ML
libraries."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot
from envguard.versions import major_move, same

AREA = named("libraries")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    yield from _family(old, new)
    yield from _libraries(old, new)
    yield from _majors(old, new)


def _family(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a = {b.name: b for b in old.torch_family}
    b = {b.name: b for b in new.torch_family}
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x and y and same(x.version, y.version):
            continue
        why = catalog.why_library(name)
        if x and y and x.variant != y.variant and x.variant and y.variant:
            why = f"{x.variant} → {y.variant} build; {why}"
        yield AREA.change(
            subject=name,
            old=x.version if x else "absent",
            new=y.version if y else "absent",
            why=why,
        )


def _libraries(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    family = {b.name for b in (*old.torch_family, *new.torch_family)} | set(catalog.BUILDS)
    a, b = old.key_libraries, new.key_libraries
    for name in sorted((set(a) | set(b)) - family):
        x, y = a.get(name), b.get(name)
        if x is not None and y is not None and same(x, y):
            continue
        yield AREA.change(
            subject=name,
            old=x or "absent",
            new=y or "absent",
            why=_major_said(x, y) + catalog.why_library(name),
        )


def majors(old: Snapshot, new: Snapshot) -> dict[str, tuple[str, str]]:
    """The watched packages of the ML stack (not key libraries: they have rows anyway) whose
    major version moved: name → (old, new). Each is a row of its own, and still a member of
    the install it came with."""
    was, now = old.versions(), new.versions()
    return {
        n: (was[n], now[n]) for n in sorted(catalog.MAJOR_MOVES.keys() & was.keys() & now.keys())
        if major_move(was[n], now[n]) is not None
    }  # fmt: skip


def _majors(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    for name, (x, y) in majors(old, new).items():
        yield AREA.change(subject=name, old=x, new=y,
                          why=_major_said(x, y) + catalog.MAJOR_MOVES[name])  # fmt: skip


def _major_said(old: str | None, new: str | None) -> str:
    """ "major version 0 → 1: " where it moved, else nothing."""
    moved = major_move(old, new) if old and new else None
    return f"major version {moved[0]} → {moved[1]}: " if moved else ""
