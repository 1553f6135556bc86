"""The one door to subprocesses: no shell, bounded time, errors that carry argv and stderr."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envguard.errors import CommandError


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


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
