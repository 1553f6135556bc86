"""The one door to subprocesses: no shell, bounded time, errors that carry argv and stderr.

A child envguard waits for dies with it: on Linux the kernel sends it SIGTERM when envguard
goes, even by ``kill -9``, so that no uv keeps building a half-made venv that nobody will
swap in (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import CommandError

_PR_SET_PDEATHSIG = 1


def _dies_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child's life to envguard's, where the kernel can."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # envguard died between fork and prctl
            os._exit(1)

    return tie


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def activated(env: Mapping[str, str], venv: Path) -> dict[str, str]:
    """``env`` as a venv's ``activate`` leaves it for what runs in it: ``VIRTUAL_ENV`` the
    venv (absolute), its ``bin`` first on ``PATH``."""
    root = venv.absolute()
    out = dict(env)
    out["VIRTUAL_ENV"] = str(root)
    out["PATH"] = f"{root / 'bin'}{os.pathsep}{out.get('PATH', '')}"
    return out


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Completed:
    """Run ``argv`` without a shell and capture its output as text.

    A missing binary, a timeout or (with ``check``) a non-zero exit becomes a
    :class:`CommandError` whose message names the command and its last stderr line.
    """
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            check=False,
            preexec_fn=_dies_with_parent(),  # one libc call in the child, no lock taken
        )
    except FileNotFoundError as exc:
        raise CommandError(f"{argv[0]}: not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandError(f"{argv[0]}: no answer after {timeout:.0f} s") from exc
    done = Completed(
        argv=tuple(argv), returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr
    )
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise CommandError(f"{_short(argv)} exited {proc.returncode}: {last}")
    return done


def run_group(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    output: Path,
) -> Completed:
    """Run a user's command in a process group of its own, its stdout and stderr into files
    beside ``output`` (``output.stdout``, ``output.stderr``), never checked.

    The command is over when its own process exits: a child it left running (a server, a
    ``sleep`` in a shell, a compile worker) holds no pipe envguard waits on, and is killed
    with the rest of the group then, or when ``timeout`` passes, or when envguard is
    interrupted, so that nothing of a trial outlives it.
    """
    streams = output.with_suffix(".stdout"), output.with_suffix(".stderr")
    with streams[0].open("wb") as out, streams[1].open("wb") as err:
        try:
            proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=dict(env), cwd=cwd, start_new_session=True,
                preexec_fn=_dies_with_parent(),
            )  # fmt: skip
        except FileNotFoundError as exc:
            raise CommandError(f"{argv[0]}: not found") from exc
        except PermissionError as exc:
            raise CommandError(f"{argv[0]}: not executable") from exc
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise CommandError(f"{argv[0]}: no answer after {timeout:.0f} s") from exc
        finally:
            _kill_group(proc.pid)
            proc.wait()
    stdout, stderr = (p.read_bytes().decode("utf-8", errors="replace") for p in streams)
    return Completed(argv=tuple(argv), returncode=code, stdout=stdout, stderr=stderr)


def _kill_group(pgid: int) -> None:
    """Whatever is left of a process group: SIGTERM, a moment to go, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return  # none left
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _group_runs(pgid):
                return
            time.sleep(0.02)


def _group_runs(pgid: int) -> bool:
    """Whether a process of the group still runs. A zombie does not: a child whose parent
    exited first waits for PID 1 to reap it, which a container's init may never do, and
    counting it cost every bisect trial that left one the whole 2 s grace."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    import psutil

    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def stream(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` with the terminal's stdin/stdout/stderr, unchanged; its exit code."""
    try:
        return subprocess.run(
            list(argv), env=dict(env) if env is not None else None, check=False
        ).returncode
    except FileNotFoundError as exc:
        raise CommandError(f"{argv[0]}: not found") from exc
    except PermissionError as exc:
        raise CommandError(f"{argv[0]}: not executable") from exc


def _short(argv: Sequence[str]) -> str:
    """The command for an error line: no multi-line ``-c`` programs, no endless paths."""
    parts = [str(a).splitlines()[0] if str(a) else "''" for a in argv[:3]]
    return " ".join(p if len(p) <= 60 else p[:57] + "..." for p in parts)


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """A ^C (or SIGTERM) during the ``with`` body (the work folder cleaned, a folder of the
    user's set aside or put back) waits until the body is done, then is raised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {
        s: signal.signal(s, lambda n, f: caught.append(n)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt
