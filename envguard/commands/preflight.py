"""``envguard preflight``: what an install would change, before it runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from envguard import attribution, preflight, snapshot, targets
from envguard.commands.diff import apply
from envguard.config import Config
from envguard.results.preflight import PreflightDone


def check(cfg: Config, command: Sequence[str], *, venv: Path | None = None) -> PreflightDone:
    cmd = preflight.parse(command)
    target = targets.venv(preflight.venv_of(cmd, venv), cfg)
    before = snapshot.take(target, default_caches=False, with_code=False)
    forecast = preflight.forecast(before, preflight.dry_run(cmd, target))
    report = apply(forecast.report, cfg)
    done = PreflightDone(
        forecast=preflight.Forecast(report=report, reasons=forecast.reasons),
        venv=before.venv.path,
    )
    if done.forecast.critical():
        return dataclasses.replace(done, hint=attribution.tool_hint(command, done=False))
    return done
