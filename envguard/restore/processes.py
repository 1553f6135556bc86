"""Which processes run from a venv: its interpreter, or files and libraries mapped from it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class User:
    pid: int
    command: str


def using(venv: Path) -> list[User]:
    """Processes whose executable, argv[0], open files or memory maps lie under ``venv``.

    A venv's python is a symlink to the base interpreter, so the executable alone misses most
    of them; a training job maps torch's .so files from site-packages, which catches it, and
    ``.venv/bin/python train.py`` is caught by its argv[0], read from the process's own cwd.
    """
    import psutil

    roots = tuple({str(venv.absolute()) + os.sep, str(venv.resolve()) + os.sep})
    found = []
    for proc in psutil.process_iter(["pid", "exe", "cmdline", "cwd"]):
        if proc.pid == os.getpid():
            continue
        try:
            if _inside(roots, proc):
                cmd = " ".join(proc.info["cmdline"] or []) or proc.name()
                found.append(User(pid=proc.pid, command=cmd[:200]))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _inside(root: tuple[str, ...], proc: object) -> bool:
    info = proc.info  # type: ignore[attr-defined]
    argv0 = (info.get("cmdline") or [""])[0]
    candidates = [info.get("exe") or "", _argv0(argv0, info.get("cwd"))]
    if any(c.startswith(root) for c in candidates if c):
        return True
    for mapped in proc.memory_maps(grouped=True):  # type: ignore[attr-defined]
        if mapped.path.startswith(root):
            return True
    return any(f.path.startswith(root) for f in proc.open_files())  # type: ignore[attr-defined]


def _argv0(argv0: str, cwd: str | None) -> str:
    """``argv0`` where the process's exec found it: a relative path is relative to the
    process's working directory, not envguard's (every project has a ``.venv/bin/python``).
    A bare name came from its PATH, which is not ours to read: exe and maps decide then.
    Its folder is resolved (a symlinked project or .venv), not the interpreter itself: that
    is a symlink out of the venv."""
    if not argv0 or os.sep not in argv0:
        return ""
    path = Path(argv0)
    if not path.is_absolute():
        if not cwd:  # cwd unreadable (another user's process): no guess from ours
            return ""
        path = Path(cwd) / path
    return str(path.parent.resolve() / path.name)
