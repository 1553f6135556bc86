"""Which venv ``snapshot`` takes, and why, said on its screen; envguard's own venv (the one it
runs from, ``sys.prefix``) is never taken by accident: only when ``--venv`` names it. The hot
path (``python -m envguard``) and click agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_venv
from tests.project import invoke

_OWN = {"VIRTUAL_ENV": sys.prefix}


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a folder of its own: no ./.venv, no project, unless made


def _hot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``envguard ARGS`` through __main__, the click-free hot path."""
    return subprocess.run(
        [sys.executable, "-m", "envguard", *args],
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "250", **env},
        cwd=Path.cwd(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _why(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.lstrip().startswith("venv from")]
    return line.split("venv from", 1)[1].strip()


@pytest.mark.parametrize("args", [["snapshot"], ["snapshot", "--json"], ["run", "--", "true"]])
def test_envguards_own_venv_active_is_refused(tmp_path: Path, args: list[str]) -> None:
    code, out, err = invoke(*args, env=_OWN)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "envguard runs from" in err and f"--venv {sys.prefix}" in err
    assert "--venv PATH" in err and not (tmp_path / "lockfiles").exists()
    if "--json" in args:
        assert json.loads(out)["error"] == err.removeprefix("error: ").strip()


def test_the_hot_path_refuses_it_in_the_same_words(tmp_path: Path) -> None:
    hot = _hot("snapshot", env=_OWN)
    code, out, err = invoke("snapshot", env=_OWN)
    assert (hot.returncode, hot.stdout, hot.stderr) == (code, out, err)


def test_named_with_venv_it_is_taken(tmp_path: Path) -> None:
    lock = tmp_path / "own.envguard.toml"
    code, out, err = invoke("snapshot", "--venv", sys.prefix, "-o", str(lock), env=_OWN)
    assert code == 0, err
    assert lock.is_file() and _why(out) == "--venv"


def test_the_screen_says_the_active_venv_was_taken(tmp_path: Path) -> None:
    active = make_venv(tmp_path / "train")
    env = {"VIRTUAL_ENV": str(active)}
    code, out, err = invoke("snapshot", env=env)
    assert code == 0, err
    assert out.startswith("Snapshot of train →") and _why(out) == "the active venv ($VIRTUAL_ENV)"
    hot = _hot("snapshot", env=env)
    assert hot.returncode == 0 and _why(hot.stdout) == _why(out)


def test_the_screen_says_dot_venv_was_taken(tmp_path: Path) -> None:
    make_venv(tmp_path / ".venv")
    code, out, err = invoke("snapshot")
    assert code == 0, err
    assert _why(out) == "./.venv"
    code, out, err = invoke("snapshot", env=_OWN)  # envguard's own, active: ./.venv still
    assert code == 0 and _why(out) == "./.venv", err


def test_the_screen_says_the_configured_venv_was_taken(tmp_path: Path) -> None:
    make_venv(tmp_path / "train")
    (tmp_path / "envguard.toml").write_text('venv = "train"\n')
    code, out, err = invoke("snapshot", env=_OWN)
    assert code == 0, err
    assert _why(out) == "venv in envguard.toml"
    code, out, err = invoke("snapshot", env={"ENVGUARD_VENV": str(tmp_path / "train")})
    assert code == 0 and _why(out) == "ENVGUARD_VENV", err
