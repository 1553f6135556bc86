"""Every other distribution: added and changed ones grouped by install, removed ones, and
those a --system-site-packages venv imports from its base interpreter."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from envguard import attribution, catalog, grouping
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import ABSENT, Change, Member
from envguard.model import Distribution, Snapshot
from envguard.versions import newer, same

AREA = named("packages")


@dataclass(frozen=True, kw_only=True)
class Delta:
    """The distributions that arrived, moved and went, and the installs they came with."""

    added: tuple[Distribution, ...]
    changed: tuple[Distribution, ...]  # their new side
    removed: tuple[Distribution, ...]
    groups: tuple[grouping.InstallGroup, ...]


def delta(old: Snapshot, new: Snapshot, installs: Sequence[attribution.Install] = ()) -> Delta:
    """``installs``: the journal's records since ``old``; each record that made ``new`` is a
    group of its own (its command), whatever else happened within the same minute. The rest
    is grouped by requirement."""
    a = {d.name: d for d in old.packages}
    b = {d.name: d for d in new.packages}
    added = tuple(b[n] for n in sorted(b.keys() - a.keys()))
    both = sorted(a.keys() & b.keys())
    changed = tuple(b[n] for n in both if not same(a[n].version, b[n].version))
    before = {d.name: a[d.name].version for d in changed}
    groups: list[grouping.InstallGroup] = []
    rest = [*added, *changed]
    for _, names in attribution.behind(new, installs):
        mine = [d for d in rest if d.name in names]
        if mine:
            groups.append(grouping.command_group(mine, before))
            rest = [d for d in rest if d.name not in names]
    groups.reverse()  # claimed newest first (the last command left it), said oldest first
    groups += grouping.install_groups(rest, (), before)
    return Delta(
        added=added,
        changed=changed,
        removed=tuple(a[n] for n in sorted(a.keys() - b.keys())),
        groups=tuple(sorted(groups, key=lambda g: g.installed_at)),
    )


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    """The torch family and the key libraries have rows of their own (:mod:`.libraries`) but
    still count in, and can root, the group they arrived with."""
    yield from _inherited(old, new)
    moved = context.moved if context.moved is not None else delta(old, new)
    covered = _covered(old, new)
    was, now = old.versions(), new.versions()
    before = {d.name: was[d.name] for d in moved.changed}
    for group in moved.groups:
        if len(group.members) > 1 or group.members[0].name not in covered:
            yield _group_change(group, before, now, context.planned)
    removed = [d for d in moved.removed if d.name not in covered]
    if removed:
        yield _removed_change(removed)


def _covered(old: Snapshot, new: Snapshot) -> set[str]:
    """The names with rows of their own: torch, its family and the key libraries."""
    from envguard.drift.libraries import majors

    family = {b.name for b in (*old.torch_family, *new.torch_family)}
    return {*catalog.BUILDS, *family, *old.key_libraries, *new.key_libraries, *majors(old, new)}


def _inherited(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    """What a venv that sees its base interpreter's packages (on both sides: else it is
    :mod:`.python`'s change) imports from there."""
    if not (old.venv.system_site_packages and new.venv.system_site_packages):
        return
    a = {d.name: d.version for d in old.inherited}
    b = {d.name: d.version for d in new.inherited}
    moved = [
        Member(name=n, old=a.get(n, ABSENT), new=b.get(n, ABSENT))
        for n in sorted(set(a) | set(b))
        if n not in a or n not in b or not same(a[n], b[n])
    ]
    if moved:
        yield AREA.change(
            subject="system packages",
            old=f"{len(a)} inherited",
            new=f"{len(b)} inherited",
            members=tuple(moved),
            why=(f"{len(moved)} of the base interpreter's packages the venv imports changed"),
        )


def _group_change(
    group: grouping.InstallGroup, before: dict[str, str], real: dict[str, str], planned: bool
) -> Change:
    """``real`` holds torch-family versions as their version.py says (2.11.0+cu130)."""
    members = tuple(
        Member(name=d.name, old=before.get(d.name, ABSENT), new=real.get(d.name, d.version))
        for d in group.members
    )
    n_added = sum(m.added for m in members)
    n_changed = len(members) - n_added
    if len(members) == 1:
        d = group.members[0]
        if n_changed:
            bump = {True: "upgrade", False: "downgrade", None: "version change"}[
                newer(before[d.name], d.version)
            ]
            return AREA.change(
                subject=d.name,
                old=before[d.name],
                new=d.version,
                why=f"{bump} of a package on the import path",
            )
        return AREA.change(
            subject=d.name,
            old="absent",
            new=d.version,
            why="new package on the import path",
        )
    changed = f"{n_changed} changed" if n_added and n_changed else _count(n_changed, "changed")
    parts = [_count(n_added, "added"), changed]
    text = " and ".join(p for p in parts if p)
    when = f" at {group.installed_at}" if group.installed_at else ""
    tops = group.tops()
    if planned:  # an install not yet run has no time, and is said as one to come
        root = f", with {tops[0].name} {tops[0].version}" if group.root else ""
        why = f"would come in together: {text}{root}"
    elif tops:
        why = _brought(tops, members) + when
    else:
        why = f"{text} together{when}"
    return AREA.change(subject=f"{len(members)} packages", members=members, why=why)


def _brought(tops: Sequence[Distribution], members: Sequence[Member]) -> str:
    """``vllm 0.33.0 and the 134 packages it brought (124 added, 10 changed)``: the install
    named for what it was for, the root (or the roots, when several share it)."""
    names = " and ".join(f"{t.name} {t.version}" for t in tops)
    mine = {t.name for t in tops}
    rest = [m for m in members if m.name not in mine]
    n_added = sum(m.added for m in rest)
    counts = ", ".join(p for p in (f"{n_added} added" if n_added else "",
                                   f"{len(rest) - n_added} changed" if len(rest) > n_added else "")
                       if p)  # fmt: skip
    they = "it" if len(tops) == 1 else "they"
    what = "package" if len(rest) == 1 else f"{len(rest)} packages"
    return f"{names} and the {what} {they} brought ({counts})"


def _count(n: int, verb: str) -> str:
    return f"{n} package{'s' if n != 1 else ''} {verb}" if n else ""


def _removed_change(removed: list[Distribution]) -> Change:
    members = tuple(Member(name=d.name, old=d.version, new=ABSENT) for d in removed)
    if len(removed) == 1:
        d = removed[0]
        return AREA.change(
            subject=d.name,
            old=d.version,
            new="absent",
            why="removed: code that imports it fails",
        )
    return AREA.change(
        subject=f"{len(removed)} packages",
        old=f"{len(removed)} packages",
        new="absent",
        members=members,
        why=f"{len(removed)} packages removed: code that imports them fails",
    )
