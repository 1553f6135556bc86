"""The result of ``envguard bisect``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from envguard.bisect.moves import Move, shell
from envguard.bisect.search import spread
from envguard.model import Benchmark
from envguard.record import Record
from envguard.results import Result

# why a search ended without culprits (exit 1), as people read it
STOPS = {
    "cannot-tell": "cannot tell GOOD from BAD: their gap is inside their runs' noise",
    "good-worse": "cannot tell: GOOD, rebuilt from the lock, measures worse than BAD, so the "
    "trials do not reproduce the known-good state here",
    "unlike-lock": "cannot tell: GOOD, rebuilt from the lock, measures worse than the lock "
    "recorded when it was taken, so the trials do not reproduce the known-good state here",
    "max-trials": "--max-trials reached",
    "unresolved": "the trials that would tell were broken or could not be built",
}
# the stops before any search: GOOD and BAD tell nothing, so every move is as suspect as the next
UNTOLD = frozenset({"cannot-tell", "good-worse", "unlike-lock"})


@dataclass(frozen=True, kw_only=True)
class TrialRow(Record):
    index: int  # 1 is GOOD (no move), 2 is BAD (every move)
    applied: tuple[Move, ...]
    values: tuple[float, ...]  # one per run
    value: float | None  # their median; None when broken or unbuildable
    verdict: str  # good, bad, partial, broken, unbuildable
    seconds: float
    build_seconds: float  # its venv and code, before the first run
    run_seconds: float = 0.0  # the command's runs themselves; the rest is envguard's
    failure: str = ""  # why broken or unbuildable

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["applied"] = [{"kind": m.kind, "subject": m.subject} for m in self.applied]
        out["value"] = self.value
        return out


@dataclass(frozen=True, kw_only=True)
class Culprit(Record):
    move: Move
    alone: float | None  # GOOD with this move alone, measured (None: broken, or not tried)
    fix: tuple[tuple[str, ...], ...]  # the commands that put just it back


@dataclass(frozen=True, kw_only=True)
class BisectDone(Result):
    kind: ClassVar[str] = "bisect"
    lock: str
    venv: str
    repo: str  # "" without one
    command: tuple[str, ...]
    metric: str  # the regex; "" when exit statuses decide
    direction: str  # "higher", "lower" or ""
    unit: str
    runs: int
    tolerance: float
    good: float | None
    bad: float | None
    moves: tuple[Move, ...]
    trials: tuple[TrialRow, ...]
    culprits: tuple[Culprit, ...] = ()
    together: float | None = None  # the culprits applied together
    put_back: float | None = None  # BAD with the culprits put back (None: not measured)
    put_back_verdict: str = ""  # good when the culprits are the whole regression
    # GOOD measured again beside it, when its first reading was not good (a second look)
    put_back_good: float | None = None
    stop: str = ""  # "" when culprits were found; else why not (STOPS)
    suspects: tuple[Move, ...] = ()  # where the culprits are, as far as the search got
    refusal: str = ""  # why the search could not start (no regression, GOOD broken...)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    work: str = ""  # --keep: where the trials are
    # the lock's own benchmark (snapshot --bench), when it is the one run: GOOD is held to it
    recorded: Benchmark | None = None
    within: float | None = None  # --good-within, as a share; None: the record's own noise

    @property
    def exit_code(self) -> int:
        return 2 if self.refusal else 1 if self.stop else 0

    @property
    def error(self) -> str | None:
        return self.refusal or None

    def to_dict(self) -> dict[str, Any]:
        return {
            "lock": self.lock, "venv": self.venv, "repo": self.repo,
            "command": list(self.command), "metric": self.metric, "direction": self.direction,
            "unit": self.unit, "runs": self.runs, "tolerance": self.tolerance,
            "good": self.good, "bad": self.bad, "noise": self.noise(),
            "moves": [_move(m) for m in self.moves],
            "trials": [t.to_dict() for t in self.trials],
            "culprits": [self._culprit(c) for c in self.culprits],
            "together": None if not self.culprits else {"from": self.good, "to": self.together},
            "put_back": None if not self.put_back_verdict else
            {"value": self.put_back, "verdict": self.put_back_verdict,
             "good_beside": self.put_back_good},
            "found": not self.stop, "stop": self.stop, "why": self.why(),
            "suspects": [_move(m) for m in self.suspects] if self.stop else [],
            "notes": list(self.notes), "seconds": round(self.seconds, 3), "work": self.work or None,
            "recorded": self._recorded(),
        }  # fmt: skip

    def why(self) -> str:
        """Why the search stopped, as people read it ("" when it found culprits). Without a
        direction, GOOD unlike the record is not "worse": either way is unlike it."""
        if self.stop == "unlike-lock" and not self.direction:
            return STOPS[self.stop].replace("measures worse than", "measures other than")
        return STOPS.get(self.stop, "")

    def _recorded(self) -> dict[str, Any] | None:
        """The lock's benchmark GOOD was held to: its runs as ``noise`` gives GOOD's, its
        median, and the band (``within``, a share; null: its own noise)."""
        r = self.recorded
        if r is None:
            return None
        return {"runs": r.runs, "min": min(r.values), "max": max(r.values), "median": r.median,
                "spread": r.spread, "within": self.within}  # fmt: skip

    def reference(self, index: int) -> TrialRow | None:
        """GOOD's trial (1) or BAD's (2); None before it was measured."""
        return next((t for t in self.trials if t.index == index), None)

    def noise(self) -> dict[str, Any]:
        """GOOD's and BAD's runs: how many, their lowest and highest, and their spread as
        the search judged it (:func:`envguard.bisect.search.spread`)."""
        out: dict[str, Any] = {}
        for name, index in (("good", 1), ("bad", 2)):
            t = self.reference(index)
            values = t.values if t is not None else ()
            out[name] = {
                "runs": len(values),
                "min": min(values, default=None),
                "max": max(values, default=None),
                "spread": spread(values) if values else None,
            }
        return out

    def _culprit(self, c: Culprit) -> dict[str, Any]:
        return {
            **_move(c.move),
            "effect": {"from": self.good, "to": c.alone},
            "fix": " && ".join(shell(argv) for argv in c.fix),
        }


def _move(m: Move) -> dict[str, Any]:
    return {"kind": m.kind, "subject": m.subject, "old": m.old, "new": m.new,
            "members": list(m.members)}  # fmt: skip
