"""``envguard protect``: make installs into a venv unable to replace its critical set.

What each installer honours, and so what the guarantee is:

- **pip** reads ``<venv>/pip.conf`` as its site configuration; ``[install] constraint`` there
  points at ``<venv>/envguard-protect.txt``, so every ``pip install`` run with the venv's pip
  (activated or not) resolves under the pins, and one that would replace them fails. A venv
  uv made has no pip: ``pip`` there, activated, is another environment's, which installs
  into its own and reads no pins; ``envguard run`` refuses it and names ``uv pip install``.
- **uv** reads no file inside a venv (nor pip.conf). The venv's ``bin/activate`` exports
  ``UV_CONSTRAINT`` to the same file (``deactivate`` unsets it), and ``envguard run`` sets it
  too; a ``uv pip install --python <venv>`` from an unactivated shell is not covered.

Each pin reads ``torch==2.11.0+cu128,!=0+pinned.by.envguard.protect``: the second clause
excludes no real version, but it puts envguard's name into pip's conflict message.
"""

from __future__ import annotations

import configparser
import io
from dataclasses import dataclass
from pathlib import Path

from envguard import catalog
from envguard._fs import atomic_write
from envguard.errors import ProtectError, VenvError
from envguard.model import Snapshot

CONSTRAINTS = "envguard-protect.txt"
MARK = "pinned.by.envguard.protect"
_BEGIN, _END = "# >>> envguard protect >>>", "# <<< envguard protect <<<"


@dataclass(frozen=True, kw_only=True)
class Protection:
    venv: str
    constraints: str
    pins: tuple[str, ...]


def critical_names(lock: Snapshot, extra: tuple[str, ...]) -> list[str]:
    names = {d.name for d in lock.packages}
    wanted = [n for n in catalog.PROTECTED if n in names]
    wanted += sorted(n for n in names if catalog.is_cuda_wheel(n))
    missing = [n for n in extra if n not in names]
    if missing:
        raise ProtectError(f"not in the lockfile, so no version to pin: {', '.join(missing)}")
    return wanted + [n for n in extra if n not in wanted]


def protect(lock: Snapshot, venv: Path, extra: tuple[str, ...] = ()) -> Protection:
    if not (venv / "pyvenv.cfg").is_file():
        raise VenvError(f"{venv}: not a venv (no pyvenv.cfg)")
    versions = {d.name: d.version for d in lock.packages}
    pins = tuple(f"{n}=={versions[n]},!=0+{MARK}" for n in critical_names(lock, extra))
    path = venv.absolute() / CONSTRAINTS
    header = (
        f"# envguard protect: pinned from the lockfile {lock.name!r} ({lock.taken_at}).\n"
        "# An install that would replace these fails. `envguard unprotect` lifts it.\n"
    )
    atomic_write(path, (header + "".join(f"{p}\n" for p in pins)).encode())
    _pip_conf(venv, path)
    _activate(venv, path)
    return Protection(venv=str(venv.absolute()), constraints=str(path), pins=pins)


def carry(pins: bytes, new: Path, *, final: Path) -> None:
    """The same protection for a venv built at ``new`` that will sit at ``final`` (restore
    builds beside the venv and swaps): the pins file, pip.conf and the activate lines."""
    path = final.absolute() / CONSTRAINTS
    atomic_write(new / CONSTRAINTS, pins)
    _pip_conf(new, path)
    _activate(new, path)


def unprotect(venv: Path) -> bool:
    """Undo :func:`protect`; False if the venv was not protected."""
    path = venv.absolute() / CONSTRAINTS
    found = path.exists()
    path.unlink(missing_ok=True)
    conf = venv / "pip.conf"
    if conf.exists():
        parser = _read_conf(conf)
        if parser.get("install", "constraint", fallback="") == str(path):
            parser.remove_option("install", "constraint")
            if not parser.options("install"):
                parser.remove_section("install")
            _write_conf(conf, parser)
            found = True
    for script in _activate_scripts(venv):
        text = script.read_text(encoding="utf-8")
        stripped = _strip_block(text)
        if stripped != text:
            atomic_write(script, stripped.encode())
            found = True
    return found


def constraint_env(venv: Path) -> dict[str, str]:
    """What ``envguard run`` adds to a command's environment for a protected venv."""
    path = venv.absolute() / CONSTRAINTS
    return {"UV_CONSTRAINT": str(path), "PIP_CONSTRAINT": str(path)} if path.exists() else {}


def _pip_conf(venv: Path, constraints: Path) -> None:
    conf = venv / "pip.conf"
    parser = _read_conf(conf) if conf.exists() else configparser.ConfigParser()
    if not parser.has_section("install"):
        parser.add_section("install")
    current = parser.get("install", "constraint", fallback="")
    if current and current != str(constraints):
        raise ProtectError(
            f"{conf} already sets a constraint ({current}); envguard will not replace it"
        )
    parser.set("install", "constraint", str(constraints))
    _write_conf(conf, parser)


def _read_conf(conf: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(conf, encoding="utf-8")
    except configparser.Error as exc:
        raise ProtectError(f"{conf}: not a pip config file ({exc})") from exc
    return parser


def _write_conf(conf: Path, parser: configparser.ConfigParser) -> None:
    buf = io.StringIO()
    parser.write(buf)
    atomic_write(conf, buf.getvalue().encode())


def _activate_scripts(venv: Path) -> list[Path]:
    return [p for p in (venv / "bin" / "activate",) if p.is_file()]


def _activate(venv: Path, constraints: Path) -> None:
    for script in _activate_scripts(venv):
        text = _strip_block(script.read_text(encoding="utf-8"))
        # unset in deactivate (its first line), export after the script sets VIRTUAL_ENV
        unset = f"    unset UV_CONSTRAINT  {_BEGIN} {_END}\n"
        lines = text.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("deactivate ()") or line.startswith("deactivate()"):
                lines.insert(i + 1, unset)
                break
        else:
            raise ProtectError(f"{script}: no deactivate function found; cannot hook uv in")
        block = f'\n{_BEGIN}\nexport UV_CONSTRAINT="{constraints}"\n{_END}\n'
        atomic_write(script, ("".join(lines) + block).encode())


def _strip_block(text: str) -> str:
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if _BEGIN in line and _END in line:
            continue
        if line.strip() == _BEGIN:
            skipping = True
            continue
        if line.strip() == _END:
            skipping = False
            continue
        if not skipping:
            out.append(line)
    return "".join(out).rstrip("\n") + "\n"
