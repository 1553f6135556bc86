"""What a restore will do, decided from the lock alone (and the current venv, for what goes).

The plan is a pure function: every pin, where it comes from, what changes and what goes away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard import grouping
from envguard import uv as uv_backend
from envguard.drift.report import ABSENT, Member
from envguard.errors import RestoreError
from envguard.model import Distribution, PackageBuild, Snapshot
from envguard.probes.torch import PYTORCH_INDEX, labelled
from envguard.record import Record
from envguard.redact import strip_url_credentials
from envguard.restore import wheelhouse
from envguard.versions import same

if TYPE_CHECKING:
    from envguard.journal import Entry as JournalEntry


@dataclass(frozen=True, kw_only=True)
class Pin(Record):
    name: str
    requirement: str  # a requirements-file line: "torch==2.11.0+cu128", "x @ url", "-e path"
    source: str  # the index (or URL) it comes from, for people


@dataclass(frozen=True, kw_only=True)
class Removal(Record):
    summary: str  # "sglang 0.5.23 and 46 packages installed with it"
    # each package that goes: its version in the venv (old), absent from the lock (new)
    members: tuple[Member, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Skipped(Record):
    """A lock entry the plan cannot pin, and why: the screen's words are output's."""

    name: str
    version: str
    reason: str  # "installed from file:///x.whl, which no longer exists"


@dataclass(frozen=True, kw_only=True)
class VersionChange(Record):
    """A package the restore moves from the venv's version (``old``) to the lock's (``new``)."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class Overrides(Record):
    """The user's index flags.

    --index-url, --extra-index-url and --no-index replace the indexes inferred from the lock;
    --find-links adds a wheelhouse to them; --offline keeps uv off the network.
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    offline: bool = False
    no_index: bool = False

    def replaces(self) -> bool:
        return bool(self.index_url or self.extra_index_urls or self.no_index)

    def given(self) -> bool:
        return self.replaces() or bool(self.find_links) or self.offline

    def over(self, lower: Overrides) -> Overrides:
        """These sources over ``lower``'s: the one precedence rule of every rebuild, called as
        ``flags.over(install_command).over(...)``. The first index named wins; the extra
        indexes and wheelhouses of both are asked (the higher's first); offline or no index
        from either holds."""
        return Overrides(
            index_url=self.index_url or lower.index_url,
            extra_index_urls=_both(self.extra_index_urls, lower.extra_index_urls),
            find_links=_both(self.find_links, lower.find_links),
            offline=self.offline or lower.offline,
            no_index=self.no_index or lower.no_index,
        )


def _both(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *then)))


@dataclass(frozen=True, kw_only=True)
class Plan(Record):
    venv: str
    python: str
    pins: tuple[Pin, ...]
    indexes: str  # how uv is pointed at indexes, in words
    # the interpreter the venv is built with, found on this machine before the plan is shown
    # (never the lock's python.home), and what found it: "uv", "pyenv" or "--python"
    interpreter: str = ""
    found_by: str = ""
    sources: str = ""  # why uv is pointed there, when envguard decided it (offline wheelhouse)
    overrides: Overrides = field(default_factory=lambda: Overrides())  # what uv is given
    skipped: tuple[Skipped, ...] = ()  # lock entries that cannot be pinned, with the reason
    removals: tuple[Removal, ...] = ()  # what the current venv has that the lock does not
    changes: tuple[VersionChange, ...] = ()  # what the lock holds at another version
    replaces_existing: bool = False
    system_site_packages: bool = False
    split: str = ""  # restore --split: the old venv becomes this tool instead of a backup
    split_to: str = ""  # and goes there

    def to_dict(self) -> dict[str, Any]:
        # what uv is given may carry index credentials: ``indexes`` says it, without them
        out = super().to_dict()
        out.pop("overrides", None)
        return out


def indexes_for(lock: Snapshot, overrides: Overrides) -> uv_backend.Indexes:
    torch = lock.torch
    backend = None
    # the label, not a recorded source (seldom known), tells a PyTorch-index build
    if not overrides.replaces() and torch is not None and _labelled(torch):
        backend = uv_backend.torch_backend_for(torch.variant)
    return uv_backend.Indexes(
        index_url=overrides.index_url,
        extra_index_urls=overrides.extra_index_urls,
        find_links=overrides.find_links,
        offline=overrides.offline,
        no_index=overrides.no_index,
        torch_backend=backend,
    )


def plan(
    lock: Snapshot,
    venv: Path,
    current: Snapshot | None,
    overrides: Overrides,
    journal: Sequence[JournalEntry] = (),
) -> Plan:
    """``journal``: the lock's install journal, whose records group what goes away by the
    command that brought it, as diff groups it."""
    if current is not None and current.venv.kind != "venv":
        raise RestoreError(
            f"{venv} is a {current.venv.kind}, not a venv: restore builds venvs "
            "and will not replace it; pass --venv NEW_PATH"
        )
    pins, skipped = _pins(lock, overrides)
    overrides, why = wheelhouse.sources(lock.python.version, overrides, pins)
    if why:  # envguard chose the sources: each pin says the one it got
        pins, skipped = _pins(lock, overrides)
    indexes = indexes_for(lock, overrides)
    return Plan(
        venv=str(target_path(venv)),
        python=lock.python.version,
        pins=tuple(pins),
        indexes=indexes.describe(),
        sources=why,
        overrides=overrides,
        skipped=tuple(skipped),
        removals=_removals(lock, current, journal),
        changes=_changes(lock, current),
        replaces_existing=current is not None,
        system_site_packages=lock.venv.system_site_packages,
    )


def _pins(lock: Snapshot, overrides: Overrides) -> tuple[list[Pin], list[Skipped]]:
    """Every locked package as a requirement line, or why it cannot be one."""
    builds = {b.name: b for b in (lock.torch, *lock.torch_family) if b}
    indexes = indexes_for(lock, overrides)
    pins: list[Pin] = []
    skipped: list[Skipped] = []
    for dist in lock.packages:
        pin, reason = _pin(dist, builds.get(dist.name), indexes, overrides)
        if pin:
            pins.append(pin)
        else:
            skipped.append(Skipped(name=dist.name, version=dist.version, reason=reason))
    return pins, skipped


def target_path(venv: Path) -> Path:
    """The venv's real path: restoring through a symlink replaces the venv it points to, and
    two restores of one venv by two names contend for one lock."""
    return venv.resolve() if venv.is_symlink() or venv.exists() else venv.absolute()


def default_source(overrides: Overrides) -> str:
    """Where a pin with no index of its own comes from, as people would say it."""
    if overrides.no_index:  # --no-index: the wheelhouses alone
        links = ", ".join(overrides.find_links)
        return f"find-links {links}" if links else "no index (--no-index)"
    return strip_url_credentials(overrides.index_url or "the default index")


def _pin(
    dist: Distribution,
    build: PackageBuild | None,
    indexes: uv_backend.Indexes,
    overrides: Overrides,
) -> tuple[Pin | None, str]:
    if dist.problem:
        return None, f"recorded incompletely ({dist.problem})"
    if dist.direct_url:
        return _direct_pin(dist)
    where = default_source(overrides)
    if build is not None and _labelled(build):
        # The PyTorch index carries the label in the wheel's own version: pin it exactly.
        source = PYTORCH_INDEX.format(variant=build.variant) if indexes.torch_backend else where
        return Pin(name=dist.name, requirement=f"{dist.name}=={build.version}", source=source), ""
    return Pin(name=dist.name, requirement=f"{dist.name}=={dist.version}", source=where), ""


def _labelled(build: PackageBuild) -> bool:
    return labelled(build.metadata_version, build.variant)


def _direct_pin(dist: Distribution) -> tuple[Pin | None, str]:
    url = dist.direct_url or ""
    if url.startswith("file://"):
        from urllib.parse import urlsplit
        from urllib.request import url2pathname

        path = Path(url2pathname(urlsplit(url).path))  # file:///my%20wheels/x.whl
        if not path.exists():
            return None, f"installed from {url}, which no longer exists"
        line = f"-e {path}" if dist.editable else f"{dist.name} @ {url}"
        return Pin(name=dist.name, requirement=line, source=str(path)), ""
    return Pin(name=dist.name, requirement=f"{dist.name} @ {url}", source=url), ""


def _removals(
    lock: Snapshot, current: Snapshot | None, journal: Sequence[JournalEntry]
) -> tuple[Removal, ...]:
    """What the venv has beyond the lock, grouped as diff groups it: by the journaled command
    that brought it, else by requirement ("installed with it" only of packages the named one
    requires; a package installed a minute later is its own)."""
    if current is None:
        return ()
    from envguard import attribution
    from envguard.drift import packages

    locked = {d.name for d in lock.packages}
    moved = packages.delta(lock, current, attribution.installs_since(lock, journal))
    out = []
    for group in moved.groups:
        extra = [d for d in group.members if d.name not in locked]
        if extra:
            gone = grouping.InstallGroup(
                members=tuple(extra),
                root=group.root if group.root in extra else None,
                installed_at=group.installed_at,
                edges=tuple(e for e in group.edges if e[0] not in locked and e[1] not in locked),
            )
            members = tuple(Member(name=d.name, old=d.version, new=ABSENT) for d in extra)
            out.append(Removal(summary=_removal(gone), members=members))
    return tuple(out)


def _removal(group: grouping.InstallGroup) -> str:
    """``sglang 0.5.23 and 46 packages installed with it``; without one root, the packages
    nothing else there requires, and how many they require."""
    brought = {dep for _, dep, _ in group.edges}
    tops = [group.root] if group.root else [d for d in group.members if d.name not in brought]
    named = [f"{d.name} {d.version}" for d in tops or group.members]  # none: a cycle
    others = len(group.members) - len(named)
    if not others:
        return " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
    verb = "installed with it" if len(named) == 1 else "they require"
    return f"{', '.join(named)} and {others} package{'s' if others != 1 else ''} {verb}"


def _changes(lock: Snapshot, current: Snapshot | None) -> tuple[VersionChange, ...]:
    if current is None:
        return ()
    now = current.versions()
    return tuple(
        VersionChange(name=name, old=now[name], new=want)
        for name, want in lock.versions().items()
        if name in now and not same(now[name], want)
    )


def requirements_text(p: Plan) -> str:
    return "".join(f"{pin.requirement}\n" for pin in p.pins)
