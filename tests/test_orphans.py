"""A child envguard started dies with envguard, even by ``kill -9``: no uv is left building a
half-made venv that no one will swap in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_when_envguard_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    child = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    parent = (
        f"from envguard._run import run\nrun([{sys.executable!r}, '-c', {child!r}], timeout=120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 30
        while not (marker.is_file() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(marker.read_text())
        assert psutil.pid_exists(pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        gone = time.monotonic() + 10
        while time.monotonic() < gone:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the child outlived envguard")
    finally:
        proc.kill()


def test_a_zombie_left_in_the_group_costs_no_grace() -> None:
    """A child the command left that has exited but not been reaped (its parent gone, a
    container's PID 1 that never reaps) is no process running: ending the group does not wait
    the 2 s grace for it, as it did for each bisect trial whose benchmark left a server."""
    from envguard._run import _kill_group

    # sh starts `true` and becomes `sleep 30`, which never reaps it: a zombie in the group
    proc = subprocess.Popen(["sh", "-c", "true & exec sleep 30"], start_new_session=True)
    time.sleep(0.3)
    zombies = [c for c in psutil.Process(proc.pid).children()
               if c.status() == psutil.STATUS_ZOMBIE]  # fmt: skip
    assert zombies, "the shell's child was reaped: no zombie to test with"
    started = time.monotonic()
    _kill_group(proc.pid)
    took = time.monotonic() - started
    proc.wait(timeout=10)
    assert took < 1.0
