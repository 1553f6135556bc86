"""Every other distribution: added and changed ones grouped by install, removed ones."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import grouping
from envguard.drift.report import Change
from envguard.model import Distribution, Snapshot
from envguard.versions import newer, same


def changes(old: Snapshot, new: Snapshot, covered: set[str]) -> Iterator[Change]:
    """``covered`` names (torch, key libraries) have rows of their own but still count in,
    and can root, the group they arrived with."""
    a = {d.name: d for d in old.packages}
    b = {d.name: d for d in new.packages}
    added = [b[n] for n in sorted(b.keys() - a.keys())]
    changed = [
        (a[n], b[n]) for n in sorted(a.keys() & b.keys()) if not same(a[n].version, b[n].version)
    ]
    removed = [a[n] for n in sorted(a.keys() - b.keys()) if n not in covered]
    was, now = old.versions(), new.versions()
    before = {y.name: was[x.name] for x, y in changed}
    for group in grouping.install_groups(added, [y for _, y in changed]):
        if len(group.members) > 1 or group.members[0].name not in covered:
            yield _group_change(group, before, now)
    if removed:
        yield _removed_change(removed)


def _group_change(
    group: grouping.InstallGroup, before: dict[str, str], real: dict[str, str]
) -> Change:
    """``real`` holds torch-family versions as their version.py says (2.11.0+cu130)."""
    members = tuple(
        f"~ {d.name} {before[d.name]} → {real.get(d.name, d.version)}"
        if d.name in before
        else f"+ {d.name} {real.get(d.name, d.version)}"
        for d in group.members
    )
    n_added = sum(m.startswith("+") for m in members)
    n_changed = len(members) - n_added
    if len(members) == 1:
        d = group.members[0]
        if n_changed:
            bump = {True: "upgrade", False: "downgrade", None: "version change"}[
                newer(before[d.name], d.version)
            ]
            return Change(
                severity="warning",
                area="packages",
                subject=d.name,
                old=before[d.name],
                new=d.version,
                why=f"{bump} of a package on the import path",
            )
        return Change(
            severity="warning",
            area="packages",
            subject=d.name,
            old="absent",
            new=d.version,
            why="new package on the import path",
        )
    changed = f"{n_changed} changed" if n_added and n_changed else _count(n_changed, "changed")
    parts = [_count(n_added, "added"), changed]
    text = " and ".join(p for p in parts if p)
    root = f", with {group.root.name} {group.root.version}" if group.root else ""
    when = f" at {group.installed_at}" if group.installed_at else ""
    return Change(
        severity="warning",
        area="packages",
        subject=f"{len(members)} packages",
        old="",
        new=f"{len(members)} packages",
        members=members,
        why=f"{text} together{root}{when}",
    )


def _count(n: int, verb: str) -> str:
    return f"{n} package{'s' if n != 1 else ''} {verb}" if n else ""


def _removed_change(removed: list[Distribution]) -> Change:
    members = tuple(f"- {d.name} {d.version}" for d in removed)
    if len(removed) == 1:
        d = removed[0]
        return Change(
            severity="warning",
            area="packages",
            subject=d.name,
            old=d.version,
            new="absent",
            why="removed: code that imports it fails",
        )
    return Change(
        severity="warning",
        area="packages",
        subject=f"{len(removed)} packages",
        old=f"{len(removed)} packages",
        new="absent",
        members=members,
        why=f"{len(removed)} packages removed: code that imports them fails",
    )
