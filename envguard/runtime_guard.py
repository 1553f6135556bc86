"""``envguard.guard``: refuse to train, before the first step, in an environment that drifted.

    import envguard
    envguard.guard("lockfiles/train.envguard.toml", fail_on="critical", ranks=True)

With ``ranks=True`` under an initialised ``torch.distributed`` process group, every rank
gathers every other rank's facts over that group (``all_gather_object``), so all of them stop
together, and rank 0 prints which ranks and hosts differ from the lock and from each other.
torch is imported here only, and only for ``ranks=True``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from envguard import drift, fleet, lockfile, snapshot
from envguard.errors import EnvguardError
from envguard.model import Snapshot


class DriftError(EnvguardError):
    """The running environment drifted from the lock beyond ``fail_on``."""


def guard(
    lock: str | os.PathLike[str] | Snapshot,
    *,
    fail_on: str = "critical",
    ranks: bool = False,
    venv: str | os.PathLike[str] | None = None,
    repo: str | os.PathLike[str] | None = None,
) -> drift.DriftReport:
    """Raise :class:`DriftError` if this process's environment drifted; return the report."""
    if fail_on not in drift.FAIL_ON:
        raise EnvguardError(f"fail_on must be one of {', '.join(drift.FAIL_ON)}, not {fail_on!r}")
    locked = lock if isinstance(lock, Snapshot) else lockfile.read(Path(lock))
    live = snapshot.take(
        Path(venv) if venv else Path(sys.prefix),
        repo=Path(repo) if repo else None,
        name=locked.name,
    )
    report = drift.compare(locked, live)
    mine = _summary(report, live, fail_on)
    everyone = _gather(mine) if ranks else [mine]
    failing = [r for r in everyone if r["fails"]]
    if failing:
        message = _message(failing, everyone, locked)
        if ranks and mine["rank"] == 0:
            print(message, file=sys.stderr, flush=True)
        raise DriftError(message)
    return report


def _summary(report: drift.DriftReport, live: Snapshot, fail_on: str) -> dict[str, Any]:
    counted = [c for c in report.changes if _counts(c, fail_on)]
    facts = fleet.facts(live)
    # environment variables are part of what ranks must agree on
    facts["env"] = hashlib.sha256(json.dumps(live.environ, sort_keys=True).encode()).hexdigest()[
        :12
    ]
    return {
        "rank": int(os.environ.get("RANK", "0")),
        "host": live.host.hostname,
        "fails": bool(counted),
        "changes": [f"{c.severity} {c.subject}: {c.old} → {c.new}" for c in counted[:6]],
        "facts": facts,
    }


def _counts(change: drift.Change, fail_on: str) -> bool:
    if fail_on == "any":
        return True
    return drift.SEVERITIES.index(change.severity) <= drift.SEVERITIES.index(fail_on)


def _gather(mine: dict[str, Any]) -> list[dict[str, Any]]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise EnvguardError(
            "guard(ranks=True) needs an initialised torch.distributed process "
            "group: call it after init_process_group"
        )
    mine["rank"] = dist.get_rank()
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    return sorted(gathered, key=lambda r: r["rank"])


def _message(
    failing: list[dict[str, Any]], everyone: list[dict[str, Any]], locked: Snapshot
) -> str:
    lines = [
        f"envguard: {len(failing)} of {len(everyone)} rank(s) drifted from the lock "
        f"{locked.name!r} ({locked.taken_at}); stopping before training"
    ]
    for r in failing:
        lines.append(f"  rank {r['rank']} on {r['host']}: " + "; ".join(r["changes"]))
    if len(everyone) > 1:
        groups: dict[str, list[int]] = {}
        for r in everyone:
            key = json.dumps(r["facts"], sort_keys=True)
            groups.setdefault(key, []).append(r["rank"])
        if len(groups) > 1:
            split = " | ".join(f"ranks {', '.join(map(str, ranks))}" for ranks in groups.values())
            lines.append(f"  ranks disagree with each other: {split}")
    return "\n".join(lines)
