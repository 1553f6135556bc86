"""Which packages arrived together, and the evidence that they did.

One command is one group when something knows the command: a journal record of ``envguard
run``, or the plan a preflight forecasts. Otherwise a group is what requirements tie together:
X brought Y when X requires Y and that requirement pulled Y in (Y was not there), ruled Y's
old version out, or pins Y's new one exactly. A requirement that admitted the old version did
not force the new one (a later command did), so it ties nothing. Install times only rule an
edge out (a package there hours before its requirer came on its own); closeness in time never
makes one, since two commands a minute apart, or two packages asked for in one command, are
no evidence of each other. The root is the member that requires, at least transitively, every
other member; a group without one has no root rather than a guessed one. ``REQUESTED`` cannot
tell the root of an installed group, since uv writes it for dependencies too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from envguard import requirements
from envguard.model import Distribution
from envguard.versions import same

# a dependency is installed within the same command as its requirer: further apart than this,
# it was there already (or came later), whatever the requirement says
WINDOW_SECONDS = 120

Edge = tuple[str, str, requirements.Req]  # (requirer, the package it brought, the requirement)


@dataclass(frozen=True, kw_only=True)
class InstallGroup:
    members: tuple[Distribution, ...]  # by name
    root: Distribution | None  # the member that requires every other one, when one does
    installed_at: str  # the earliest member's time, "2026-11-30 19:46:15", or ""
    edges: tuple[Edge, ...] = ()  # who brought whom, requirer by requirer: the evidence
    # without one root: the members nothing else brought, when between them they require
    # every other (`uv pip install vllm sglang`); each member is theirs who reach it
    roots: tuple[Distribution, ...] = ()

    def tops(self) -> tuple[Distribution, ...]:
        """The root, or the roots that share the group: who it was installed for."""
        return (self.root,) if self.root else self.roots

    def brought_by(self, name: str) -> tuple[Distribution, ...]:
        """The tops whose requirements reach ``name`` (none for a top itself). A root
        reaches every other member: its requirements do, or its command brought them."""
        if self.root is not None:
            return (self.root,) if self.root.name != name else ()
        return tuple(t for t in self.roots if t.name != name and name in self._reach[t.name])

    @functools.cached_property
    def _reach(self) -> dict[str, set[str]]:
        """Each shared root's closure, walked once for all the members asked about."""
        needs = _needs(self.edges)
        return {t.name: _closure(t.name, needs) for t in self.roots}


def install_groups(
    added: Iterable[Distribution],
    changed: Iterable[Distribution] = (),
    old: Mapping[str, str] | None = None,
) -> list[InstallGroup]:
    """``added`` and ``changed`` (their new side; ``old``: their versions before) grouped by
    requirement, oldest group first; a forecast's packages (one "planned" stamp, no time) are
    the one command they are planned by."""
    before = old or {}
    timed: list[Distribution] = []
    planned: dict[str, list[Distribution]] = {}
    for dist in [*added, *changed]:
        if dist.installed_at and seconds(dist.installed_at) is None:
            planned.setdefault(dist.installed_at, []).append(dist)
        else:
            timed.append(dist)
    groups = [command_group(members, before) for members in planned.values()]
    found = _edges(timed, before, WINDOW_SECONDS)
    components = _components(timed, found)
    where = {d.name: i for i, members in enumerate(components) for d in members}
    edges: list[list[Edge]] = [[] for _ in components]
    for edge in found:  # each edge to its component: 5000 packages make thousands of both
        edges[where[edge[0]]].append(edge)
    groups += [_group(m, e, asked=False) for m, e in zip(components, edges, strict=True)]
    return sorted(groups, key=lambda g: g.installed_at)


def command_group(members: Iterable[Distribution], old: Mapping[str, str]) -> InstallGroup:
    """The packages one known command installed: a group whatever their requirements say;
    its root is the member requiring every other, else the only one it asked for."""
    mine = list(members)
    return _group(mine, _edges(mine, old, None), asked=True)


def brought(req: requirements.Req, old_version: str | None, new: Distribution) -> bool:
    """Whether ``req`` is evidence that installing its requirer put ``new`` where it is."""
    if old_version is None or requirements.excludes(req.spec, old_version):
        return True
    # `torch==2.11.0` admits 2.11.0+cu128, yet names the 2.11.0 that replaced it
    spec = req.spec
    exact = spec.startswith("==") and not spec.startswith("===") and "," not in spec
    return exact and not spec.endswith("*") and same(spec[2:].strip(), new.version)


def seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _edges(
    members: Iterable[Distribution], old: Mapping[str, str], window: float | None
) -> list[Edge]:
    """Who brought whom among ``members``; ``window``: how far apart two installs of one
    command can be (None: they are one command, known)."""
    ordered = sorted(members, key=lambda d: d.name)
    by_name = {d.name: d for d in ordered}
    out: list[Edge] = []
    for requirer in ordered:
        for line in requirer.requires:
            req = requirements.parse(line)
            dep = by_name.get(req.name) if req is not None else None
            if req is None or dep is None or dep is requirer:
                continue
            if brought(req, old.get(dep.name), dep) and _close(requirer, dep, window):
                out.append((requirer.name, dep.name, req))
    return out


def _close(a: Distribution, b: Distribution, window: float | None) -> bool:
    ta, tb = seconds(a.installed_at), seconds(b.installed_at)
    return window is None or ta is None or tb is None or abs(ta - tb) <= window


def _components(members: Sequence[Distribution], edges: Sequence[Edge]) -> list[list[Distribution]]:
    """The members each connected by edges, either way; one with none is a group of its own."""
    links: dict[str, set[str]] = {d.name: set() for d in members}
    for requirer, dep, _ in edges:
        links[requirer].add(dep)
        links[dep].add(requirer)
    by_name = {d.name: d for d in members}
    seen: set[str] = set()
    out = []
    for dist in members:
        if dist.name not in seen:
            reach = _closure(dist.name, links)
            seen |= reach
            out.append([by_name[n] for n in sorted(reach)])
    return out


def _group(members: Sequence[Distribution], edges: Sequence[Edge], *, asked: bool) -> InstallGroup:
    ordered = tuple(sorted(members, key=lambda d: d.name))
    times = [d.installed_at for d in ordered if seconds(d.installed_at) is not None]
    root = _root(ordered, edges, asked)
    return InstallGroup(
        members=ordered,
        root=root,
        installed_at=min(times).replace("T", " ").rstrip("Z") if times else "",
        edges=tuple(edges),
        roots=() if root else _shared_roots(ordered, edges),
    )


def _shared_roots(
    members: Sequence[Distribution], edges: Sequence[Edge]
) -> tuple[Distribution, ...]:
    """The members nothing brought, when they are several and reach every member between
    them: the things one command (or a few, close together) asked for."""
    if len(members) < 3:
        return ()
    needs = _needs(edges)
    pulled = {dep for _, dep, _ in edges}
    tops = [d for d in members if d.name not in pulled]
    if len(tops) < 2:
        return ()
    reached: set[str] = set()
    for top in tops:
        reached |= _closure(top.name, needs)
    return tuple(tops) if reached >= {d.name for d in members} else ()


def _root(
    members: Sequence[Distribution], edges: Sequence[Edge], asked: bool
) -> Distribution | None:
    if len(members) < 2:
        return None
    needs = _needs(edges)
    names = {d.name for d in members}
    pulled = {dep for _, dep, _ in edges}
    # only a member nothing brought can reach every other (or any of a cycle): a group of
    # 600 has few such, and each closure walks the whole group
    tops = [d for d in members if d.name not in pulled] or members
    whole = [d for d in tops if _closure(d.name, needs) >= names]
    if whole:  # two that require each other, and so everything, tell no one root
        return whole[0] if len(whole) == 1 else None
    # one command that asked for one package (a forecast from uv's dry run carries no
    # requirements): everything else came for it. Installed uv groups are all REQUESTED.
    wanted = [d for d in members if d.requested] if asked else []
    return wanted[0] if len(wanted) == 1 else None


def _needs(edges: Iterable[Edge]) -> dict[str, set[str]]:
    """Each requirer → the members it brought."""
    out: dict[str, set[str]] = {}
    for requirer, dep, _ in edges:
        out.setdefault(requirer, set()).add(dep)
    return out


def _closure(name: str, needs: Mapping[str, set[str]]) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(needs.get(current, ()))
    return seen
