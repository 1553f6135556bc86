"""Which packages arrived together: clusters of close install times, and each cluster's root.

An install command writes all its dist-info folders within seconds; a later one is minutes or
days apart. The root is the member no other member requires (the thing that was asked for);
``REQUESTED`` cannot tell it, since uv writes it for dependencies too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from envguard import requirements
from envguard.model import Distribution

WINDOW_SECONDS = 120


@dataclass(frozen=True, kw_only=True)
class InstallGroup:
    members: tuple[Distribution, ...]
    root: Distribution | None  # the root that pulled in most of the group
    installed_at: str


def requirement_names(dist: Distribution) -> set[str]:
    return {r.name for r in map(requirements.parse, dist.requires) if r is not None}


def install_groups(
    added: Iterable[Distribution], changed: Iterable[Distribution], window: float = WINDOW_SECONDS
) -> list[InstallGroup]:
    """Cluster ``added`` and ``changed`` (their new side) by install time, oldest first."""
    members = sorted([*added, *changed], key=lambda d: (d.installed_at, d.name))
    clusters: list[list[Distribution]] = []
    last: float | None = None
    for dist in members:
        t = _seconds(dist.installed_at)
        close = last is not None and t is not None and t - last <= window
        # a forecast's packages carry one "planned" stamp and no time: one install all the same
        same = bool(clusters) and t is None and dist.installed_at == clusters[-1][-1].installed_at
        if clusters and (close or (same and dist.installed_at)):
            clusters[-1].append(dist)
        else:
            clusters.append([dist])
        last = t
    return [_group(c) for c in clusters]


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _group(members: Sequence[Distribution]) -> InstallGroup:
    ordered = tuple(sorted(members, key=lambda d: d.name))
    return InstallGroup(
        members=ordered,
        root=_root(ordered),
        installed_at=members[0].installed_at.replace("T", " ").rstrip("Z")
        if _seconds(members[0].installed_at) is not None
        else "",
    )


def _root(members: Sequence[Distribution]) -> Distribution | None:
    if len(members) < 2:
        return None
    names = {d.name for d in members}
    needs = {d.name: requirement_names(d) & names for d in members}
    required = set().union(*needs.values())
    roots = [d for d in members if d.name not in required] or list(members)
    # without requirements to tell (a forecast from uv's dry run), what was asked for is the
    # root; installers that write REQUESTED for everything make this a no-op
    asked = [d for d in roots if d.requested]
    if asked and len(asked) < len(roots):
        roots = asked
    sizes = {d.name: len(_closure(d.name, needs)) for d in roots}
    top = max(sizes.values())
    tied = [d for d in roots if sizes[d.name] == top]
    # several roots alike (three packages asked for, nothing known of what needs what): the
    # group has no one root, and naming one would be a guess
    return tied[0] if len(tied) == 1 else None


def _closure(name: str, needs: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(needs.get(current, ()))
    return seen
