"""Environment variables that change how training runs, with secrets redacted.

Which names count is :mod:`envguard.catalog`'s: launch topology (RANK, MASTER_ADDR, SLURM_*,
TORCHELASTIC_*) and what activating a venv sets are left out, since they differ on every run
and every rank without changing how a step trains.
"""

from __future__ import annotations

from collections.abc import Mapping

from envguard.catalog import env_captured
from envguard.redact import redact_value


def capture(environ: Mapping[str, str]) -> dict[str, str]:
    """The training-relevant subset of ``environ``, sorted, each value redacted as needed."""
    picked = {
        name: redact_value(name, value) for name, value in environ.items() if env_captured(name)
    }
    return dict(sorted(picked.items()))
