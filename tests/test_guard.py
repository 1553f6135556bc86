"""envguard.guard in-process, and under torchrun with two CPU ranks (gloo)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import envguard
from envguard import lockfile, snapshot
from envguard.runtime_guard import DriftError
from tests.conftest import make_venv


def test_guard_passes_then_stops_on_drift(tmp_path: Path, monkeypatch) -> None:
    venv = make_venv(tmp_path / "venv")
    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "l.envguard.toml"
    lockfile.write(lock, snapshot.take(venv))
    report = envguard.guard(lock, venv=venv)
    assert not report.fails("critical")
    snap = lockfile.read(lock)
    older = dataclasses.replace(snap, python=dataclasses.replace(snap.python, version="3.9.1"))
    with pytest.raises(DriftError, match=r"(?s)1 of 1 rank\(s\) drifted .* critical Python"):
        envguard.guard(older, venv=venv)
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    envguard.guard(lock, venv=venv)  # a warning passes fail_on="critical"
    with pytest.raises(DriftError, match="NCCL_ALGO"):
        envguard.guard(lock, venv=venv, fail_on="warning")
    with pytest.raises(envguard.runtime_guard.EnvguardError, match="fail_on must be"):
        envguard.guard(lock, venv=venv, fail_on="sometimes")


def test_import_envguard_does_not_import_torch_or_the_core() -> None:
    code = (
        "import sys, envguard; envguard.__version__; "
        "print('torch' in sys.modules, 'envguard.snapshot' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]
