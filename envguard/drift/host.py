"""Host facts: informational, for comparing nodes."""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot

AREA = named("host")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    a, b = old.host.to_dict(), new.host.to_dict()
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            sized = key.endswith("_bytes")  # a count of bytes: in units on screen, whole in JSON
            yield AREA.change(
                subject=key.removesuffix("_bytes") if sized else key.replace("_", " "),
                old=str(a.get(key, "")),
                new=str(b.get(key, "")),
                why="host facts; compare when the same job runs differently on nodes",
                unit="bytes" if sized else "",
            )
