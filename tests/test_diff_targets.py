"""Which lock ``diff`` reads and which venv it compares, rung by rung, as the README's "Which
lock, venv and repo" says: a named lock with the venv it recorded; no lock named, the venv
(``--venv``, the configured one, the active one, ``./.venv``) with its lock, or the project's
only lock. Read through the CLI's JSON, in a real project with a uv venv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_venv
from tests.project import Project, invoke

_NO_VENV = {"VIRTUAL_ENV": None}


def _diff(*args: str, env: dict[str, str | None] | None = None) -> tuple[Path, Path]:
    """(the lockfile diff read, the venv it compared)."""
    code, out, err = invoke("diff", "--json", *args, env=env or _NO_VENV)
    assert code in (0, 1), err
    result = json.loads(out)["result"]
    return Path(result["lockfile"]), Path(result["venv"])


def _second(project: Project, tmp_path: Path, name: str = "serve") -> tuple[Path, Path]:
    """Another venv and its lock in the project's lockfiles/."""
    venv = make_venv(tmp_path / name)
    lock = project.lock.with_name(f"{name}.envguard.toml")
    assert invoke("snapshot", "-q", "--venv", str(venv), "-o", str(lock))[0] == 0
    return venv, lock


def _tool(project: Project, tmp_path: Path) -> tuple[Path, Path]:
    """A tool's venv and its lock, where diff never looks unless named."""
    venv = make_venv(tmp_path / "datagen")
    lock = project.root / "lockfiles" / "tools" / "datagen.envguard.toml"
    assert invoke("snapshot", "-q", "--venv", str(venv), "-o", str(lock))[0] == 0
    return venv, lock


def _configure(project: Project, text: str) -> None:
    project.write("envguard.toml", text)


@pytest.fixture
def locked(project: Project) -> Project:
    project.snapshot()
    project.commit("lock", "lockfiles")
    return project


# --- LOCK named -------------------------------------------------------------------------------


def test_lock_and_venv_named_are_what_is_compared(locked: Project, tmp_path: Path) -> None:
    other = make_venv(tmp_path / "other")
    assert _diff(str(locked.lock), "--venv", str(other)) == (locked.lock, other)


def test_a_named_lock_is_compared_with_the_venv_it_recorded(
    locked: Project, tmp_path: Path
) -> None:
    """Even with a venv in the config: the config names the training venv, and LOCK is a
    tool's, recorded from the tool's venv."""
    tool, lock = _tool(locked, tmp_path)
    _configure(locked, 'venv = ".venv"\n')
    assert _diff(str(lock)) == (lock, tool)
    assert _diff(str(lock), env=locked.activated()) == (lock, tool)  # whatever is active


def test_a_named_lock_whose_venv_is_not_here_takes_the_configured_one(
    locked: Project, tmp_path: Path
) -> None:
    """A lock brought from another machine: its venv is not here."""
    import shutil

    tool, lock = _tool(locked, tmp_path)
    shutil.rmtree(tool)
    _configure(locked, 'venv = ".venv"\n')
    assert _diff(str(lock)) == (lock, locked.root / ".venv")


# --- no LOCK, a venv given --------------------------------------------------------------------


def test_venv_given_with_the_projects_only_lock(locked: Project, tmp_path: Path) -> None:
    """The README promises the project's only lock: a copy of the venv, a venv rebuilt
    elsewhere, is compared with it, not refused for "no lockfile"."""
    elsewhere = make_venv(tmp_path / "rebuilt")
    assert _diff("--venv", str(elsewhere)) == (locked.lock, elsewhere)


def test_venv_given_picks_the_lock_that_recorded_it(locked: Project, tmp_path: Path) -> None:
    serve, serve_lock = _second(locked, tmp_path)
    assert _diff("--venv", str(serve)) == (serve_lock, serve)
    assert _diff("--venv", str(locked.venv)) == (locked.lock, locked.venv)


@pytest.mark.slow
def test_venv_given_and_several_locks_none_of_its_own_is_one_line_naming_them(
    locked: Project, tmp_path: Path
) -> None:
    _second(locked, tmp_path)
    stranger = make_venv(tmp_path / "stranger")
    code, out, err = invoke("diff", "--venv", str(stranger), env=_NO_VENV)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "serve.envguard.toml" in err and "train.envguard.toml" in err
    assert "stranger" in err and "pass one" in err


# --- no LOCK, no venv given -------------------------------------------------------------------


def test_the_configured_venv_with_its_lock(locked: Project, tmp_path: Path) -> None:
    serve, serve_lock = _second(locked, tmp_path)
    _configure(locked, f'venv = "{serve}"\n')
    assert _diff() == (serve_lock, serve)
    assert _diff(env=locked.activated()) == (serve_lock, serve)  # the config over the active


def test_the_configured_venv_with_the_projects_only_lock(locked: Project, tmp_path: Path) -> None:
    rebuilt = make_venv(tmp_path / "rebuilt")
    _configure(locked, f'venv = "{rebuilt}"\n')
    assert _diff() == (locked.lock, rebuilt)


def test_the_active_venv_with_its_lock(locked: Project, tmp_path: Path) -> None:
    serve, serve_lock = _second(locked, tmp_path)
    assert _diff(env={"VIRTUAL_ENV": str(serve)}) == (serve_lock, serve)


def test_dot_venv_with_its_lock(locked: Project, tmp_path: Path) -> None:
    _second(locked, tmp_path)
    assert _diff() == (locked.lock, locked.venv)


def test_the_only_lock_with_the_venv_it_recorded_whatever_is_active(
    locked: Project, tmp_path: Path
) -> None:
    """pre-commit's venv, a tool's: active by accident, never compared with the lock."""
    tool, _ = _tool(locked, tmp_path)
    assert _diff(env={"VIRTUAL_ENV": str(tool)}) == (locked.lock, locked.venv)


def test_several_locks_and_no_venv_of_theirs_is_one_line_naming_them(
    locked: Project, tmp_path: Path
) -> None:
    import shutil

    _second(locked, tmp_path)
    shutil.rmtree(locked.venv)
    code, out, err = invoke("diff", env=_NO_VENV)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "2 lockfiles" in err and "serve.envguard.toml" in err and "train.envguard.toml" in err
