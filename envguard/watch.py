"""``envguard run``: run an install command in a venv and record the drift it caused."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import _run, drift, journal, snapshot
from envguard.errors import EnvguardError
from envguard.model import Snapshot
from envguard.versions import same


@dataclass(frozen=True, kw_only=True)
class Watched:
    exit_code: int
    entry: journal.Entry
    report: drift.DriftReport
    journal_path: Path


def run(
    venv: Path,
    argv: Sequence[str],
    path: Path,
    extra_env: dict[str, str] | None = None,
    lock: Snapshot | None = None,
) -> Watched:
    """``lock``: the venv's lock, so that the snapshots around the command are the ones diff
    takes (an install changes neither code nor caches: those are skipped)."""
    if not argv:
        raise EnvguardError("nothing to run: envguard run [--venv PATH] -- COMMAND...")
    before = _take(venv, lock)
    started = journal.now()
    code = _run.stream(argv, env={**in_venv(venv), **(extra_env or {})})
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
    return Watched(exit_code=code, entry=entry, report=report, journal_path=path)


def in_venv(venv: Path) -> dict[str, str]:
    """The environment of an activated venv: `pip`, `python` and `uv pip` all target it."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    root = str(venv.absolute())
    env["VIRTUAL_ENV"] = root
    env["PATH"] = f"{root}/bin{os.pathsep}{env.get('PATH', '')}"
    return env


def package_delta(before: Snapshot, after: Snapshot) -> dict[str, tuple[str, ...]]:
    a, b = before.versions(), after.versions()
    return {
        "added": tuple(f"{n} {b[n]}" for n in sorted(set(b) - set(a))),
        "removed": tuple(f"{n} {a[n]}" for n in sorted(set(a) - set(b))),
        "changed": tuple(
            f"{n} {a[n]} → {b[n]}" for n in sorted(set(a) & set(b)) if not same(a[n], b[n])
        ),
    }


def _take(venv: Path, lock: Snapshot | None) -> Snapshot:
    if lock is not None:
        return snapshot.live_for(lock, venv, with_code=False, with_caches=False)
    return snapshot.take(venv, default_caches=False, with_code=False)
