"""Host facts: informational, for comparing nodes."""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.report import Change
from envguard.model import Snapshot


def changes(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.host.to_dict(), new.host.to_dict()
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            yield Change(
                severity="info",
                area="host",
                subject=key.replace("_", " "),
                old=str(a.get(key, "")),
                new=str(b.get(key, "")),
                why="host facts; compare when the same job runs differently on nodes",
            )
