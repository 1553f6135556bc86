"""``envguard run`` and ``envguard log``: installs journalled beside the venv's lock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import attribution, journal, preflight, protect, recording, targets
from envguard.commands.preflight import Bench, priced
from envguard.config import Config
from envguard.errors import ArgumentError, InstallerError
from envguard.price import Price
from envguard.results.journal import LogDone, RunDone, RunRefused


@dataclass(frozen=True, kw_only=True)
class MaxCost:
    """``--max-cost PCT``: the install is priced first, and refused when it costs more."""

    share: float  # of the benchmark's figure: 0.05 for 5%
    bench: Bench


def run(
    cfg: Config,
    command: Sequence[str],
    *,
    venv: Path | None = None,
    max_cost: MaxCost | None = None,
) -> RunDone | RunRefused:
    target = targets.venv(venv, cfg)
    price = None if max_cost is None else _price(cfg, command, target, max_cost)
    if price is not None and max_cost is not None and price.exceeds(max_cost.share):
        return RunRefused(price=price, max_cost=max_cost.share, venv=str(target))
    return _recorded(cfg, command, target, price)


def _price(cfg: Config, command: Sequence[str], target: Path, max_cost: MaxCost) -> Price:
    """The install's price on the lock's benchmark; a command that is no install has none."""
    try:
        cmd = preflight.parse(command)
    except (ArgumentError, InstallerError) as exc:
        raise ArgumentError(f"--max-cost prices installs: {exc}") from None
    preflight.venv_of(cmd, target)  # an install naming another venv is refused here too
    return priced(cfg, cmd, target, max_cost.bench)


def _recorded(cfg: Config, command: Sequence[str], target: Path, price: Price | None) -> RunDone:
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
    return RunDone(recorded=recorded, hint=hint, price=price)


def log(cfg: Config, *, venv: Path | None = None) -> LogDone:
    lock_path, _ = targets.lock_of_venv(targets.recorded(venv, cfg), cfg)
    path = journal.path_for(lock_path)
    return LogDone(journal=str(path), entries=tuple(journal.read(path)))
