"""Who changed a package: the install journal when it knows, else inference.

Inference names the group of distributions installed together (close dist-info times), its
root, and the requirement that forced the version: "installed with sglang 0.5.23; sglang
0.5.23 requires torch==2.11.0". A journal record of ``envguard run`` wins over inference.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from packaging.utils import canonicalize_name

from envguard import grouping
from envguard.model import Distribution, Snapshot


class JournalEntry(Protocol):
    """What attribution needs of a journal record (``envguard.journal.Entry``)."""

    @property
    def command(self) -> tuple[str, ...]: ...
    @property
    def user(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def finished(self) -> str: ...
    @property
    def exit_code(self) -> int: ...
    def touched(self) -> set[str]: ...


def causes(old: Snapshot, new: Snapshot, entries: Sequence[JournalEntry] = ()) -> dict[str, str]:
    a = {d.name: d for d in old.packages}
    b = {d.name: d for d in new.packages}
    moved = {n for n in b if n not in a or a[n].version != b[n].version}
    moved |= set(a) - set(b)
    out = _from_journal(old, entries, moved)
    real = new.versions()
    added = [b[n] for n in sorted(moved) if n in b and n not in a]
    changed = [b[n] for n in sorted(moved) if n in b and n in a]
    for group in grouping.install_groups(added, changed):
        for dist in group.members:
            if dist.name in out:
                continue
            parts = []
            if group.root and group.root.name != dist.name:
                parts.append(f"installed with {group.root.name} {group.root.version}")
            why = forced_by(
                dist.name,
                a[dist.name].version if dist.name in a else None,
                _ordered(group, b.values()),
                real,
            )
            if why:
                parts.append(why)
            if parts:
                out[dist.name] = "; ".join(parts)
    return out


def _from_journal(
    old: Snapshot, entries: Sequence[JournalEntry], moved: set[str]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in sorted(entries, key=lambda e: e.finished, reverse=True):
        if entry.finished < old.taken_at:
            continue  # before the snapshot: not what changed since
        for name in entry.touched() & moved:
            out.setdefault(
                name,
                f"by `{' '.join(entry.command)}` ({entry.user}@{entry.host}, "
                f"{entry.finished}, exit {entry.exit_code})",
            )
    return out


def _ordered(
    group: grouping.InstallGroup, everything: Iterable[Distribution]
) -> list[Distribution]:
    """The group's root first, then its members, then the rest of the environment."""
    first = [group.root] if group.root else []
    rest = [d for d in everything if d not in group.members]
    return [*first, *group.members, *rest]


def forced_by(
    name: str,
    old_version: str | None,
    candidates: Iterable[Distribution],
    real: dict[str, str] | None = None,
) -> str:
    """The requirement that forced ``name`` off ``old_version`` (or pulled it in); ``real``
    gives torch-family versions as their version.py says them."""
    from packaging.requirements import InvalidRequirement, Requirement

    fallback = ""
    for dist in candidates:
        if dist.name == name:
            continue
        for text in dist.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != name:
                continue
            spec = f"{req.name}{req.specifier}"
            line = f"{dist.name} {(real or {}).get(dist.name, dist.version)} requires {spec}"
            if (
                old_version
                and req.specifier
                and not req.specifier.contains(old_version, prereleases=True)
            ):
                return line
            fallback = fallback or line
    return fallback
