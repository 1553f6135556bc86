"""Tool venvs: a home for SGLang, vLLM and the like beside the training venv, never inside it.

A tool NAME of the training venv ``T`` lives at ``T.tools/NAME``: a venv built by uv with its
own resolution (the tool gets the torch build it wants), its own lockfile at
``<lockfiles>/tools/NAME.envguard.toml`` (not a ``*.envguard.toml`` of the training venv, so
``diff``, ``fleet`` and ``export`` never pick it up), and a marker ``envguard-tool.toml``
inside it that ties it to ``T``. The filesystem is the registry: ``tool list`` reads the
markers, so nothing can disagree with what is on disk.

A tool is built in a staging folder beside its final place and renamed into it when uv has
installed everything; a failure leaves nothing behind. ``restore --split NAME`` adopts a
polluted training venv as tool NAME instead of keeping it as a dated backup (:func:`adopt`):
its scripts' shebangs and activate files name the old path, and are rewritten to the new one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import _fs, drift, lockfile, snapshot, uv
from envguard._confine import Root
from envguard.errors import ToolError as ToolError  # tools.ToolError, as commands raise it
from envguard.record import Record

MARKER = "envguard-tool.toml"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, kw_only=True)
class Tool(Record):
    name: str
    path: str
    train: str  # the training venv it belongs to
    requirements: tuple[str, ...] = ()
    lock: str = ""
    torch: str = ""  # "2.11.0+cu130", or "" without torch
    packages: int = 0
    bytes: int = 0  # on disk, hard links counted once
    matches: bool | None = None  # still as its lock recorded; None: no lock


def home(train: Path) -> Path:
    """Where the tools of ``train`` live: beside it, named after it."""
    return train.absolute().parent / f"{train.name}.tools"


def path_of(train: Path, name: str) -> Path:
    path = home(train) / _checked_name(name)
    if not (path / MARKER).is_file():
        known = ", ".join(t.name for t in listing(train, None)) or "none"
        raise ToolError(f"no tool {name!r} for {train} (tools: {known})")
    return path


def lock_path(lockfiles: Path, name: str) -> Path:
    return lockfiles / "tools" / f"{name}{lockfile.SUFFIX}"


def add(
    train: Path,
    name: str,
    reqs: Sequence[str],
    indexes: uv.Indexes,
    lockfiles: Path,
    *,
    python: str | None = None,
) -> Tool:
    """Build tool ``name`` from ``reqs`` beside ``train``; nothing is left if uv fails."""
    target = _new_place(train, name)
    _lock_place(lockfiles, name)
    for req in reqs:
        _checked_requirement(req)
    if not reqs:
        raise ToolError("name what the tool needs: envguard tool add NAME REQUIREMENT...")
    staging = target.parent / f".{name}.envguard-new-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        uv.create_venv(staging, python or str(train.absolute() / "bin" / "python"), name)
        uv.install(staging / "bin" / "python", reqs, indexes)
        _write_marker(staging, name, train, reqs, lock_path(lockfiles, name))
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _record(target, lockfiles)


def adopt(train: Path, name: str, source: Path, lockfiles: Path) -> Tool:
    """Make the venv at ``source`` (a polluted training venv, moved aside by restore) tool
    ``name``: moved, its scripts pointed at their new place, locked."""
    target = _new_place(train, name)
    _lock_place(lockfiles, name)
    old_paths = {str(train.absolute()), str(source.absolute())}
    source.rename(target)
    for old in old_paths:
        relocate(target, old, str(target))
    _write_marker(target, name, train, (), lock_path(lockfiles, name))
    return _record(target, lockfiles)


def listing(train: Path, lockfiles: Path | None) -> list[Tool]:
    root = home(train)
    if not root.is_dir():
        return []
    found = sorted(p for p in root.iterdir() if (p / MARKER).is_file() and not p.is_symlink())
    if lockfiles is None:
        return [Tool(name=p.name, path=str(p), train=str(train)) for p in found]
    return [_describe(p, lockfiles) for p in found]


def remove(train: Path, name: str, lockfiles: Path, *, force: bool = False) -> Tool:
    """Remove tool ``name`` and its lock; refused while a process runs from it."""
    from envguard.restore import processes

    path = path_of(train, name)
    users = processes.using(path)
    if users and not force:
        who = "; ".join(f"pid {u.pid} ({u.command})" for u in users[:3])
        raise ToolError(f"tool {name} is in use by {who}: stop it, or pass --force")
    gone = _describe(path, lockfiles)
    doomed = path.parent / f".{name}.envguard-removing-{os.getpid()}"
    path.rename(doomed)  # gone from its name at once; the files after
    shutil.rmtree(doomed, ignore_errors=True)
    lock_path(lockfiles, name).unlink(missing_ok=True)
    return gone


def relocate(venv: Path, old: str, new: str) -> int:
    """Point a moved venv's scripts at ``new``: shebangs of ``bin/*`` and the activate
    scripts name the venv's absolute path (unless uv made it relocatable). Returns how many
    files were rewritten."""
    changed = 0
    old_b, new_b = old.encode(), new.encode()
    for script in sorted((venv / "bin").iterdir()):
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if old_b not in data[:4096] or b"\0" in data[:1024]:
            continue  # not a text script naming the old place
        if script.name.startswith("activate"):
            fixed = data.replace(old_b, new_b)
        else:  # only the shebang: a script's body is the user's
            head, nl, body = data.partition(b"\n")
            fixed = head.replace(old_b, new_b) + nl + body
        if fixed != data:
            _fs.atomic_write(script, fixed)  # keeps the script's mode
            changed += 1
    cfg = venv / "pyvenv.cfg"
    text = cfg.read_text()
    if old in text:  # `command = ... -m venv OLD` (python -m venv writes it)
        _fs.atomic_write(cfg, text.replace(old, new).encode())
    return changed


# --- internals ------------------------------------------------------------------------------


def _checked_requirement(req: str) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(req)
    except InvalidRequirement:
        raise ToolError(f"{req!r} is not a requirement (PEP 508), e.g. sglang==0.5.23") from None


def _checked_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name.endswith((".", "-")):
        raise ToolError(f"{name!r} is not a tool name: letters, digits, '.', '_', '-' (<= 64)")
    return name


def check_new(train: Path, name: str) -> Path:
    """Where a new tool ``name`` goes; refused when the name is taken or not a name."""
    _checked_name(name)
    if not (train / "pyvenv.cfg").is_file():
        raise ToolError(f"{train} is not a venv (no pyvenv.cfg): pass --venv TRAIN")
    target = home(train) / name
    if target.exists() or target.is_symlink():
        raise ToolError(f"tool {name} exists at {target}: `envguard tool remove {name}` first")
    return target


def _new_place(train: Path, name: str) -> Path:
    target = check_new(train, name)
    root = target.parent
    root.mkdir(exist_ok=True)
    if _fs.is_inside(root, train):  # a symlinked .tools folder pointing into the venv
        raise ToolError(f"{root} is inside the training venv {train}: tools never go there")
    ignore = root / ".gitignore"
    if not ignore.exists():  # venvs beside a repo's .venv must not show as untracked files
        _fs.atomic_write(ignore, b"# envguard's tool venvs\n*\n")
    return target


def _write_marker(venv: Path, name: str, train: Path, reqs: Sequence[str], lock: Path) -> None:
    import tomli_w

    doc: Mapping[str, Any] = {
        "name": name,
        "train": str(train.absolute()),
        "requirements": list(reqs),
        "lock": str(lock.absolute()),
    }
    _fs.atomic_write(venv / MARKER, tomli_w.dumps(doc).encode())


def _read_marker(venv: Path) -> dict[str, Any]:
    from envguard.config import _read

    return _read(venv / MARKER)


def _lock_place(lockfiles: Path, name: str) -> None:
    """Refuse before building what could not be locked: a folder (or a device) where the
    tool's lockfile goes would fail the lock after the venv was made, leaving half a tool."""
    lock = lock_path(lockfiles, name)
    if lock.exists() and not lock.is_file():
        raise ToolError(f"{lock} is in the way of tool {name}'s lockfile: not a file")


def _record(venv: Path, lockfiles: Path) -> Tool:
    """Lock a freshly built or adopted tool, and describe it."""
    snap = snapshot.take(venv, with_code=False, default_caches=False, name=venv.name)
    # the lockfiles' folder is the repository's, which a clone may fill with links: the
    # lock is written below it, never through one (``tools -> ~/.ssh``)
    lock = lock_path(lockfiles, venv.name)
    try:
        Root(lockfiles, what="tool lockfile").write(
            lock.relative_to(lockfiles).as_posix(), lockfile.dumps(snap)
        )
    except OSError as exc:
        raise ToolError(f"{lock}: cannot write ({exc.strerror})") from exc
    return _describe(venv, lockfiles, snap)


def _describe(venv: Path, lockfiles: Path, live: Any = None) -> Tool:
    from envguard.errors import LockfileError
    from envguard.restore.backups import freed_by_removing

    marker = _read_marker(venv)
    snap = live or snapshot.take(venv, with_code=False, default_caches=False, name=venv.name)
    lock = lock_path(lockfiles, venv.name)
    matches: bool | None = None
    if lock.is_file():
        try:
            locked = lockfile.read(lock)
        except LockfileError:
            matches = False
        else:
            # a tool's lock speaks for what its venv determines: it records no code and no caches
            report = drift.compare(locked, snap).only(drift.VENV_AREAS)
            matches = not report.fails("warning")
    return Tool(
        name=venv.name,
        path=str(venv),
        train=str(marker.get("train", "")),
        requirements=tuple(marker.get("requirements", ())),
        lock=str(lock) if lock.is_file() else "",
        torch=snap.torch.version if snap.torch else "",
        packages=len(snap.packages),
        bytes=freed_by_removing(venv),  # uv's cache keeps its links: not the tool's to free
        matches=matches,
    )
