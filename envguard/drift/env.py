"""Environment variables that change how a step trains; not what launchers or venvs set."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot

AREA = named("env")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    # locks of older envguards recorded variables now known to be noise (VIRTUAL_ENV)
    a = {k: v for k, v in old.environ.items() if catalog.env_captured(k)}
    b = {k: v for k, v in new.environ.items() if catalog.env_captured(k)}
    launchers = tuple(x for x in (old.launcher, new.launcher) if x)
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y or catalog.set_for_you(name, x, y, launchers):
            continue
        severity, why = catalog.env_rule(name)
        yield AREA.change(
            severity=severity or AREA.severity,
            subject=name,
            old="unset" if x is None else x,
            new="unset" if y is None else y,
            why=why,
        )
