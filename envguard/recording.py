"""``envguard run``: an install command run in a venv, and the journal entry of what it changed
there (its packages and the drift, between the snapshots diff would take before and after)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import _run, drift, journal, snapshot
from envguard.drift.report import ABSENT, Member
from envguard.errors import ArgumentError
from envguard.install_target import in_target, in_venv
from envguard.model import Snapshot
from envguard.versions import same


@dataclass(frozen=True, kw_only=True)
class Recorded:
    exit_code: int
    entry: journal.Entry
    report: drift.DriftReport
    journal_path: Path


def record(
    venv: Path,
    argv: Sequence[str],
    path: Path,
    extra_env: dict[str, str] | None = None,
    lock: Snapshot | None = None,
) -> Recorded:
    """``lock``: the venv's lock, so that the snapshots around the command are the ones diff
    takes (an install changes neither code nor caches: those are skipped)."""
    if not argv:
        raise ArgumentError("nothing to run: envguard run [--venv PATH] -- COMMAND...")
    before = _take(venv, lock)  # first: a venv that is none is said so, not "has no pip"
    runs = in_target(argv, venv)
    started = journal.now()
    code = _run.stream(runs, env={**in_venv(venv), **(extra_env or {})})
    after = _take(venv, lock)
    report = drift.compare(before, after)
    entry = journal.Entry(
        schema=journal.SCHEMA,
        command=journal.clean_command(argv),
        user=journal.who(),
        host=socket.gethostname(),
        cwd=str(Path.cwd()),
        started=started,
        finished=journal.now(),
        exit_code=code,
        **package_delta(before, after),
        changes=tuple(c for c in report.changes if c.area != "host"),
    )
    journal.append(path, entry)
    return Recorded(exit_code=code, entry=entry, report=report, journal_path=path)


def package_delta(before: Snapshot, after: Snapshot) -> dict[str, tuple[Member, ...]]:
    a, b = before.versions(), after.versions()
    return {
        "added": tuple(Member(name=n, old=ABSENT, new=b[n]) for n in sorted(set(b) - set(a))),
        "removed": tuple(Member(name=n, old=a[n], new=ABSENT) for n in sorted(set(a) - set(b))),
        "changed": tuple(
            Member(name=n, old=a[n], new=b[n])
            for n in sorted(set(a) & set(b))
            if not same(a[n], b[n])
        ),
    }


def _take(venv: Path, lock: Snapshot | None) -> Snapshot:
    if lock is not None:
        return snapshot.live_for(lock, venv, with_code=False, with_caches=False)
    return snapshot.take(venv, default_caches=False, with_code=False)
