"""``envguard preflight``: what an install would change, before it runs; with ``--bench``,
what it would cost the lock's benchmark, measured beside the venv (:mod:`envguard.price`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from envguard import attribution, benchmark, preflight, price, snapshot, targets
from envguard.bisect import trials
from envguard.commands.diff import apply
from envguard.config import Config
from envguard.errors import ArgumentError
from envguard.results.preflight import PreflightDone


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bench:
    """``--bench``: price the install on the lock's benchmark (``lock`` None: the venv's)."""

    lock: Path | None = None
    options: price.Options = dataclasses.field(default_factory=price.Options)
    on_event: Callable[[trials.Event], None] | None = None


def check(
    cfg: Config, command: Sequence[str], *, venv: Path | None = None, bench: Bench | None = None
) -> PreflightDone:
    cmd = preflight.parse(command)
    target = targets.venv(preflight.venv_of(cmd, venv), cfg)
    before = snapshot.take(target, default_caches=False, with_code=False)
    sources = bench.options.overrides if bench is not None else None
    forecast = preflight.forecast(before, preflight.dry_run(cmd, target, sources))
    report = apply(forecast.report, cfg)
    done = PreflightDone(
        forecast=preflight.Forecast(report=report, reasons=forecast.reasons),
        venv=before.venv.path,
        price=None if bench is None else priced(cfg, cmd, target, bench),
    )
    if done.forecast.critical():
        return dataclasses.replace(done, hint=attribution.tool_hint(command, done=False))
    return done


def priced(cfg: Config, cmd: preflight.Command, target: Path, bench: Bench) -> price.Price:
    """The install's price on the benchmark of the lock that recorded ``target``."""
    path, locked, _ = targets.lock_for(bench.lock, target, cfg)
    if locked.bench is None:
        raise ArgumentError(
            f"{path} records no benchmark to price the install with: take the lock with "
            "`envguard snapshot --bench -- COMMAND...`"
        )
    live = snapshot.live_for(locked, target, lock_path=path)
    cwd = Path.cwd()
    if live.code is not None:
        cwd = benchmark.recorded_cwd(Path(live.code.root), locked.bench.cwd) or cwd
    return price.price(cmd, live, locked.bench, lock_path=path, cwd=cwd,
                       options=bench.options, on_event=bench.on_event)  # fmt: skip
