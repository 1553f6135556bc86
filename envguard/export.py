"""The lock as a PEP 751 ``pylock.toml`` that ``uv pip sync`` installs.

A pylock must name each package's wheels with hashes, which only an index can tell: uv
resolves the exact pins (``uv pip compile --no-deps --format pylock.toml``) against the
inferred indexes (``--resolve``) or the user's (``--find-links``/``--index-url``), and envguard
adds what it knows under ``[tool.envguard]``, then validates the result with packaging.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import tomli_w

from envguard import uv as uv_backend
from envguard._fs import atomic_write
from envguard.errors import ArgumentError, ExportError
from envguard.model import Distribution, Snapshot
from envguard.restore.plan import Overrides, indexes_for, plan, requirements_text

_ARCHIVES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


def pylock(lock: Snapshot, overrides: Overrides, *, resolve: bool) -> bytes:
    if not resolve and not overrides.given():
        raise ArgumentError(
            "a pylock needs wheel URLs and hashes: pass --resolve to ask the "
            "inferred indexes, or --find-links / --index-url"
        )
    lock = _shippable(lock, overrides.find_links)
    the_plan = plan(lock, Path(lock.venv.path), None, overrides)
    if the_plan.skipped:
        from envguard.output.human import skipped_line

        raise ExportError(f"cannot export: {'; '.join(map(skipped_line, the_plan.skipped))}")
    indexes = indexes_for(lock, the_plan.overrides)
    with tempfile.TemporaryDirectory(prefix="envguard-export-") as tmp:
        reqs = Path(tmp) / "requirements.in"
        reqs.write_text(requirements_text(the_plan), encoding="utf-8")
        out = Path(tmp) / "pylock.toml"
        uv_backend.compile_pylock(reqs, out, indexes, lock.python.version)
        doc = _load(out.read_bytes())
    doc.setdefault("tool", {})["envguard"] = _facts(lock)
    data = tomli_w.dumps(doc).encode()
    validate(data)
    return data


def _shippable(lock: Snapshot, find_links: Sequence[str]) -> Snapshot:
    """The lock with each package installed from a local folder (editable or not) pinned to
    its wheel in a --find-links folder: a pylock's ``directory`` would name the folder by
    this machine's path, which no runner has. Without that wheel, a refusal saying so."""
    local = {d.name: (d, path) for d in lock.packages if (path := _local_folder(d)) is not None}
    if not local:
        return lock
    wheels = {name: _wheel_in(find_links, d) for name, (d, _) in local.items()}
    missing = [(d, path) for name, (d, path) in local.items() if wheels[name] is None]
    if missing:
        raise ExportError(_unshippable(missing, find_links))
    packages = tuple(
        replace(d, direct_url=wheel.as_uri(), editable=False)
        if (wheel := wheels.get(d.name)) is not None
        else d
        for d in lock.packages
    )
    return replace(lock, packages=packages)


def _local_folder(dist: Distribution) -> Path | None:
    """The folder a package was installed from (``file:`` and not an archive), if one."""
    url = dist.direct_url or ""
    if not url.startswith("file:"):
        return None
    path = _path(url)
    if dist.editable or path.is_dir() or not path.name.endswith(_ARCHIVES):
        return path
    return None


def _path(location: str) -> Path:
    """A local path, given as one or as a ``file:`` URL (file:///my%20wheels)."""
    return (
        Path(url2pathname(urlsplit(location).path))
        if location.startswith("file:")
        else Path(location)
    )


def _wheel_in(find_links: Sequence[str], dist: Distribution) -> Path | None:
    """A wheel of exactly this name and version in one of the local --find-links folders."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    folders = [_path(f) for f in find_links if "://" not in f or f.startswith("file:")]
    for wheel in (w for f in folders if f.is_dir() for w in sorted(f.glob("*.whl"))):
        try:
            name, version, _, _ = parse_wheel_filename(wheel.name)
            if name == canonicalize_name(dist.name) and version == Version(dist.version):
                return wheel.absolute()
        except (InvalidWheelFilename, InvalidVersion):
            continue
    return None


def _unshippable(missing: Sequence[tuple[Distribution, Path]], find_links: Sequence[str]) -> str:
    named = ", ".join(f"{d.name} {d.version} ({path})" for d, path in missing)
    where = f"no such wheel in --find-links {', '.join(find_links)}; " if find_links else ""
    return (
        f"cannot export {named}: installed from a local folder, which a pylock names by this "
        f"machine's path; {where}build the wheel (`pip wheel --no-deps -w wheels "
        f"{missing[0][1]}`) and pass --find-links wheels"
    )


def check_name(path: Path) -> None:
    name = path.name
    if name != "pylock.toml" and not (name.startswith("pylock.") and name.endswith(".toml")):
        raise ArgumentError(f"{path}: PEP 751 names lock files pylock.toml or pylock.NAME.toml")


def write(path: Path, data: bytes) -> None:
    check_name(path)
    atomic_write(path, data)


def validate(data: bytes) -> None:
    """packaging's own PEP 751 validation, where the installed packaging has it (>= 25)."""
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:  # pragma: no cover - older packaging
        return
    try:
        Pylock.from_dict(_load(data))
    except PylockValidationError as exc:
        raise ExportError(f"the exported pylock is not valid PEP 751: {exc}") from exc


def _load(data: bytes) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    doc: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
    return doc


def _facts(lock: Snapshot) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "lockfile-name": lock.name,
        "taken-at": lock.taken_at,
        "python": lock.python.version,
    }
    if lock.torch:
        torch = {
            "version": lock.torch.version,
            "variant": lock.torch.variant,
            "index": lock.torch.index_url,
            "git-version": lock.torch.git_version,
        }
        facts["torch"] = {k: v for k, v in torch.items() if v is not None}  # TOML has no null
    cuda = {
        lib.name: lib.version for lib in (lock.cuda.runtime, lock.cuda.cudnn, lock.cuda.nccl) if lib
    }
    if cuda:
        facts["cuda"] = cuda
    gpus = sorted({g.name for g in lock.gpu.gpus})
    if gpus:
        facts["gpus"] = gpus
    if lock.gpu.driver:
        facts["driver"] = lock.gpu.driver
    return facts
