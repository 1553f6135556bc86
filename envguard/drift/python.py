"""The interpreter, and whether a venv sees its base interpreter's packages. (What it imports
from there is a package change: :mod:`.packages`.)"""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot

AREA = named("python")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    yield from _interpreter(old, new)
    yield from _system_site(old, new)


def _interpreter(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.python, new.python
    if (a.implementation, a.abi, a.version) == (b.implementation, b.abi, b.version):
        return
    same_abi = (a.implementation, a.abi) == (b.implementation, b.abi)
    why = (
        "a patch release of the same ABI: extensions still load, but the interpreter changed"
        if same_abi and _minor(a.version) == _minor(b.version)
        else "another interpreter ABI: every compiled extension, torch included, is another build"
    )
    yield AREA.change(
        subject="Python",
        old=f"{a.implementation} {a.version}",
        new=f"{b.implementation} {b.version}",
        why=why,
    )


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _system_site(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    flag_a, flag_b = old.venv.system_site_packages, new.venv.system_site_packages
    if flag_a == flag_b:
        return
    n = len(old.inherited if flag_a else new.inherited)
    packages = f"{n} package{'s' if n != 1 else ''}"
    yield AREA.change(
        severity="warning",
        subject="system site-packages",
        old="included" if flag_a else "not included",
        new="included" if flag_b else "not included",
        why=f"the base interpreter's {packages} it imported are gone: imports of them fail"
        if flag_a
        else f"it now also imports the base interpreter's {packages}",
    )
