"""Which processes use a venv, with two real projects side by side, each with its own .venv."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envguard.restore import processes
from tests.conftest import make_venv

_SLEEP = "import time; print(flush=True); time.sleep(60)"


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[bytes]]]:
    """Project B's python started as `.venv/bin/python` from B's root, as a shell there does."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        make_venv(root / ".venv")
    proc = _start(".venv/bin/python", cwd=b)
    yield a, b, proc
    proc.kill()
    proc.wait()


def _start(python: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([python, "-c", _SLEEP], cwd=cwd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # it runs: its cmdline and cwd are in /proc
    return proc


def _pids(venv: Path) -> set[int]:
    return {u.pid for u in processes.using(venv)}


def test_another_projects_relative_python_is_not_using_this_venv(
    sleeper: tuple[Path, Path, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, proc = sleeper
    # envguard runs in project A: B's `.venv/bin/python` is not A's .venv
    monkeypatch.chdir(a)
    assert proc.pid not in _pids(Path(".venv"))
    assert proc.pid not in _pids(a / ".venv")
    assert proc.pid in _pids(b / ".venv")


def test_found_from_a_third_folder_and_through_a_symlink_until_it_ends(
    sleeper: tuple[Path, Path, subprocess.Popen[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, proc = sleeper
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b-link").symlink_to(b)
    monkeypatch.chdir(elsewhere)
    assert proc.pid in _pids(b / ".venv")
    assert proc.pid in _pids(Path("b-link/.venv"))
    assert proc.pid not in _pids(a / ".venv")
    # started through the link, by its absolute path: the venv is the same
    linked = _start(str(elsewhere / "b-link/.venv/bin/python"))
    try:
        assert linked.pid in _pids(b / ".venv")
    finally:
        linked.kill()
        linked.wait()
    proc.kill()
    proc.wait()
    assert proc.pid not in _pids(b / ".venv")
