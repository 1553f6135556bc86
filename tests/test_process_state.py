"""The CLI called from Python leaves the process as it found it (#38): restore and bisect turn
SIGTERM into an interrupt while they work, --color and -vv travel in the environment, and a
caller in the same process (click's test runner, a notebook, a test suite under ``timeout -s
TERM``) got all of it back changed: a later SIGTERM raised KeyboardInterrupt in whatever ran
next instead of ending the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envguard import _fs
from envguard.cli import cli
from tests.project import Project


def _call(*args: str) -> int:
    """``envguard ARGS`` as a library caller runs it: no CliRunner to put anything back."""
    with pytest.raises(SystemExit) as exited:
        cli.main(list(args), prog_name="envguard")
    code = exited.value.code
    return code if isinstance(code, int) else 0


def _state() -> tuple[object, object, dict[str, str], Path, int]:
    return (
        signal.getsignal(signal.SIGTERM),
        signal.getsignal(signal.SIGINT),
        dict(os.environ),
        Path.cwd(),
        _fs.umask(),
    )


@pytest.fixture
def own_sigterm() -> Iterator[object]:
    """A SIGTERM handler of the caller's own, as a test harness or a server installs."""

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the caller's handler ran")

    old = signal.signal(signal.SIGTERM, mine)
    try:
        yield mine
    finally:
        signal.signal(signal.SIGTERM, old)


@pytest.mark.slow
def test_restore_puts_back_sigterm_and_the_environment(
    project: Project, own_sigterm: object
) -> None:
    project.snapshot()
    project.install("plainpkg==2.4")  # drift, so that restore rebuilds the venv
    before = _state()
    code = _call(
        "restore", str(project.lock), "--venv", str(project.venv), "--yes", "--offline",
        "--find-links", str(project.house), "--color", "always", "-vv",
    )  # fmt: skip
    assert code == 0
    assert _state() == before
    assert signal.getsignal(signal.SIGTERM) is own_sigterm


def test_bisect_puts_back_sigterm_and_the_environment(
    project: Project, own_sigterm: object
) -> None:
    project.snapshot()
    before = _state()
    # nothing drifted: bisect refuses after it set its handler, with --color and -vv given
    code = _call("bisect", "--color", "never", "-vv", "--", sys.executable, "-c", "pass")
    assert code == 2
    assert _state() == before
    assert signal.getsignal(signal.SIGTERM) is own_sigterm


def test_a_command_that_fails_puts_back_what_it_changed(tmp_path: Path) -> None:
    before = _state()
    assert _call("restore", str(tmp_path / "no-such.envguard.toml"), "--color", "always") == 2
    assert _state() == before


def test_a_command_in_another_thread_sets_no_handler(tmp_path: Path) -> None:
    """Only the main thread may set a signal handler: elsewhere restore runs without one."""
    before = signal.getsignal(signal.SIGTERM)
    codes: list[int] = []
    worker = threading.Thread(
        target=lambda: codes.append(_call("restore", str(tmp_path / "none.envguard.toml")))
    )
    worker.start()
    worker.join(60)
    assert codes == [2]  # the missing lock, not "signal only works in main thread"
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_after_an_in_process_restore_ends_the_process(tmp_path: Path) -> None:
    """The symptom as it was: ``timeout -s TERM`` of a suite that had run restore in-process
    raised KeyboardInterrupt inside a later test and ran on; now SIGTERM ends it."""
    script = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from envguard.cli import cli
        try:
            cli.main(["restore", {str(tmp_path / "none.envguard.toml")!r}], prog_name="envguard")
        except SystemExit:
            pass
        print("ready", flush=True)
        try:
            time.sleep(30)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (-signal.SIGTERM, "")


_KILL_PARENT = "import os, signal; os.kill(os.getppid(), signal.SIGTERM)"


@pytest.mark.slow
@pytest.mark.parametrize("caller", ["in-process", "envguard"])
def test_a_sigterm_mid_bisect_cleans_up_then_reaches_the_caller(
    project: Project, caller: str
) -> None:
    """A benchmark that terminates bisect: bisect puts its trials away either way; from the
    shell it exits 130 (docs/exit-codes.md), and a caller in the same process then gets the
    SIGTERM itself, as it would have without envguard (a suite under ``timeout -s TERM``
    ends instead of running on)."""
    project.snapshot()
    project.install("plainpkg==2.4")
    args = ["bisect", "--offline", "--find-links", str(project.house), "--",
            sys.executable, "-c", _KILL_PARENT]  # fmt: skip
    if caller == "envguard":
        argv = [sys.executable, "-m", "envguard", *args]
    else:
        script = (
            "import sys\nfrom envguard.cli import cli\n"
            f"try:\n    cli.main({args!r}, prog_name='envguard')\n"
            "except SystemExit as exc:\n    print('ran on after exit', exc.code)\n"
        )
        argv = [sys.executable, "-c", script]
    env = {**os.environ, **{k: v for k, v in project.activated().items() if v is not None}}
    done = subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    expected = 130 if caller == "envguard" else -signal.SIGTERM
    assert (done.returncode, done.stdout) == (expected, ""), done.stderr
    assert "error: interrupted" in done.stderr
    work = Path(os.environ["ENVGUARD_CACHE_DIR"]) / "bisect"
    assert [p.name for p in work.glob("run-*")] == []  # the trials' folder went first
