"""envguard.guard under torchrun with two CPU ranks (gloo): the real tier, needs torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import numpy  # noqa: F401  (all_gather_object pickles through numpy)
    import torch.distributed  # noqa: F401

    NO_TORCHRUN = ""
except (ImportError, OSError) as exc:  # absent, or a broken install: either way no torchrun
    NO_TORCHRUN = f"torchrun needs torch and numpy ({exc})"


@pytest.mark.real
@pytest.mark.skipif(bool(NO_TORCHRUN), reason=NO_TORCHRUN)
def test_torchrun_two_ranks_names_the_drifted_one(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("NCCL_ALGO", None)
    lock = tmp_path / "l.envguard.toml"
    subprocess.run(
        [sys.executable, "-m", "envguard", "snapshot", "--venv", sys.prefix, "-q", "-o", str(lock)],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_port=29533",
            str(Path(__file__).with_name("guard_worker.py")),
            str(lock),
            sys.prefix,
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 GUARD STOP" in done.stdout and "rank 1 GUARD STOP" in done.stdout
    assert "1 of 2 rank(s) drifted" in done.stdout
    assert "rank 1 on " in done.stdout and "NCCL_ALGO: unset → Tree" in done.stdout
    assert "ranks disagree with each other: ranks 0 | ranks 1" in done.stdout
