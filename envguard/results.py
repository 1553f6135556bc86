"""One typed result per command: what it found or did, and the exit code that says so.

A result knows nothing of screens; :mod:`envguard.output` renders it as text or as the
versioned JSON envelope. ``kind`` names the command in that envelope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from envguard.drift import DriftReport
from envguard.fleet import FleetReport
from envguard.journal import Entry
from envguard.model import Snapshot
from envguard.preflight import Forecast
from envguard.protect import Protection
from envguard.restore.backups import Backups
from envguard.restore.command import Result as RestoreResult
from envguard.tools import Tool
from envguard.watch import Watched


class Result:
    kind: ClassVar[str]

    @property
    def exit_code(self) -> int:
        return 0

    @property
    def command_name(self) -> str:
        """The command, as the envelope's ``kind`` names it."""
        return self.kind

    @property
    def error(self) -> str | None:
        return None

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class SnapshotDone(Result):
    kind: ClassVar[str] = "snapshot"
    lockfile: str
    snapshot: Snapshot
    archive: str | None = None
    archive_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {"lockfile": self.lockfile, **self.snapshot.to_dict()}
        if self.archive:
            out["archive"] = self.archive
        return out


@dataclass(frozen=True, kw_only=True)
class DiffDone(Result):
    kind: ClassVar[str] = "diff"
    report: DriftReport
    fail_on: str
    lock: str
    venv: str = ""  # "" for two lockfiles

    @property
    def exit_code(self) -> int:
        return 1 if self.report.fails(self.fail_on) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "lockfile": self.lock,
            "venv": self.venv,
            "fail_on": self.fail_on,
        }


@dataclass(frozen=True, kw_only=True)
class PreflightDone(Result):
    kind: ClassVar[str] = "preflight"
    forecast: Forecast
    venv: str
    hint: str = ""  # when it would break the training set: the tool venv way instead

    @property
    def exit_code(self) -> int:
        return 1 if self.forecast.critical() else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "venv": self.venv,
            "reasons": list(self.forecast.reasons),
            "hint": self.hint,
            **self.forecast.report.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class FleetDone(Result):
    kind: ClassVar[str] = "fleet"
    report: FleetReport
    fail_on: str

    @property
    def exit_code(self) -> int:
        return 1 if self.report.drifted() else 2 if self.report.problems else 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "fail_on": self.fail_on}


@dataclass(frozen=True, kw_only=True)
class LogDone(Result):
    kind: ClassVar[str] = "log"
    journal: str
    entries: tuple[Entry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"journal": self.journal, "entries": [e.to_dict() for e in self.entries]}


@dataclass(frozen=True, kw_only=True)
class RunDone(Result):
    kind: ClassVar[str] = "run"
    watched: Watched
    hint: str = ""  # when it changed the training set critically: how to split it out

    @property
    def exit_code(self) -> int:
        return self.watched.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "journal": str(self.watched.journal_path),
            "hint": self.hint,
            **self.watched.entry.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class ExportDone(Result):
    kind: ClassVar[str] = "export"
    output: str
    format: str
    packages: int

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "format": self.format, "packages": self.packages}


@dataclass(frozen=True, kw_only=True)
class ProtectDone(Result):
    kind: ClassVar[str] = "protect"
    protection: Protection

    def to_dict(self) -> dict[str, Any]:
        p = self.protection
        return {"venv": p.venv, "constraints": p.constraints, "pins": list(p.pins)}


@dataclass(frozen=True, kw_only=True)
class UnprotectDone(Result):
    kind: ClassVar[str] = "unprotect"
    venv: str
    lifted: bool

    def to_dict(self) -> dict[str, Any]:
        return {"venv": self.venv, "lifted": self.lifted}


@dataclass(frozen=True, kw_only=True)
class BackupsDone(Result):
    kind: ClassVar[str] = "backups"
    backups: Backups

    def to_dict(self) -> dict[str, Any]:
        return self.backups.to_dict()


@dataclass(frozen=True, kw_only=True)
class RestoreDone(Result):
    kind: ClassVar[str] = "restore"
    result: RestoreResult

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        for key in ("plan", "venv", "caches", "code", "saved", "error"):
            out.setdefault(key, None)
        return out


@dataclass(frozen=True, kw_only=True)
class ToolAdded(Result):
    kind: ClassVar[str] = "tool add"
    tool: Tool
    action: str = "added"  # or "exists" (tool sync)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, **self.tool.to_dict()}


@dataclass(frozen=True, kw_only=True)
class ToolsListed(Result):
    kind: ClassVar[str] = "tool list"
    train: str
    tools: tuple[Tool, ...]
    added: tuple[str, ...] = ()  # tool sync: the tools it built

    def to_dict(self) -> dict[str, Any]:
        return {"train": self.train, "tools": [t.to_dict() for t in self.tools],
                "added": list(self.added)}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ToolRemoved(Result):
    kind: ClassVar[str] = "tool remove"
    tool: Tool

    def to_dict(self) -> dict[str, Any]:
        return {"action": "removed", **self.tool.to_dict()}


@dataclass(frozen=True, kw_only=True)
class Failed(Result):
    """What an error is, for ``--json``: the envelope still comes, with ``error`` set."""

    kind: ClassVar[str] = "error"
    command: str
    message: str
    code: int = 2

    @property
    def exit_code(self) -> int:
        return self.code

    @property
    def command_name(self) -> str:
        return self.command

    @property
    def error(self) -> str | None:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {}
