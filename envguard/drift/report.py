"""What a comparison finds: changes, each classed and explained, and the report holding them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from envguard.record import Record

SEVERITIES = ("critical", "warning", "info")  # most severe first
ABSENT = "absent"  # the version of a package on the side it is not on


@dataclass(frozen=True, kw_only=True)
class Member(Record):
    """A package of a group change (an install's packages, the system packages): its version
    on each side, ``absent`` where it is not. Words for it are the screen's to choose."""

    name: str
    old: str
    new: str
    cause: str = ""  # what brought it, where its group's cause does not say: a requirement

    @property
    def added(self) -> bool:
        return self.old == ABSENT

    @property
    def removed(self) -> bool:
        return self.new == ABSENT


@dataclass(frozen=True, kw_only=True)
class Change(Record):
    """One difference between two snapshots: severity, area, reason and cause."""

    severity: str
    area: str
    subject: str
    old: str = ""
    new: str = ""
    why: str
    members: tuple[Member, ...] = ()  # drill-down: the packages of a group
    patch: str = ""  # the code file's change, for --show-patch
    cause: str = ""  # who or what changed it, in short: a journal record, or the install
    cause_detail: str = ""  # the same in full (the journal's whole command, user, time)
    unit: str = ""  # "bytes": old and new are byte counts, shown in units on screen

    def counts_at(self, fail_on: str) -> bool:
        """Whether this change is drift at the ``fail_on`` threshold."""
        return counts_at(self.severity, fail_on)


def counts_at(severity: str, fail_on: str) -> bool:
    """Whether a change of ``severity`` is drift at the ``fail_on`` threshold: the one rule,
    for a change and for what a fleet's node carries of one."""
    if fail_on == "any":
        return True
    return SEVERITIES.index(severity) <= SEVERITIES.index(fail_on)


@dataclass(frozen=True, kw_only=True)
class DriftReport(Record):
    """What changed between two snapshots, most severe first."""

    old: str  # "name (taken_at)" labels of the two sides
    new: str
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()  # the new side's snapshot warnings that the old side lacked

    def to_dict(self) -> dict[str, Any]:
        # JSON readers index these keys: present, as [] when empty (TOML-style omission is
        # for lockfiles)
        return {**super().to_dict(), "changes": [c.to_dict() for c in self.changes],
                "notes": list(self.notes)}  # fmt: skip

    def counts(self) -> dict[str, int]:
        return {s: sum(c.severity == s for c in self.changes) for s in SEVERITIES}

    def fails(self, fail_on: str) -> bool:
        """Whether this report is drift at the ``fail_on`` threshold (exit 1)."""
        return any(c.counts_at(fail_on) for c in self.changes)

    def only(self, only: tuple[str, ...] = (), ignore: tuple[str, ...] = ()) -> DriftReport:
        """The report restricted to the ``only`` areas (all when empty), minus ``ignore``."""
        kept = tuple(
            c for c in self.changes if (not only or c.area in only) and c.area not in ignore
        )
        return replace(self, changes=kept)

    def without(self, env: tuple[str, ...] = (), paths: tuple[str, ...] = ()) -> DriftReport:
        """The report without the variables and code paths a project chose not to judge
        (shell-style globs: ``WANDB_*``, ``notebooks/*``)."""
        from fnmatch import fnmatchcase

        def left_out(c: Change) -> bool:
            globs = env if c.area == "env" else paths if c.area == "code" else ()
            return any(fnmatchcase(c.subject, g) for g in globs)

        return replace(self, changes=tuple(c for c in self.changes if not left_out(c)))


def cache_label(kind: str, path: str) -> str:
    return {"inductor": "Inductor cache", "triton": "Triton cache"}.get(kind, f"cache {path}")
