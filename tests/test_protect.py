"""protect with a real pip install and a real uv pip install of a package needing another torch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envguard import lockfile, protect, snapshot
from envguard.demo.incident import known_good, newer_torch
from tests.conftest import PipVenv, make_venv, offline_install, uv_bin, uv_install
from tests.project import invoke
from tests.test_cli import cli


@pytest.fixture
def protected(tmp_path: Path, pip_venv_at: PipVenv) -> tuple[Path, Path, Path]:
    house = tmp_path / "house"
    reqs = known_good(house)
    newer_torch(house)
    venv = pip_venv_at(tmp_path / "venv")  # python -m venv: pip included
    uv_install(venv, house, *reqs)
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, with_code=False, default_caches=False))
    done = cli("protect", str(lock), "--venv", str(venv))
    assert done.returncode == 0, done.stderr
    return venv, house, lock


def _torch(venv: Path) -> str:
    return snapshot.take(venv, with_code=False, default_caches=False).torch.version  # type: ignore[union-attr]


@pytest.mark.slow
def test_pip_install_cannot_replace_torch(protected) -> None:
    venv, house, _ = protected
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(house),
            "needs-new-torch",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "2.11.0+cu128" in done.stdout + done.stderr
    assert "pinned.by.envguard.protect" in done.stdout + done.stderr
    assert _torch(venv) == "2.11.0+cu128"


def test_uv_install_in_the_activated_venv_cannot_replace_torch(protected) -> None:
    venv, house, _ = protected
    script = (
        f". {venv}/bin/activate && {uv_bin()} pip install --offline --no-index "
        f"--find-links {house} needs-new-torch"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert done.returncode != 0 and "2.11.0+cu128" in done.stderr
    assert _torch(venv) == "2.11.0+cu128"
    # and deactivate takes the constraint away again
    after = subprocess.run(
        ["bash", "-c", f". {venv}/bin/activate && deactivate && echo ${{UV_CONSTRAINT:-unset}}"],
        capture_output=True,
        text=True,
    )
    assert after.stdout.strip() == "unset"


def test_envguard_run_applies_it_to_uv_without_activation(protected) -> None:
    venv, house, _ = protected
    done = cli(
        "run",
        "--venv",
        str(venv),
        "--",
        *offline_install(house, "needs-new-torch"),
    )
    assert done.returncode != 0
    assert _torch(venv) == "2.11.0+cu128"


@pytest.mark.slow
def test_a_compatible_install_still_works_and_unprotect_lifts_it(protected) -> None:
    venv, house, _ = protected
    ok = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(house),
            "harmless",
        ]
    )
    assert ok.returncode == 0
    assert cli("unprotect", "--venv", str(venv)).returncode == 0
    assert not (venv / protect.CONSTRAINTS).exists()
    assert "envguard" not in (venv / "bin" / "activate").read_text()
    freed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(house),
            "needs-new-torch",
        ]
    )
    assert freed.returncode == 0 and _torch(venv) == "2.14.1+cu130"


def test_unknown_extra_package_is_refused(protected, tmp_path: Path) -> None:
    venv, _, lock = protected
    done = cli("protect", str(lock), "--venv", str(venv), "--package", "not-there")
    assert done.returncode == 2 and "not in the lockfile" in done.stderr


def _fake_pips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Another environment's pips, first on PATH: each writes the marker it returns."""
    marker, bin_dir = tmp_path / "ran-outside", tmp_path / "elsewhere"
    bin_dir.mkdir()
    for name in ("pip", "pip3", "pip3.99"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return marker


@pytest.mark.slow
def test_envguard_run_pip_by_any_name_is_the_venvs_and_stays_pinned(
    protected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv, house, _ = protected
    marker = _fake_pips(tmp_path, monkeypatch)
    pip = ["install", "--no-index", "--find-links", str(house), "needs-new-torch"]
    code, _, err = invoke("run", "--venv", str(venv), "--", "pip3.99", *pip)
    assert code == 1 and not marker.exists(), err  # the venv's pip ran; the pins held
    assert _torch(venv) == "2.11.0+cu128"


def test_a_protected_venv_without_pip_refuses_pip_and_pins_uv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    house = tmp_path / "house"
    reqs = known_good(house)
    newer_torch(house)
    venv = make_venv(tmp_path / "venv")  # uv's: no pip inside
    uv_install(venv, house, *reqs)
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, with_code=False, default_caches=False))
    assert invoke("protect", str(lock), "--venv", str(venv))[0] == 0
    marker = _fake_pips(tmp_path, monkeypatch)
    pip = ["install", "--no-index", "--find-links", str(house), "needs-new-torch"]
    for form in (["pip"], ["python", "-m", "pip"]):
        code, _, err = invoke("run", "--venv", str(venv), "--", *form, *pip)
        assert code == 2 and "uv pip install" in err and not marker.exists(), err
    code, _, _ = invoke(
        "run", "--venv", str(venv), "--", *offline_install(house, "needs-new-torch")
    )
    assert code != 0 and _torch(venv) == "2.11.0+cu128"
