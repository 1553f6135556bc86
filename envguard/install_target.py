"""Where an install command lands: made to go into the venv it is run for (pip, named any way,
as the venv's own ``python -m pip``; ``uv pip`` told the venv), or refused in one line that
names the command that does (``--target``, ``--user``, another venv's pip).

``envguard run`` and ``tool run`` run their commands through it; the rules it applies
(what is pip, which flags and variables send an install elsewhere) are :mod:`.preflight`'s,
which forecasts the same commands.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from envguard import _run, preflight
from envguard import uv as uv_backend
from envguard.errors import InstallerError

# uv pip's commands that change an environment: told the venv by --python, which beats uv's
# config files ([pip] system/python in uv.toml), UV_PYTHON and VIRTUAL_ENV alike
_UV_WRITES = {"install", "uninstall", "sync"}


def in_venv(venv: Path) -> dict[str, str]:
    """The environment of an activated venv: `pip`, `python` and `uv pip` all target it."""
    # without what would send an install elsewhere than VIRTUAL_ENV (UV_PYTHON, PIP_TARGET…)
    env = {k: v for k, v in os.environ.items() if k not in preflight.ELSEWHERE_ENV}
    return _run.activated(env, venv)


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
