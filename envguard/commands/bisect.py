"""``envguard bisect``: which of the facts that drifted since the lock costs the throughput.

GOOD is what the lock recorded, BAD the live environment, picked as diff picks them. Each
trial is GOOD with some moves applied (:mod:`envguard.bisect.trials`), the user's command
measured in it; the search (:mod:`envguard.bisect.search`) picks the sets to try. Nothing of
the user's is touched: trials live in a work folder that is cleaned however the run ends.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envguard import benchmark, snapshot, targets
from envguard.bisect import metric, moves, search, trials
from envguard.bisect.metric import number
from envguard.config import Config
from envguard.drift.areas import ALONE
from envguard.errors import ArgumentError, BisectError, EnvguardError
from envguard.model import Benchmark, Snapshot
from envguard.restore.plan import Overrides
from envguard.results.bisect import UNTOLD, BisectDone, Culprit, TrialRow


@dataclass(frozen=True, kw_only=True)
class Options:
    command: tuple[str, ...]
    metric: str = ""  # the regex whose first group is the number; "": exit statuses decide
    direction: str = ""  # "higher" or "lower" is better; "" either way
    unit: str = ""  # how the number reads on screen (Ktok/s)
    runs: int = 1
    tolerance: float = search.TOLERANCE
    timeout: float = 3600.0
    max_trials: int = 64
    keep: Path | None = None
    python: str | None = None
    overrides: Overrides = field(default_factory=Overrides)
    trust_env: bool = False  # --trust-lock-env: the lock's loader variables may be set
    good_within: float | None = None  # --good-within, a share; None: the record's own noise
    cache_dirs: tuple[Path, ...] = ()  # --cache-dir: custom caches a trial's copy stands in


def bisect(
    cfg: Config,
    lock: Path | None,
    *,
    venv: Path | None,
    repo: Path | None,
    options: Options,
    on_event: Callable[[trials.Event], None] | None = None,
) -> BisectDone:
    path, good, venv_path = targets.lock_for(lock, venv, cfg)
    options, recorded, said = _benchmark(options, good.bench)
    try:
        pattern = metric.compile_metric(options.metric) if options.metric else None
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None
    bad = snapshot.live_for(good, venv_path, repo=repo, lock_path=path)
    cwd = Path.cwd()
    if recorded is not None and not said and bad.code is not None:
        cwd = benchmark.recorded_cwd(Path(bad.code.root), recorded.cwd) or cwd
    sides = trials.Sides(lock_path=path.absolute(), good=good, bad=bad, environ=dict(os.environ),
                         cwd=cwd, cache_store=cfg.cache_store)  # fmt: skip
    settings = trials.Settings(command=options.command, metric=pattern, runs=options.runs,
                               timeout=options.timeout, overrides=options.overrides,
                               python=options.python,
                               cache_dirs=(*options.cache_dirs, *cfg.cache_dirs))  # fmt: skip
    started = time.monotonic()
    with trials.Workspace(options.keep) as work:
        derived, warm = _moves(sides, work, trust_env=options.trust_env,
                               cache_dirs=settings.cache_dirs)  # fmt: skip
        if not derived.moves:
            why = f" ({'; '.join(derived.notes)})" if derived.notes else ""
            raise BisectError(f"nothing to bisect: no fact a trial can move differs{why}")
        runner = trials.Trials(sides, derived.moves, settings, work, warm=warm, on_event=on_event)
        outcome = search.bisect(
            derived.moves,
            runner,
            tolerance=options.tolerance,
            # exit statuses: 0 is good, anything else bad
            direction=options.direction or (None if pattern else "lower"),
            max_trials=options.max_trials,
            references=runner.references,
            until=runner.until,
            known=None if recorded is None else
            search.Known(values=recorded.values, within=options.good_within),
        )  # fmt: skip
    done = BisectDone(
        lock=str(path.absolute()), venv=str(Path(venv_path).absolute()),
        repo=bad.code.root if bad.code else "", command=options.command,
        metric=options.metric, direction=options.direction, unit=options.unit,
        runs=options.runs, tolerance=options.tolerance,
        good=_value(outcome, frozenset()), bad=_value(outcome, frozenset(derived.moves)),
        moves=derived.moves, trials=_rows(outcome, runner),
        notes=(*derived.notes, *runner.notes, *runner.untouched.notes(),
               *_unheld(good.bench, recorded)),
        seconds=time.monotonic() - started, work=str(work.root) if options.keep else "",
        recorded=recorded, within=options.good_within,
    )  # fmt: skip
    return _ended(done, outcome, sides, Path(venv_path), runner.reaching())


def _benchmark(options: Options, bench: Benchmark | None) -> tuple[Options, Benchmark | None, bool]:
    """The command to run, the lock's benchmark GOOD is held to (None: none applies), and
    whether the user gave the command. Without one, the lock's own (``snapshot --bench``)
    runs, with its metric, direction and unit unless given; the record holds GOOD only
    where the command and metric are the ones it measured."""
    said = bool(options.command)
    if not said:
        if bench is None:
            raise ArgumentError(
                "nothing to run: envguard bisect [LOCK] -- COMMAND..., or record the "
                "benchmark with the lock: envguard snapshot --bench -- COMMAND..."
            )
        options = dataclasses.replace(
            options, command=bench.command, metric=options.metric or bench.metric,
            direction=options.direction or bench.direction, unit=options.unit or bench.unit,
        )  # fmt: skip
    if options.direction and not options.metric:
        raise ArgumentError("--higher-is-better and --lower-is-better need --metric")
    applies = (
        bench is not None and options.command == bench.command and options.metric == bench.metric
    )
    return options, bench if applies else None, said


def _unheld(bench: Benchmark | None, recorded: Benchmark | None) -> tuple[str, ...]:
    """Why the lock's benchmark holds GOOD to nothing: another command or metric runs."""
    if bench is None or recorded is not None:
        return ()
    return (
        f"the lock recorded the speed of `{moves.shell(bench.command)}`"
        f"{f' with --metric {moves.shell((bench.metric,))}' if bench.metric else ''}, not of "
        "this command: GOOD is held to no record",
    )


def _moves(
    sides: trials.Sides, work: trials.Workspace, *, trust_env: bool, cache_dirs: tuple[Path, ...]
) -> tuple[moves.Derived, dict[str, Path]]:
    """The moves, and GOOD's caches unpacked for them (only when a cache is a move)."""
    from envguard.restore import cache_archive

    good, bad, environ = sides.good, sides.bad, sides.environ
    saved = cache_archive.located(sides.lock_path, good, sides.cache_store).is_file()
    derived = moves.derive(
        good, bad, warm=moves.saved_caches(good) if saved else (), trust_env=trust_env,
        environ=environ, cache_dirs=cache_dirs,
    )  # fmt: skip
    if not any(m.kind == "caches" for m in derived.moves):
        return derived, {}
    try:
        warm = trials.unpack_warm(sides.lock_path, good, work.root / "warm", environ, cache_dirs,
                                  store=sides.cache_store)  # fmt: skip
    except EnvguardError as exc:
        derived = moves.derive(good, bad, trust_env=trust_env, environ=environ,
                               cache_dirs=cache_dirs)  # fmt: skip
        why = f"the lock's saved caches cannot be unpacked for the trials ({exc})"
        return dataclasses.replace(derived, notes=(*derived.notes, why)), {}
    derived = moves.derive(good, bad, warm=warm, trust_env=trust_env, environ=environ,
                           cache_dirs=cache_dirs)  # fmt: skip
    return derived, warm


def _value(outcome: search.Outcome[moves.Move], applied: frozenset[moves.Move]) -> float | None:
    trial = outcome.trial(applied)
    return trial.measured.value if trial is not None else None


def _rows(outcome: search.Outcome[moves.Move], runner: trials.Trials) -> tuple[TrialRow, ...]:
    rows = []
    for t in outcome.trials:
        timing = runner.timings[t.applied]
        rows.append(
            TrialRow(
                index=timing.index,
                applied=tuple(m for m in runner.moves if m in t.applied),
                values=t.measured.values,
                value=t.measured.value,
                verdict=t.verdict,
                seconds=timing.seconds,
                build_seconds=timing.build_seconds,
                run_seconds=timing.run_seconds,
                failure=t.measured.failure,
            )
        )
    return tuple(rows)


def _ended(
    done: BisectDone,
    outcome: search.Outcome[moves.Move],
    sides: trials.Sides,
    venv: Path,
    reaching: list[str],
) -> BisectDone:
    """The result, as the search ended; ``reaching``: what of the runs reaches the live
    venv, said first where GOOD measured as it should not."""
    refusal = _refusal(done, outcome)
    if refusal:  # an error line, the only thing said: what bisect noted may be why
        said = f"{refusal} ({'; '.join(done.notes)})" if done.notes else refusal
        return dataclasses.replace(done, refusal=said)
    if outcome.stop in UNTOLD:
        if outcome.stop == "cannot-tell":
            note = _noise_note(done)
        elif outcome.stop == "good-worse":
            note = _worse_note(done, reaching)
        else:
            note = _unlike_note(done, sides, reaching)
        notes = (*done.notes, note)
        return dataclasses.replace(done, stop=outcome.stop, suspects=outcome.suspects, notes=notes)
    if outcome.stop:
        notes = done.notes
        if reaching and outcome.stop == "alike":  # alike as BAD: every trial may be BAD
            notes = (*notes, _reaching_note(reaching))
        return dataclasses.replace(done, stop=outcome.stop, suspects=outcome.suspects, notes=notes)
    culprits = tuple(
        Culprit(
            move=m,
            alone=_value(outcome, frozenset({m})),
            fix=moves.fix(m, sides.good, sides.lock_path, venv.absolute()),
        )
        for m in outcome.culprits
    )
    tried = outcome.put_back()
    notes = done.notes
    if tried is not None and tried.verdict != search.GOOD:
        notes = (*notes, _put_back_note(done, outcome, tried))
    return dataclasses.replace(
        done, culprits=culprits, together=_value(outcome, frozenset(outcome.culprits)),
        put_back=tried.measured.value if tried is not None else None,
        put_back_verdict=tried.verdict if tried is not None else "", notes=notes,
        put_back_good=outcome.again.value if outcome.again is not None else None,
    )  # fmt: skip


def _noise_note(done: BisectDone) -> str:
    """Why GOOD and BAD cannot be told apart, in their own figures."""
    noise = done.noise()
    good, bad = done.good or 0.0, done.bad or 0.0
    gap = abs(bad - good)
    share = f" ({gap / abs(good):.0%})" if good else ""
    spread = max(noise["good"]["spread"] or 0.0, noise["bad"]["spread"] or 0.0)
    unit = f" {done.unit}" if done.unit else ""
    if gap <= search.ALIKE * max(abs(good), abs(bad)):
        inside = f"under {search.ALIKE:.0%}, too small a gap to bisect"
    else:
        runs = noise["good"]["runs"]
        inside = f"within their runs' spread ({number(spread)}{unit} in {runs} each)"
    return (
        f"GOOD {number(good)} and BAD {number(bad)}{unit} differ by {number(gap)}{share}, "
        f"{inside}: a quieter machine, a longer benchmark or more --runs may tell them apart"
    )


def _worse_note(done: BisectDone, reaching: list[str]) -> str:
    """GOOD, as the trials rebuild it, measures worse than BAD: what can do that, what
    envguard can check first."""
    unit = f" {done.unit}" if done.unit else ""
    figures = (
        f"GOOD measures {number(done.good)}{unit} and BAD {number(done.bad)}{unit}, each over "
        f"{done.noise()['good']['runs']} runs"
    )
    if reaching:
        return f"{figures}: {_reaching_note(reaching)}"
    return (
        f"{figures}: another process on the cores, a variable or file the lock never "
        "recorded, or a cache cold in the trials can slow GOOD so; bisect again on a quiet "
        "machine"
    )


def _reaching_note(reaching: list[str]) -> str:
    """The command reaches the live venv from every trial, so every trial measures it."""
    return (
        f"every trial may measure the live venv, not its own: {'; '.join(reaching)} (write "
        "the interpreter as `python` or by the venv's path, which envguard points at each "
        "trial's)"
    )


def _unlike_note(done: BisectDone, sides: trials.Sides, reaching: list[str]) -> str:
    """GOOD, as the trials rebuild it, measures worse than the lock recorded: the figures,
    and what differs from the state the lock was taken in that no trial puts back."""
    assert done.recorded is not None
    r, unit = done.recorded, f" {done.unit}" if done.unit else ""
    runs = done.noise()["good"]["runs"]
    band = (
        f"more than {done.within:.0%} from" if done.within is not None else "outside the noise of"
    )
    differs = _machine(sides.good, sides.bad)
    where = _reaching_note(reaching) if reaching else (
        f"what differs from the machine it was taken on: {'; '.join(differs)}" if differs else
        "nothing envguard records of the machine differs: another process on the cores, a "
        "variable or file the lock never recorded, or a cache cold in the trials can do it"
    )  # fmt: skip
    return (
        f"GOOD measures {metric.said(done.good, exits=not done.metric)}{unit} over {runs} runs, "
        f"{band} the {metric.said(r.median, exits=not r.metric)}{unit} the lock recorded "
        f"({metric.runs_said(r.values)}); {where}"
    )


def _machine(good: Snapshot, bad: Snapshot) -> list[str]:
    """The host's and GPUs' facts that differ from the lock's, as diff reads them: a
    trial runs on this machine, whatever the lock recorded."""
    from envguard._units import shown
    from envguard.drift.areas import named

    out = []
    for area in ("gpu", "host"):
        for c in named(area).rule()(good, bad, ALONE):
            out.append(f"{c.subject} {shown(c.old, c.unit) or '-'} → {shown(c.new, c.unit) or '-'}")
    return out


def _put_back_note(
    done: BisectDone, outcome: search.Outcome[moves.Move], tried: search.Trial[moves.Move]
) -> str:
    """BAD with the culprits put back is not good: another move costs it too (each of two
    enough alone), or the trial said nothing."""
    names = " and ".join(m.subject for m in outcome.culprits)
    if tried.measured.value is None:
        return f"BAD with {names} put back could not be measured ({tried.measured.failure})"
    unit = f" {done.unit}" if done.unit else ""
    again, scale = outcome.again, outcome.scale
    if again is not None and scale is not None and scale.fell(again):
        return (
            f"BAD with {names} put back measures {number(tried.measured.value or 0.0)}{unit}, "
            f"but GOOD, measured again beside it, measures {number(again.value or 0.0)}{unit}, "
            f"off its first {number(scale.good)}: the machine was busy; bisect again on a "
            f"quiet one to be sure"
        )
    if tried.verdict == search.UNSTEADY:
        runs = ", ".join(number(v) for v in tried.measured.values)
        return (
            f"BAD with {names} put back ran unsteadily ({runs}{unit}), its runs further apart "
            f"than GOOD's and BAD's: the machine was busy; bisect again on a quiet one to be sure"
        )
    value = metric.said(tried.measured.value, exits=not done.metric)
    how = "part of the gap" if tried.verdict == search.PARTIAL else "it"
    return (
        f"BAD with {names} put back still measures {value}{unit}: another drifted fact costs "
        f"{how} too; put {names} back and bisect again"
    )


def _refusal(done: BisectDone, outcome: search.Outcome[moves.Move]) -> str:
    """Why the search could not start, in one line; "" when it ran."""
    first = {t.index: t for t in done.trials}
    if outcome.stop in ("good-failed", "bad-failed"):
        which, row = ("GOOD", first[1]) if outcome.stop == "good-failed" else ("BAD", first[2])
        how = "cannot be built" if row.verdict == search.UNBUILDABLE else "breaks the command"
        return f"{which} {how} ({row.failure}): nothing to compare with"
    if outcome.stop not in ("alike", "better"):
        return ""
    if not done.metric:
        says = {0.0: "succeeds", 1.0: "fails"}
        return (
            f"no regression to bisect: the command {says.get(done.good or 0.0, 'succeeds')} in "
            f"GOOD and {says.get(done.bad or 0.0, 'succeeds')} in BAD"
        )
    unit = f" {done.unit}" if done.unit else ""
    if outcome.stop == "alike":
        return (
            f"no regression to bisect: GOOD {number(done.good)} and BAD {number(done.bad)}{unit} "
            "measure alike"
        )
    return (
        f"no regression to bisect: BAD {number(done.bad)}{unit} is no worse than GOOD "
        f"{number(done.good)} ({done.direction} is better)"
    )
