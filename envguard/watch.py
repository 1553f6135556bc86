"""``envguard run``: run an install command in a venv and record the drift it caused."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import _run, drift, journal, preflight, snapshot
from envguard import uv as uv_backend
from envguard.drift.report import ABSENT, Member
from envguard.errors import ArgumentError, InstallerError
from envguard.model import Snapshot
from envguard.versions import same


@dataclass(frozen=True, kw_only=True)
class Watched:
    exit_code: int
    entry: journal.Entry
    report: drift.DriftReport
    journal_path: Path


def run(
    venv: Path,
    argv: Sequence[str],
    path: Path,
    extra_env: dict[str, str] | None = None,
    lock: Snapshot | None = None,
) -> Watched:
    """``lock``: the venv's lock, so that the snapshots around the command are the ones diff
    takes (an install changes neither code nor caches: those are skipped)."""
    if not argv:
        raise ArgumentError("nothing to run: envguard run [--venv PATH] -- COMMAND...")
    before = _take(venv, lock)  # first: a venv that is none is said so, not "has no pip"
    runs = in_target(argv, venv)
    started = journal.now()
    code = _run.stream(runs, env={**in_venv(venv), **(extra_env or {})})
    after = _take(venv, lock)
    report = drift.compare(before, after)
    entry = journal.Entry(
        schema=journal.SCHEMA,
        command=journal.clean_command(argv),
        user=journal.who(),
        host=socket.gethostname(),
        cwd=str(Path.cwd()),
        started=started,
        finished=journal.now(),
        exit_code=code,
        **package_delta(before, after),
        changes=tuple(c for c in report.changes if c.area != "host"),
    )
    journal.append(path, entry)
    return Watched(exit_code=code, entry=entry, report=report, journal_path=path)


# uv pip's commands that change an environment: told the venv by --python, which beats uv's
# config files ([pip] system/python in uv.toml), UV_PYTHON and VIRTUAL_ENV alike
_UV_WRITES = {"install", "uninstall", "sync"}


def in_venv(venv: Path) -> dict[str, str]:
    """The environment of an activated venv: `pip`, `python` and `uv pip` all target it."""
    # without what would send an install elsewhere than VIRTUAL_ENV (UV_PYTHON, PIP_TARGET…)
    env = {k: v for k, v in os.environ.items() if k not in preflight.ELSEWHERE_ENV}
    root = str(venv.absolute())
    env["VIRTUAL_ENV"] = root
    env["PATH"] = f"{root}/bin{os.pathsep}{env.get('PATH', '')}"
    return env


def in_target(argv: Sequence[str], venv: Path) -> list[str]:
    """``argv`` as it must run for what it installs to land in ``venv``, or refused.

    PATH puts the venv's bin first, but a name the venv lacks (``pip`` in a venv uv made,
    ``pip3.99``, ``python3.99``) falls through to the next environment on PATH, often the venv
    envguard itself runs from: pip, named any way, runs as the venv's own ``python -m pip``;
    ``uv pip`` is told the venv by ``--python``.
    """
    pip = preflight.pip_args(argv)
    if pip is not None:
        _own_pip(argv[0], venv, pip)
        _inside("pip", pip, venv)
        if not preflight.has_pip(venv):
            raise preflight.no_pip(venv, pip, "envguard run")
        return [str(venv.absolute() / "bin" / "python"), "-m", "pip", *pip]
    if Path(argv[0]).name == "uv" and list(argv[1:2]) == ["pip"]:
        return _uv_pip(argv, venv)
    return list(argv)


def _own_pip(exe: str, venv: Path, pip: Sequence[str]) -> None:
    """A pip (or python) named by path is the venv its path lies in: this one, or refused."""
    if os.sep not in exe:
        return
    root = preflight.venv_root(Path(exe))
    if root is None or not _same(root, venv):
        raise InstallerError(
            f"`{exe}` is not {venv}'s: it installs into {root or 'another environment'}; "
            f"run `{_working(venv, 'pip', pip)}` instead"
        )


def _inside(installer: str, args: Sequence[str], venv: Path) -> None:
    """Refuse a flag that installs outside ``venv`` (``--target``, ``--user``, ``--python``
    of another environment), naming the command without it."""
    found = _elsewhere(installer, args, venv)
    if found is None:
        return
    i, width = found
    works = _working(venv, installer, [*args[:i], *args[i + width :]])
    typed = shlex.join(args[i : i + width])
    raise InstallerError(f"`{typed}` installs outside {venv}: run `{works}` instead")


def _elsewhere(installer: str, args: Sequence[str], venv: Path) -> tuple[int, int] | None:
    """The flag in ``args`` that sends the install elsewhere: its index and how many
    arguments it spans; None when every flag, if any, names ``venv``."""
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        takes_value = preflight.names_target(installer, flag, "") or flag in preflight.VALUED
        width = 2 if takes_value and not eq else 1
        if preflight.names_target(installer, flag, eq):
            value = value if eq else "".join(args[i + 1 : i + 2])
            root = preflight.venv_root(Path(value)) if value else None
            if root is None or not _same(root, venv):
                return i, width
        elif flag in preflight.ELSEWHERE:
            return i, width
    return None


def _uv_pip(argv: Sequence[str], venv: Path) -> list[str]:
    args = list(argv[2:])
    _inside("uv", args, venv)
    uv = argv[0]
    # a bare `uv` that resolves nowhere is the one envguard ships: the refusals name `uv pip`
    if os.sep not in uv and not shutil.which(uv, path=in_venv(venv)["PATH"]):
        uv = uv_backend.find_uv()
    named = any(preflight.names_target("uv", a.partition("=")[0], "") for a in args)
    if args[:1] and args[0] in _UV_WRITES and not named:
        args[1:1] = ["--python", str(venv.absolute() / "bin" / "python")]
    return [uv, "pip", *args]


def _working(venv: Path, installer: str, args: Sequence[str]) -> str:
    """The command that runs ``args`` in ``venv``: with its pip, or uv's when it has none."""
    pip = installer == "pip" and preflight.has_pip(venv)
    tool = ["pip"] if pip else ["uv", "pip"]
    return shlex.join(["envguard", "run", "--venv", str(venv), "--", *tool, *args])


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def package_delta(before: Snapshot, after: Snapshot) -> dict[str, tuple[Member, ...]]:
    a, b = before.versions(), after.versions()
    return {
        "added": tuple(Member(name=n, old=ABSENT, new=b[n]) for n in sorted(set(b) - set(a))),
        "removed": tuple(Member(name=n, old=a[n], new=ABSENT) for n in sorted(set(a) - set(b))),
        "changed": tuple(
            Member(name=n, old=a[n], new=b[n])
            for n in sorted(set(a) & set(b))
            if not same(a[n], b[n])
        ),
    }


def _take(venv: Path, lock: Snapshot | None) -> Snapshot:
    if lock is not None:
        return snapshot.live_for(lock, venv, with_code=False, with_caches=False)
    return snapshot.take(venv, default_caches=False, with_code=False)
