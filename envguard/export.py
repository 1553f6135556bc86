"""The lock as a PEP 751 ``pylock.toml`` that ``uv pip sync`` installs.

A pylock must name each package's wheels with hashes, which only an index can tell: uv
resolves the exact pins (``uv pip compile --no-deps --format pylock.toml``) against the
inferred indexes (``--resolve``) or the user's (``--find-links``/``--index-url``), and envguard
adds what it knows under ``[tool.envguard]``, then validates the result with packaging.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import tomli_w

from envguard import restore
from envguard import uv as uv_backend
from envguard._fs import atomic_write
from envguard.errors import EnvguardError
from envguard.model import Snapshot


def pylock(lock: Snapshot, overrides: restore.Overrides, *, resolve: bool) -> bytes:
    if not resolve and not overrides.given():
        raise EnvguardError(
            "a pylock needs wheel URLs and hashes: pass --resolve to ask the "
            "inferred indexes, or --find-links / --index-url"
        )
    the_plan = restore.plan(lock, Path(lock.venv.path), None, overrides)
    if the_plan.skipped:
        raise EnvguardError(f"cannot export: {'; '.join(the_plan.skipped)}")
    indexes = restore.indexes_for(lock, the_plan.overrides)
    with tempfile.TemporaryDirectory(prefix="envguard-export-") as tmp:
        reqs = Path(tmp) / "requirements.in"
        reqs.write_text(restore.requirements_text(the_plan), encoding="utf-8")
        out = Path(tmp) / "pylock.toml"
        uv_backend.compile_pylock(reqs, out, indexes, lock.python.version)
        doc = _load(out.read_bytes())
    doc.setdefault("tool", {})["envguard"] = _facts(lock)
    data = tomli_w.dumps(doc).encode()
    validate(data)
    return data


def check_name(path: Path) -> None:
    name = path.name
    if name != "pylock.toml" and not (name.startswith("pylock.") and name.endswith(".toml")):
        raise EnvguardError(f"{path}: PEP 751 names lock files pylock.toml or pylock.NAME.toml")


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
        raise EnvguardError(f"the exported pylock is not valid PEP 751: {exc}") from exc


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
