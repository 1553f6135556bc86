"""What a restore killed by ``kill -9`` left beside the venv is found by ``envguard backups``,
said as left by an interrupted restore, and removed by ``backups --prune``; the venv a restore
is building right now is neither (#23).

The restores are real: ``envguard restore`` in a subprocess whose uv is the real one except
for ``pip sync``, where it sleeps, so that envguard is killed (alone: its uv dies with it) while
the new venv is half made.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from envguard.restore import transaction
from tests.conftest import uv_bin
from tests.project import Project, invoke


def _new_folders(project: Project) -> list[Path]:
    return sorted(project.venv.parent.glob(f"{project.venv.name}.envguard-new-*"))


@contextmanager
def _restoring(project: Project, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real restore, held in its install: yielded once its new venv exists."""
    project.snapshot()
    syncing = tmp_path / "syncing"
    slow = tmp_path / "slow-uv"
    slow.write_text(
        f'#!/bin/sh\nif [ "$1" = pip ] && [ "$2" = sync ]; then touch {syncing}; '
        f'exec sleep 120; fi\nexec {uv_bin()} "$@"\n'
    )
    slow.chmod(0o755)
    argv = [sys.executable, "-m", "envguard", "restore", str(project.lock), "--rebuild",
            "--find-links", str(project.house), "--offline", "--yes"]  # fmt: skip
    active = {k: v for k, v in project.activated().items() if v is not None}
    env = {**os.environ, **active, "ENVGUARD_UV": str(slow)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not syncing.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert syncing.exists() and len(_new_folders(project)) == 1, "the restore never synced"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _backups(project: Project, *args: str) -> dict[str, Any]:
    code, out, err = invoke("backups", "--json", *args, env=project.activated())
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)["result"]
    return result


def _paths(listed: dict[str, Any], key: str) -> list[str]:
    return sorted(b["path"] for b in listed[key])


@pytest.mark.slow
def test_a_killed_restore_s_half_made_venv_is_listed_and_pruned(
    project: Project, tmp_path: Path
) -> None:
    with _restoring(project, tmp_path) as proc:
        os.kill(proc.pid, signal.SIGKILL)  # envguard alone, as a user's kill -9 does
        proc.wait(timeout=30)
    (half,) = _new_folders(project)
    listed = _backups(project)
    assert _paths(listed, "left_over") == [str(half)]
    assert listed["building"] == [] and listed["backups"] == []
    code, out, err = invoke("backups", env=project.activated())
    assert code == 0, err
    assert f"{half.name}  left by an interrupted restore" in out.replace("\n  ", " ")
    assert "envguard backups --prune removes it" in out
    code, out, err = invoke("backups", "--prune", env=project.activated())
    assert code == 0, err
    assert f"removed {half.name} (freed " in out and "left by an interrupted restore" in out
    assert _new_folders(project) == [] and not half.exists()
    assert (project.venv / "bin" / "python").exists()  # the venv never moved
    assert _backups(project)["left_over"] == []


@pytest.mark.slow
def test_the_venv_a_restore_is_building_stays(project: Project, tmp_path: Path) -> None:
    """Another one, left by an earlier kill, stays too while a restore runs: that restore
    may be putting it right at this moment."""
    earlier = project.venv.with_name(f"{project.venv.name}.envguard-new-20260101-120000-abcdef")
    with _restoring(project, tmp_path) as proc:
        earlier.mkdir()
        (building,) = [p for p in _new_folders(project) if p != earlier]
        listed = _backups(project)
        assert _paths(listed, "building") == [str(building)]
        assert _paths(listed, "left_over") == [str(earlier)]
        assert listed["running"] == proc.pid
        code, out, err = invoke("backups", env=project.activated())
        assert code == 0, err
        assert f"being built by a restore running now (pid {proc.pid})" in out.replace("\n  ", " ")
        pruned = _backups(project, "--prune")
        assert pruned["removed"] == [] and building.is_dir() and earlier.is_dir()
        code, out, err = invoke("backups", "--prune", env=project.activated())
        assert code == 0 and f"a restore is running (pid {proc.pid})" in out.replace("\n  ", " ")
        assert building.is_dir() and earlier.is_dir()
        assert proc.poll() is None  # and the restore was never disturbed
    (left,) = [p for p in _new_folders(project) if p != earlier]
    assert left == building  # killed in turn: now an orphan like the other
    pruned = _backups(project, "--prune")
    assert _paths(pruned, "removed") == sorted(map(str, (building, earlier)))
    assert _new_folders(project) == []


def test_prune_puts_an_interrupted_swap_right_before_removing(project: Project) -> None:
    """Killed between the exchange and the rename that follows it, a restore leaves the old
    venv at the new folder's name: prune keeps it, as a backup, as the next restore would."""
    project.snapshot()
    venv = project.venv
    paths = transaction.Paths.for_venv(venv, transaction.stamp())
    built = venv.parent / "built"
    shutil.copytree(venv, built, symlinks=True)
    old_ino = venv.stat().st_ino
    shutil.copytree(built, paths.new, symlinks=True)
    transaction.record(paths, "swapping", old_inode=old_ino)
    venv.rename(paths.backup)
    paths.new.rename(venv)
    paths.backup.rename(paths.new)  # as RENAME_EXCHANGE leaves them
    assert _paths(_backups(project), "left_over") == [str(paths.new)]
    pruned = _backups(project, "--prune")
    assert pruned["removed"] == [] and pruned["left_over"] == []
    assert pruned["recovered"]
    (kept,) = transaction.backups(venv)
    assert kept.stat().st_ino == old_ino and not paths.new.exists()
