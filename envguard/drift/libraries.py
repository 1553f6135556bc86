"""torch's C++ extensions and Triton (the torch family, built for one torch), and the key ML
libraries."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot
from envguard.versions import same

AREA = named("libraries")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    yield from _family(old, new)
    yield from _libraries(old, new)


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
            why=catalog.why_library(name),
        )
