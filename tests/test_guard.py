"""envguard.guard in-process, and under torchrun with two CPU ranks (gloo)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

import envguard
from envguard import lockfile, snapshot
from envguard.runtime_guard import DriftError
from tests.conftest import make_venv
from tests.project import invoke


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


def test_guard_says_a_group_by_its_reason_and_counts_what_it_left_out(
    project, sglang_house: Path
) -> None:
    from envguard.demo import incident

    project.snapshot()
    incident.swap_in_sglang(project.venv, sglang_house)
    with pytest.raises(DriftError) as stopped:
        envguard.guard(project.lock, venv=project.venv, fail_on="warning")
    message = str(stopped.value)
    assert ":  →" not in message and ": None → None" not in message
    assert "Inductor cache: built for another stack" in message  # a change without values
    assert re.search(r"; and \d+ more \(envguard diff lists them\)", message)


def test_guard_takes_the_lock_of_the_venv_it_runs_in(project, house: Path, monkeypatch) -> None:
    """Several locks in the project: guard() checks the one that recorded this process's venv,
    not whatever VIRTUAL_ENV or ./.venv say."""
    from tests.conftest import make_venv as new_venv
    from tests.conftest import uv_install

    project.snapshot()
    other = new_venv(project.root.parent / "other-venv")
    uv_install(other, house, "plainpkg==2.4")
    code, _, err = invoke("snapshot", "-q", "--venv", str(other), "--name", "other")
    assert code == 0, err
    monkeypatch.setattr(sys, "prefix", str(other))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    report = envguard.guard()  # other's own lock: clean, though ./.venv has another lock
    assert not report.fails("warning")


def test_an_edit_of_the_training_code_is_said_once_and_the_run_goes_on(
    project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The edit-and-run loop (#32): a comment added to train.py, uncommitted, and a commit of
    model.py: guard() at its default says both once on stderr and returns; diff still calls
    them critical. Under fail_on_code=True, or fail-on-code in [tool.envguard], it stops."""
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("train.py", "import model\n\n# try a larger batch\nmodel.forward(1)\n")
    project.write("model.py", "def forward(x):\n    return x  # checked\n")
    project.commit("model: a note", "model.py")
    report = envguard.guard(project.lock, venv=project.venv)
    assert report.fails("critical")  # the report says what differs, whatever stops
    err = capsys.readouterr().err
    assert err.count("envguard: warning: the code differs from the lock's") == 1
    assert "train.py" in err and "the run goes on" in err
    with pytest.raises(DriftError, match=r"train\.py"):
        envguard.guard(project.lock, venv=project.venv, fail_on_code=True)
    project.write("envguard.toml", "fail-on-code = true\n")
    with pytest.raises(DriftError, match=r"train\.py"):
        envguard.guard(project.lock, venv=project.venv)
    envguard.guard(project.lock, venv=project.venv, fail_on_code=False)  # the call decides


def test_what_is_not_code_still_stops_beside_an_edit(project, monkeypatch) -> None:
    """Letting the code pass lets nothing else: a variable that makes a step several times
    slower stops the run, and the message names it, not the edit."""
    project.snapshot()
    project.write("train.py", "import model\n\n# a comment\nmodel.forward(1)\n")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    with pytest.raises(DriftError) as stopped:
        envguard.guard(project.lock, venv=project.venv)
    assert "NVIDIA_TF32_OVERRIDE" in str(stopped.value)
    assert "train.py" not in str(stopped.value)
