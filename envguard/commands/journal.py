"""``envguard run`` and ``envguard log``: installs journalled beside the venv's lock."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envguard import attribution, journal, protect, recording, targets
from envguard.config import Config
from envguard.results.journal import LogDone, RunDone


def run(cfg: Config, command: Sequence[str], *, venv: Path | None = None) -> RunDone:
    target = targets.venv(venv, cfg)
    lock_path, locked = targets.lock_of_venv(target, cfg)
    recorded = recording.record(
        target,
        command,
        journal.path_for(lock_path),
        extra_env=protect.constraint_env(target),
        lock=locked,
    )
    critical = any(c.severity == "critical" for c in recorded.report.changes)
    hint = attribution.tool_hint(command, done=True) if critical else ""
    return RunDone(recorded=recorded, hint=hint)


def log(cfg: Config, *, venv: Path | None = None) -> LogDone:
    lock_path, _ = targets.lock_of_venv(targets.recorded(venv, cfg), cfg)
    path = journal.path_for(lock_path)
    return LogDone(journal=str(path), entries=tuple(journal.read(path)))
