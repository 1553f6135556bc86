"""An install priced before it lands (``preflight --bench``): the lock's benchmark, measured
in the venv the install would leave and in the venv as it is, in turn.

Both sides are bisect trials (:mod:`envguard.bisect.trials`), built in envguard's work
folder before either runs: the live venv rebuilt by uv from its exact pins (its code, caches
and variables as they are now), and the same rebuild with the user's install run into it, as
the user would run it, pointed at the copy. The training venv is read, never written; the
benchmark never runs in it. The two are one bisect of one move, the install, so that the
noise is read as bisect reads it: a gap inside it is "cannot tell", never a cost.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard import _run, catalog, install_sources, preflight
from envguard import uv as uv_backend
from envguard.bisect import metric, search, trials
from envguard.bisect.moves import Move, shell
from envguard.errors import BenchmarkError, CommandError
from envguard.model import Benchmark, Snapshot
from envguard.record import Record
from envguard.restore.plan import Overrides

INSTALL = "install"  # the one move: the install, applied to the rebuild of the live venv
# What an install's price says: it costs the benchmark, moves it (no direction given),
# makes it faster, costs nothing measurable, cannot be told from the noise, or breaks it.
COST, MOVES, GAIN, NONE, CANNOT_TELL, BREAKS = (
    "cost", "moves", "gain", "none", "cannot-tell", "breaks",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True, order=True)
class Moved(Record):
    """A package the install changed in the rebuild: ``old`` or ``new`` "" when it came or
    went."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class Price(Record):
    """What the install costs the lock's benchmark, with the runs that say so."""

    verdict: str
    command: tuple[str, ...]  # the benchmark
    install: tuple[str, ...]
    metric: str
    direction: str
    unit: str
    before: tuple[float, ...]  # the venv as it is (rebuilt)
    after: tuple[float, ...]  # the venv the install would leave
    moved: tuple[Moved, ...] = ()  # what the install changed there, the ML stack first
    why: str = ""  # a side that broke: what it said
    seconds: float = 0.0
    notes: tuple[str, ...] = ()  # what may make the price untrue (a command not read into)
    sources: Overrides = field(default_factory=Overrides)  # where both copies' wheels came from

    @property
    def change(self) -> float | None:
        """The after side's median less the before side's, as a share of it."""
        if not self.before or not self.after:
            return None
        was, now = metric.median(self.before), metric.median(self.after)
        return (now - was) / abs(was) if was else None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "moved": [m.to_dict() for m in self.moved],
                "why": self.why, "change": self.change, "notes": list(self.notes),
                "sources": _sources_dict(self.sources)}  # fmt: skip

    def cost(self) -> float:
        """How much worse the after side measured, as a share of the before side (0 where
        it measured no worse, or nothing); without a direction, how far it moved."""
        change = self.change
        if change is None:
            return 0.0
        if not self.direction:
            return abs(change)
        return max(0.0, -change if self.direction == "higher" else change)

    def exceeds(self, most: float) -> bool:
        """Whether the install costs more than the share ``most``: it breaks the benchmark,
        or measured worse by more, clearly or inside the noise (a cost that cannot be told
        from the noise is not known to be small)."""
        if self.verdict == BREAKS:
            return True
        if not self.metric:  # exit statuses: a benchmark that passed and now fails
            return self.verdict in (COST, MOVES)
        return self.verdict in (COST, MOVES, CANNOT_TELL) and self.cost() > most


@dataclass(frozen=True, kw_only=True)
class Options:
    runs: int = 1  # each side's at the least; bisect's references take 3 to 6 by the noise
    timeout: float = 3600.0
    overrides: Overrides = field(default_factory=Overrides)
    python: str | None = None


def price(
    install: preflight.Command,
    live: Snapshot,
    bench: Benchmark,
    *,
    lock_path: Path,
    cwd: Path,
    options: Options,
    on_event: Callable[[trials.Event], None] | None = None,
) -> Price:
    """The install's price on ``bench``, measured beside ``live``'s venv, never in it."""
    move = Move(kind=INSTALL, subject=shell(install.argv), old="", new="")
    # both copies look where the install looks: envguard's flags, then the command's own
    sources = options.overrides.over(install_sources.of(install.args, Path.cwd()))
    sides = trials.Sides(lock_path=lock_path.absolute(), good=live, bad=live,
                         environ=dict(os.environ), cwd=cwd)  # fmt: skip
    pattern = metric.compile_metric(bench.metric) if bench.metric else None
    settings = trials.Settings(command=bench.command, metric=pattern, runs=options.runs,
                               timeout=options.timeout, overrides=sources,
                               python=options.python)  # fmt: skip
    started = time.monotonic()
    with trials.Workspace() as work:
        runner = _Installing(sides, (move,), settings, work, install=install,
                             flags=options.overrides, on_event=on_event)  # fmt: skip
        outcome = search.bisect(
            (move,), runner, direction=bench.direction or (None if pattern else "lower"),
            max_trials=2, references=runner.references, until=runner.until,
        )  # fmt: skip
    before = outcome.trial(frozenset())
    after = outcome.trial(frozenset({move}))
    assert before is not None and after is not None  # the references are measured first
    # a side that could not be built ends the runs of both: the other then says nothing
    if before.measured.value is None and (
        before.measured.failure or not after.measured.unbuildable
    ):
        raise BenchmarkError(_unmeasured("the venv as it is", before.measured, sources))
    if after.measured.unbuildable:
        raise BenchmarkError(f"the install cannot be priced: {after.measured.failure}")
    return Price(
        verdict=_verdict(outcome, bool(bench.direction)),
        command=bench.command, install=install.argv, metric=bench.metric,
        direction=bench.direction, unit=bench.unit,
        before=before.measured.values, after=after.measured.values,
        moved=runner.moved, why=after.measured.failure, seconds=time.monotonic() - started,
        notes=(*runner.notes, *_reaching(runner)), sources=sources,
    )  # fmt: skip


def _reaching(runner: trials.Trials) -> tuple[str, ...]:
    reaching = runner.reaching()
    if not reaching:
        return ()
    return (f"both copies may measure the live venv, not their own: {'; '.join(reaching)}",)


def _unmeasured(side: str, measured: search.Measured, sources: Overrides) -> str:
    if not measured.unbuildable:
        return f"the install cannot be priced: {side} fails its benchmark ({measured.failure})"
    return (
        f"the install cannot be priced: {side} cannot be rebuilt ({measured.failure}); "
        f"{_where_hint(sources)}"
    )


def _where_hint(sources: Overrides) -> str:
    """The option that would let envguard find a pin it could not: the venv's own pins are
    rebuilt from where its wheels are, which the install command need not name."""
    if sources.offline or sources.no_index:
        asked = "offline" if sources.offline else "with --no-index"
        return (f"{asked}, every pin of the venv must be in a wheelhouse: give the folder "
                "that holds it with --find-links DIR")  # fmt: skip
    return ("say where the venv's wheels are with --find-links DIR or --index-url URL "
            "(before --: the install's own index options are used too)")  # fmt: skip


def _sources_dict(sources: Overrides) -> dict[str, Any]:
    from envguard.redact import redact

    return {
        "index_url": redact(sources.index_url) if sources.index_url else None,
        "extra_index_urls": [redact(u) for u in sources.extra_index_urls],
        "find_links": [redact(u) for u in sources.find_links],
        "offline": sources.offline, "no_index": sources.no_index,
    }  # fmt: skip


def _verdict(outcome: search.Outcome[Move], directed: bool) -> str:
    if outcome.stop == "bad-failed":
        return BREAKS
    if outcome.stop == "cannot-tell":
        return CANNOT_TELL
    if outcome.stop == "good-worse":  # the after side clearly better
        return GAIN
    if outcome.stop in ("alike", "better"):
        return NONE
    return COST if directed else MOVES


class _Installing(trials.Trials):
    """Trials where the install's move, applied, is the user's install run into the trial's
    venv once uv has rebuilt it: what the install would leave, beside the training venv."""

    def __init__(
        self,
        sides: trials.Sides,
        moves: tuple[Move, ...],
        settings: trials.Settings,
        work: trials.Workspace,
        *,
        install: preflight.Command,
        flags: Overrides,
        on_event: Callable[[trials.Event], None] | None,
    ) -> None:
        super().__init__(sides, moves, settings, work, on_event=on_event)
        self.install = install
        self.flags = flags  # envguard's own index flags: the install in the copy gets them too
        self.moved: tuple[Moved, ...] = ()

    def _venv(self, applied: frozenset[Move], where: Path, tree: Path | None) -> Path:
        install = [m for m in applied if m.kind == INSTALL]
        venv = super()._venv(applied - frozenset(install), where, tree)
        if install:
            _install(self.install, venv, self.flags)
            self.moved = _moved(self.sides.good, venv)
        return venv


def _install(cmd: preflight.Command, venv: Path, flags: Overrides) -> None:
    """The user's install, into ``venv``: their installer and arguments (with envguard's own
    index flags, as the dry run has them), their settings but for those that send an install
    elsewhere."""
    python = str(venv / "bin" / "python")
    given = preflight.flags_for(cmd, flags)
    if cmd.installer == "uv":
        uv = shutil.which(cmd.argv[0]) or uv_backend.find_uv()
        argv = [uv, "pip", "install", "--python", python, *cmd.args, *given]
    else:
        if not preflight.has_pip(venv):
            raise trials.Unbuildable("the rebuilt venv has no pip for a pip install")
        argv = [python, "-m", "pip", "install", *cmd.args, *given]
    env = _run.activated(preflight.installer_env(), venv)
    try:
        done = _run.run(argv, check=False, timeout=3600, env=env)
    except CommandError as exc:
        raise trials.Unbuildable(f"the install cannot run: {exc}") from None
    if done.returncode != 0:
        said = metric.last_line(done.stderr or done.stdout)
        raise trials.Unbuildable(f"the install fails in a copy of the venv: {said}")


def _moved(live: Snapshot, venv: Path) -> tuple[Moved, ...]:
    """What the install changed in ``venv``, as the CUDA build of torch reads (its
    version.py): the torch family first, then the key libraries, then the rest."""
    from envguard.versions import same

    now = trials.built_versions(venv)
    was: Mapping[str, str] = live.versions()
    names = sorted(set(was) | set(now), key=lambda n: (_rank(n), n))
    return tuple(
        Moved(name=n, old=was.get(n, ""), new=now.get(n, ""))
        for n in names
        if not same(was.get(n, ""), now.get(n, ""))
    )


def _rank(name: str) -> int:
    return 0 if name in catalog.BUILDS else 1 if name in catalog.KEY_LIBRARIES else 2
