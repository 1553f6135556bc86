"""Which moves cost the gap between GOOD and BAD: bisection, then ddmin. Pure.

``measure(applied)`` builds GOOD with the ``applied`` moves and says what the user's
command measured there (:class:`Measured`); every set is measured at most once. GOOD (no
move) and BAD (every move) are measured first, together where ``references`` can (their runs
taken in turn, until they are :func:`separated`): a gap inside their noise is no verdict but
"cannot tell", and no search starts on it. A trial is *bad* when it falls within
``tolerance`` of the gap from BAD (it costs the whole regression, give or take), *good*
within ``tolerance`` of GOOD, *partial* in between; broken and unbuildable trials say
nothing. Only bad counts as failing: the set found is the smallest that costs the gap.

The search is Zeller's ddmin over the moves, in order, each set tested applied to GOOD: it
first splits the moves in halves and keeps the half that is bad, as ``git bisect`` does, so
one culprit among 5 moves costs 5 or 6 trials; when no half is bad alone (two moves that
cost it only together) it cuts finer and tries complements, until removing any one move of
the set leaves it good. Trials that say nothing are stepped around, never counted as bad.
Last, BAD with the culprits put back is measured (one trial more, unless one already did):
good when they are the whole regression, else another move costs it too, which is said only
once a second look, its runs taken in turn with GOOD's, reads the same on GOOD's new runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from envguard.bisect import metric

T = TypeVar("T", bound=Hashable)

GOOD, BAD, PARTIAL, BROKEN, UNBUILDABLE = "good", "bad", "partial", "broken", "unbuildable"
UNSTEADY = "unsteady"  # its runs disagree more than GOOD's and BAD's own did: says nothing
TOLERANCE = 0.25  # of the gap: a trial within a quarter of it from BAD costs the regression
ALIKE = 0.03  # GOOD and BAD closer than 3% (or than their runs' spread) measure alike
# GOOD's and BAD's runs where a metric decides: at least (the noise cannot be seen in fewer
# than 3), and at most, taken in turn while they are not separated
REFERENCE_RUNS = (3, 6)


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One trial's runs: their values, or why the trial said nothing."""

    values: tuple[float, ...] = ()
    failure: str = ""  # why it is broken (the command) or unbuildable (the environment)
    unbuildable: bool = False

    @property
    def value(self) -> float | None:
        return metric.median(self.values) if self.values and not self.failure else None


@dataclass(frozen=True, kw_only=True)
class Scale:
    """Where a value falls between GOOD's and BAD's."""

    good: float
    bad: float
    tolerance: float = TOLERANCE
    noise: float = 0.0  # how far apart GOOD's and BAD's own runs fell (the wider)

    def share(self, value: float) -> float:
        """0 at GOOD, 1 at BAD (beyond either side past them)."""
        return (value - self.good) / (self.bad - self.good)

    def verdict(self, measured: Measured) -> str:
        if measured.value is None:
            return UNBUILDABLE if measured.unbuildable else BROKEN
        if not self.steady(measured.values):
            return UNSTEADY
        share = self.share(measured.value)
        if share >= 1 - self.tolerance:
            return BAD
        return GOOD if share <= self.tolerance else PARTIAL

    def steady(self, values: Sequence[float]) -> bool:
        """A trial's runs agree as well as GOOD's and BAD's own did (or within the
        tolerance's share of the gap, which no verdict can see inside), the run farthest
        from their median left out from three on: on a machine busy in bursts, a run stalled
        to a tenth of GOOD's speed beside one at GOOD's has a median that says nothing of the
        set, and a false bad is a false culprit."""
        kept = without_farthest(values) if len(values) >= 3 else list(values)
        if len(kept) < 2:
            return True
        room = max(self.noise, self.tolerance * abs(self.bad - self.good))
        return max(kept) - min(kept) <= room

    def fell(self, good: Measured) -> bool:
        """GOOD, measured again, no longer reads good on its own first reading: the
        machine is not the one the references saw, and cannot answer now."""
        return self.verdict(good) != GOOD

    def _side(self, value: float) -> str:
        """Which verdict one run alone reads as."""
        return self.verdict(Measured(values=(value,)))

    def clear(self, values: Sequence[float]) -> bool:
        """A trial's runs so far give a verdict that one more could not turn: it is good or
        bad, and farther from the border of either than the references' noise (and than a
        tenth of the gap, which a run that once dips can cross). Partial is never clear from
        one run: a move costs the gap or not, and a run in between is more often noise. Nor
        is bad: what slows a run (the machine busy elsewhere) makes a good set look bad,
        never a bad one good, and a false bad leads the search to a false culprit, so a
        second run confirms it. Two runs that disagree confirm nothing: their median is
        their mean, which one stalled run drags past the border (a run at a tenth of
        GOOD's speed and one at GOOD's read bad), so a third decides."""
        if not values or not self.steady(values):
            return False
        median = metric.median(values)
        share = self.share(median)
        if self.tolerance < share < 1 - self.tolerance:
            return False
        if len(values) == 1 and share >= 1 - self.tolerance:
            return False
        if len(values) == 2 and any(self._side(v) != self._side(median) for v in values):
            return False
        margin = max(self.noise / abs(self.bad - self.good), 0.1)
        return all(abs(share - border) > margin for border in (self.tolerance, 1 - self.tolerance))


@dataclass(frozen=True, kw_only=True)
class Trial(Generic[T]):
    applied: frozenset[T]
    measured: Measured
    verdict: str


@dataclass(frozen=True, kw_only=True)
class Outcome(Generic[T]):
    """``stop`` is "" when ``culprits`` is shown minimal; else why the search stopped:
    ``good-failed``/``bad-failed`` (broken or unbuildable), ``alike``, ``better`` (before
    any search: BAD is not worse), ``cannot-tell`` (their gap inside their noise: no verdict
    either way), ``good-worse`` (GOOD, rebuilt, clearly worse than BAD: the trials do not
    reproduce the known-good state), ``unlike-lock`` (GOOD, rebuilt, worse than the lock's
    recorded benchmark: the same, said by the record), ``max-trials`` or ``unresolved``
    (trials that said nothing)."""

    trials: tuple[Trial[T], ...]
    culprits: tuple[T, ...] = ()
    suspects: tuple[T, ...] = ()  # where the culprits are, as far as the search got
    stop: str = ""
    scale: Scale | None = None
    again: Measured | None = None  # GOOD's runs beside the put-back's second look, if any

    def put_back(self) -> Trial[T] | None:
        """BAD with the culprits put back (every other move applied): good when they are
        the whole regression; None when not measured (no culprits, or --max-trials)."""
        if not self.culprits:
            return None
        every = frozenset().union(*(t.applied for t in self.trials))
        return self.trial(every - frozenset(self.culprits))

    def trial(self, applied: frozenset[T]) -> Trial[T] | None:
        return next((t for t in self.trials if t.applied == applied), None)


# measures GOOD and BAD (the sets given) in turn, until the predicate says their runs answer
References = Callable[
    [frozenset[T], frozenset[T], Callable[[Sequence[float], Sequence[float]], bool]],
    tuple[Measured, Measured],
]


# measures one set, run on (up to a limit of its own) until the predicate says its runs are
# clear
Until = Callable[[frozenset[T], Callable[[Sequence[float]], bool]], Measured]


class _Exhausted(Exception):
    """--max-trials reached."""


class _Session(Generic[T]):
    """Every set measured once, in the order asked, up to ``limit`` trials."""

    def __init__(
        self, measure: Callable[[frozenset[T]], Measured], limit: int, until: Until[T] | None
    ) -> None:
        self.measure, self.limit, self.until = measure, limit, until
        self.done: dict[frozenset[T], Measured] = {}
        self.scale: Scale | None = None
        self.suspects: list[T] = []
        # a set measured again beside GOOD is read on GOOD's new runs (``again``)
        self.anchors: dict[frozenset[T], Callable[[Measured], str]] = {}
        self.again: Measured | None = None

    def get(self, applied: frozenset[T]) -> Measured:
        if applied not in self.done:
            if len(self.done) >= self.limit:
                raise _Exhausted
            if self.until is not None and self.scale is not None:
                self.done[applied] = self.until(applied, self.scale.clear)
            else:
                self.done[applied] = self.measure(applied)
        return self.done[applied]

    def references(
        self,
        good: frozenset[T],
        bad: frozenset[T],
        together: References[T] | None,
    ) -> tuple[Measured, Measured]:
        if together is None:
            return self.get(good), self.get(bad)
        self.done[good], self.done[bad] = together(good, bad, told)
        return self.done[good], self.done[bad]

    def bad(self, applied: Sequence[T]) -> bool:
        assert self.scale is not None
        return self.scale.verdict(self.get(frozenset(applied))) == BAD

    def confirm(self, fix: frozenset[T], together: References[T] | None) -> None:
        """BAD with the culprits put back, measured; when it is not good, measured again
        beside GOOD, their runs in turn, and read on GOOD's new runs: "another move costs
        the gap too" is a claim, and a machine slowed for the few seconds of one trial (a
        neighbour's build) must not make it. GOOD itself (one move, put back) is known."""
        assert self.scale is not None
        first = self.get(fix) if fix else Measured()
        if first.value is None or self.scale.verdict(first) == GOOD or together is None:
            return  # GOOD itself, good, or broken (a failure is no machine's noise)
        scale = self.scale

        def anchored(good: Sequence[float]) -> Scale:
            return dataclasses.replace(scale, good=metric.median(good))

        again, measured = together(frozenset(), fix, lambda g, f: anchored(g).clear(f))
        if again.value is None or measured.value is None:
            return  # GOOD broke this time: the first reading stands
        self.done[fix], self.again = measured, again
        self.anchors[fix] = (
            (lambda _: UNSTEADY) if scale.fell(again) else anchored(again.values).verdict
        )

    def outcome(self, stop: str = "", culprits: Sequence[T] = ()) -> Outcome[T]:
        trials = tuple(
            Trial(applied=s, measured=m, verdict=self.verdict(s, m)) for s, m in self.done.items()
        )
        return Outcome(trials=trials, culprits=tuple(culprits), suspects=tuple(self.suspects),
                       stop=stop, scale=self.scale, again=self.again)  # fmt: skip

    def verdict(self, applied: frozenset[T], m: Measured) -> str:
        if applied in self.anchors:
            return self.anchors[applied](m)
        if self.scale is not None or m.value is None:
            return (self.scale or Scale(good=0, bad=1)).verdict(m)
        # no scale (GOOD or BAD said nothing, or they measure alike): each is itself
        return GOOD if not applied else BAD if len(applied) == len(self.suspects) else PARTIAL


def bisect(
    moves: Sequence[T],
    measure: Callable[[frozenset[T]], Measured],
    *,
    tolerance: float = TOLERANCE,
    direction: str | None = None,
    alike: float = ALIKE,
    max_trials: int = 64,
    references: References[T] | None = None,
    until: Until[T] | None = None,
    known: Known | None = None,
) -> Outcome[T]:
    """The smallest set of ``moves`` that, applied to GOOD, costs the gap to BAD.

    ``direction``: "higher" or "lower" is better; BAD measuring no worse than GOOD is then no
    regression. Without one, any gap is bisected (exit statuses: lower, 0 is good).
    ``references(good, bad, told)`` measures GOOD and BAD together, until ``told`` says
    their runs answer (else ``measure`` measures each); ``until(applied, clear)`` measures
    every other set until ``clear`` says its verdict is (else ``measure`` does, once).
    ``known``: what the known-good state measured when the lock was taken; GOOD, rebuilt,
    must not measure worse (:meth:`Known.holds`), or no verdict rests on it."""
    session: _Session[T] = _Session(measure, max(max_trials, 2), until)
    good, bad = session.references(frozenset(), frozenset(moves), references)
    session.suspects = list(moves)
    if good.value is None or bad.value is None:
        return session.outcome(stop="good-failed" if good.value is None else "bad-failed")
    if known is not None and not known.holds(good.values, direction):
        return session.outcome(stop="unlike-lock")
    if bad.value == good.value:
        return session.outcome(stop="alike")
    apart = separated(good.values, bad.values, alike)
    if (direction == "higher" and bad.value > good.value) or (
        direction == "lower" and bad.value < good.value
    ):
        # BAD no worse, as far as the noise tells: no regression. BAD clearly better: GOOD,
        # as the trials rebuild it, is not the known-good state (a busy machine, a fact the
        # lock never recorded), and nothing can be said of the regression
        return session.outcome(stop="good-worse" if apart else "better")
    if not apart:
        return session.outcome(stop="cannot-tell")
    noise = max(spread(good.values), spread(bad.values))
    session.scale = Scale(good=good.value, bad=bad.value, tolerance=tolerance, noise=noise)
    try:
        found = _ddmin(list(moves), session)
    except _Exhausted:
        return session.outcome(stop="max-trials")
    if not _minimal(found, session):
        return session.outcome(stop="unresolved")
    # the fix, tried: BAD without the culprits is good unless another move costs it too (two
    # that each fail the command alone: ddmin finds the first)
    with contextlib.suppress(_Exhausted):
        session.confirm(frozenset(moves) - frozenset(found), references)
    return session.outcome(culprits=tuple(found))


@dataclass(frozen=True, kw_only=True)
class Known:
    """The known-good state's own runs, recorded with the lock (``snapshot --bench``), and
    how far GOOD may fall from them: ``within`` a share of their median, or, when None,
    their noise as :func:`separated` reads it."""

    values: tuple[float, ...]
    within: float | None = None

    def holds(self, good: Sequence[float], direction: str | None) -> bool:
        """GOOD's runs measure what the known-good state did: not worse than the record
        beyond the band (better is the machine's, and takes nothing from the gap to BAD)."""
        rebuilt, recorded = metric.median(good), metric.median(self.values)
        worse = {"higher": rebuilt < recorded, "lower": rebuilt > recorded}.get(
            direction or "", rebuilt != recorded
        )
        if not worse:
            return True
        if self.within is not None:
            return abs(rebuilt - recorded) <= self.within * abs(recorded)
        return not separated(self.values, good)


def told(good: Sequence[float], bad: Sequence[float]) -> bool:
    """GOOD's and BAD's runs so far answer: they are separated, or neither varies at all
    (runs that repeat the same number exactly would repeat it again)."""
    still = bool(good and bad) and max(good) == min(good) and max(bad) == min(bad)
    return still or separated(good, bad)


def separated(good: Sequence[float], bad: Sequence[float], share: float = ALIKE) -> bool:
    """GOOD's runs and BAD's tell them apart: the gap between their medians is wider than
    either's spread and than ``share`` of the larger. Runs of one have no spread to see:
    with them, only the share decides."""
    if not good or not bad:
        return False
    low, high = metric.median(good), metric.median(bad)
    noise = max(spread(good), spread(bad))
    return abs(high - low) > max(noise, share * max(abs(low), abs(high)))


def spread(values: Sequence[float]) -> float:
    """How far apart runs fall: highest less lowest, once the run farthest from the median
    is left out where there are five or more (one cold start, a first run that compiled
    what the others found cached, must not hide the gap the rest show; two such are noise)."""
    if not values:
        return 0.0
    kept = without_farthest(values) if len(values) >= 5 else list(values)
    return max(kept) - min(kept)


def without_farthest(values: Sequence[float]) -> list[float]:
    """``values`` less the one farthest from their median."""
    kept = list(values)
    middle = metric.median(kept)
    kept.remove(max(kept, key=lambda v: abs(v - middle)))
    return kept


def _ddmin(c: list[T], session: _Session[T]) -> list[T]:
    """ddmin (Zeller and Hildebrandt, 2002) of ``c``, known bad: a 1-minimal bad subset."""
    n = 2
    while len(c) >= 2:
        session.suspects = c
        parts = _split(c, n)
        half = next((p for p in parts if session.bad(p)), None)
        if half is not None:  # as git bisect: the culprit is in there
            c, n = half, 2
            continue
        if n > 2:  # with two parts, each one's complement is the other part
            rest = next((r for p in parts if session.bad(r := [x for x in c if x not in p])),
                        None)  # fmt: skip
            if rest is not None:
                c, n = rest, max(n - 1, 2)
                continue
        if n >= len(c):
            break
        n = min(len(c), 2 * n)  # no part and no complement is bad alone: cut finer
    session.suspects = c
    return c


def _split(c: list[T], n: int) -> list[list[T]]:
    """``c`` in ``n`` runs of moves, in order, the first ones one longer when it does not
    divide evenly."""
    size, extra = divmod(len(c), n)
    out, at = [], 0
    for i in range(n):
        step = size + (i < extra)
        out.append(c[at : at + step])
        at += step
    return [p for p in out if p]


def _minimal(found: list[T], session: _Session[T]) -> bool:
    """Every move of ``found`` is needed: without any one of it the trial is good or
    partial, measured (a broken one proves nothing)."""
    assert session.scale is not None
    for x in found:
        rest = frozenset(found) - {x}
        measured = session.done.get(rest)
        if measured is None or session.scale.verdict(measured) not in (GOOD, PARTIAL):
            return False
    return True
