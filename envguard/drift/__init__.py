"""Compare two snapshots: a pure function from (old, new) to a :class:`DriftReport`.

Every change is classed (critical / warning / info) and says in one line why it matters for
training. One module per area holds its rules, listed in one table (:mod:`.areas`); no I/O
anywhere here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envguard.drift.areas import ALL, AREAS, FAIL_ON, VENV_AREAS, Context, named
from envguard.drift.report import SEVERITIES, Change, DriftReport, Member

if TYPE_CHECKING:  # `snapshot` reads Change from here and must not load the rules
    from envguard import attribution
    from envguard.model import Snapshot

__all__ = [
    "AREAS",
    "FAIL_ON",
    "SEVERITIES",
    "VENV_AREAS",
    "Change",
    "DriftReport",
    "Member",
    "compare",
]


def compare(
    old: Snapshot,
    new: Snapshot,
    journal: Sequence[attribution.JournalEntry] = (),
    *,
    planned: bool = False,
) -> DriftReport:
    """``journal``: ``envguard run`` records, which win over inferred causes; ``planned``:
    ``new`` is a forecast of an install (preflight), and causes say so."""
    from envguard import attribution, checks
    from envguard.drift import packages

    moved = packages.delta(old, new, attribution.installs_since(old, journal))
    context = Context(planned=planned, moved=moved)
    known = {(f.area, f.subject, f.why) for f in checks.findings(old)}
    found = [f for f in checks.findings(new) if (f.area, f.subject, f.why) not in known]
    changes = [c for area in ALL for c in area.rule()(old, new, context)] + found
    changes.sort(key=lambda c: (SEVERITIES.index(c.severity), AREAS.index(c.area)))
    causes = attribution.causes(old, new, journal, moved.groups, planned=planned)
    changes = [_attributed(c, causes, new) for c in changes]
    reported = {f.why for f in found}
    return DriftReport(
        old=f"{old.name} ({old.taken_at})",
        new=f"{new.name} ({new.taken_at})",
        changes=tuple(changes),
        notes=tuple(w for w in new.warnings if w not in old.warnings and w not in reported),
    )


_CUDA_PARTS = {"CUDA runtime": "runtime", "cuDNN": "cudnn", "NCCL": "nccl"}


def _attributed(change: Change, causes: dict[str, attribution.Cause], new: Snapshot) -> Change:
    if not named(change.area).caused:
        return change
    if change.members:
        members = tuple(
            dataclasses.replace(m, cause=causes[m.name].member()) if m.name in causes else m
            for m in change.members
        )
        return dataclasses.replace(change, members=members)
    cause = causes.get(change.subject)
    short, full = (cause.short(), cause.full()) if cause else ("", "")
    part = _CUDA_PARTS.get(change.subject)
    if part and change.area == "cuda":
        # a CUDA library's cause is its wheel's: "nvidia-cudnn-cu13 9.19.0.56, installed with …"
        lib = getattr(new.cuda, part)
        wheel = lib.wheel if lib else None
        if wheel and wheel in causes:
            version = next((d.version for d in new.packages if d.name == wheel), "")
            short = f"{wheel} {version}, {causes[wheel].short()}"
            full = f"{wheel} {version}, {causes[wheel].full()}"
    if not short:
        return change
    return dataclasses.replace(change, cause=short, cause_detail=full)
