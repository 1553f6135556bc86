"""``envguard.guard``: refuse to train, before the first step, in an environment that drifted.

    import envguard
    envguard.guard("lockfiles/train.envguard.toml", fail_on="critical", ranks=True)

With ``ranks=True`` under an initialised ``torch.distributed`` process group, every rank
gathers every other rank's facts (``all_gather_object``) over a gloo group of its own, so
that the check works whatever the training backend and whatever drifted (an NCCL variable
that breaks NCCL's own collectives, a rank that has not called ``set_device`` yet): all ranks
stop together, and rank 0 prints which ranks and hosts differ from the lock and each other.
torch is imported here only, and only for ``ranks=True``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from envguard import catalog, config, drift, fleet, lockfile, snapshot, targets
from envguard.errors import ArgumentError, EnvguardError
from envguard.model import Snapshot
from envguard.output.human import change_line


class DriftError(EnvguardError):
    """The running environment drifted from the lock beyond ``fail_on``."""


def guard(
    lock: str | os.PathLike[str] | Snapshot | None = None,
    *,
    fail_on: str = "critical",
    ranks: bool = False,
    venv: str | os.PathLike[str] | None = None,
    repo: str | os.PathLike[str] | None = None,
    only: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    track: bool = False,
    fail_on_code: bool | None = None,
) -> drift.DriftReport:
    """Raise :class:`DriftError` if this process's environment drifted; return the report.

    ``track``: also record the lock and this report in the active MLflow or W&B run of a
    tracker the script imported (never imported here), with tags ``envguard.torch``,
    ``envguard.cuda`` and ``envguard.verdict``.
    ``lock``: a lockfile or a Snapshot; by default the project's lock, as a bare ``envguard
    diff`` finds it. ``venv``: by default this process's own (``sys.prefix``).
    ``only``/``ignore``: areas to judge (python, torch, cuda, gpu, code, caches, libraries,
    packages, env, host), as ``diff --only/--ignore`` takes them; by default the project's
    ``[tool.envguard]`` settings, as diff applies them (ignored variables and paths too).
    ``fail_on_code``: whether a change of the code (an uncommitted edit, a new commit) stops
    the run too; by default the project's ``fail-on-code``, else no: what makes a run not
    the known-good one is what the venv, CUDA, the GPU, the caches and the variables hold,
    and an edit of the training script is the loop a run is part of. Such a change is then
    said once, on stderr, and the run goes on.
    """
    cfg = config.load()
    cfg = dataclasses.replace(
        cfg,
        only=cfg.only if only is None else _areas(only),
        ignore=cfg.ignore if ignore is None else _areas(ignore),
    )
    if fail_on not in drift.FAIL_ON:
        raise ArgumentError(f"fail_on must be one of {', '.join(drift.FAIL_ON)}, not {fail_on!r}")
    unknown = sorted((set(cfg.only) | set(cfg.ignore)) - set(drift.AREAS))
    if unknown:
        raise ArgumentError(f"unknown area {unknown[0]!r}: one of {', '.join(drift.AREAS)}")
    cfg.judging()
    if lock is None:  # the project's lock for this process's venv, as `diff --venv` finds it
        lock = targets.lock_for(None, Path(venv) if venv else Path(sys.prefix), cfg)[0]
    locked = lock if isinstance(lock, Snapshot) else lockfile.read(Path(lock))
    # this process's own environment, unless told otherwise
    live = snapshot.live_for(
        locked,
        Path(venv) if venv else Path(sys.prefix),
        repo=Path(repo) if repo else None,
        lock_path=None if isinstance(lock, Snapshot) else Path(lock),
    )
    report = cfg.judged(drift.compare(locked, live))
    code_stops = cfg.fail_on_code if fail_on_code is None else fail_on_code
    mine = _summary(report, live, fail_on, code_stops=code_stops)
    everyone = _gather(mine) if ranks else [mine]
    failing = [r for r in everyone if r["fails"]]
    if track and mine["rank"] == 0:  # one record per job, whatever the world size
        from envguard import tracking

        lock_path = None if isinstance(lock, Snapshot) else Path(lock)
        tracking.record(lock_path, locked, report, "drift" if failing else "clean")
    if mine["code"] and mine["rank"] == 0:  # once a job, as guard is called at its start
        print(_code_note(mine["code"]), file=sys.stderr, flush=True)
    if failing:
        message = _message(failing, everyone, locked)
        if ranks and mine["rank"] == 0:
            from envguard import _term
            from envguard.redact import redact

            # hosts and values come from every rank's lock and environment: text, no secret
            print(_term.visible(redact(message)), file=sys.stderr, flush=True)
        raise DriftError(message)
    return report


def _areas(given: str | Iterable[str]) -> tuple[str, ...]:
    """``"torch,cuda"`` as diff's flag takes it, or a list; never a string's letters."""
    items = given.split(",") if isinstance(given, str) else given
    return tuple(a.strip() for a in items if a.strip())


def _summary(
    report: drift.DriftReport, live: Snapshot, fail_on: str, *, code_stops: bool
) -> dict[str, Any]:
    at = [c for c in report.changes if c.counts_at(fail_on)]
    counted = [c for c in at if code_stops or c.area != "code"]
    code = [] if code_stops else [change_line(c) for c in at if c.area == "code"]
    facts = fleet.facts(live)
    # environment variables are part of what ranks must agree on, not what the launcher
    # sets differently on each (Slurm's per-rank CUDA_VISIBLE_DEVICES)
    launchers = (live.launcher,) if live.launcher else ()
    env = {k: v for k, v in live.environ.items() if not catalog.set_for_you(k, None, v, launchers)}
    facts["env"] = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "rank": int(os.environ.get("RANK", "0")),
        "host": live.host.hostname,
        "fails": bool(counted),
        "changes": [change_line(c) for c in counted[:_SHOWN]],
        "more": max(0, len(counted) - _SHOWN),
        "code": code,  # what of the code differs and does not stop the run
        "facts": facts,
    }


_SHOWN = 6  # changes per rank in the message; the rest counted, and diff lists them all


def _code_note(changes: list[str]) -> str:
    """The code's changes, said and let pass: with redaction, as every line guard prints."""
    from envguard import _term
    from envguard.redact import redact

    shown = "; ".join(changes[:_SHOWN]) + (
        f"; and {len(changes) - _SHOWN} more" if len(changes) > _SHOWN else ""
    )
    text = (
        f"envguard: warning: the code differs from the lock's ({shown}); the run goes on "
        "(guard(fail_on_code=True), or fail-on-code in [tool.envguard], stops for it)"
    )
    return _term.visible(redact(text))


def _gather(mine: dict[str, Any]) -> list[dict[str, Any]]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise ArgumentError(
            "guard(ranks=True) needs an initialised torch.distributed process "
            "group: call it after init_process_group"
        )
    mine["rank"] = dist.get_rank()
    gathered: list[Any] = [None] * dist.get_world_size()
    # A gloo group of our own: NCCL's collectives need set_device first, and a drifted NCCL
    # variable can break them, which is exactly what this check must be able to report.
    group = dist.new_group(backend="gloo")
    try:
        dist.all_gather_object(gathered, mine, group=group)
    finally:
        dist.destroy_process_group(group)
    return sorted(gathered, key=lambda r: r["rank"])


def _message(
    failing: list[dict[str, Any]], everyone: list[dict[str, Any]], locked: Snapshot
) -> str:
    lines = [
        f"envguard: {len(failing)} of {len(everyone)} rank(s) drifted from the lock "
        f"{locked.name!r} ({locked.taken_at}); stopping before training"
    ]
    for r in failing:
        more = f"; and {r['more']} more (envguard diff lists them)" if r.get("more") else ""
        lines.append(f"  rank {r['rank']} on {r['host']}: " + "; ".join(r["changes"]) + more)
    if len(everyone) > 1:
        groups: dict[str, list[int]] = {}
        for r in everyone:
            key = json.dumps(r["facts"], sort_keys=True)
            groups.setdefault(key, []).append(r["rank"])
        if len(groups) > 1:
            split = " | ".join(f"ranks {', '.join(map(str, ranks))}" for ranks in groups.values())
            lines.append(f"  ranks disagree with each other: {split}")
    return "\n".join(lines)
