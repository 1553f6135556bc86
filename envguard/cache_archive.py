"""Compile caches saved beside a lockfile, and unpacked again only where they will be reused.

``train.envguard.toml`` gets ``train.envguard-caches.tar.gz``: one folder per cache and a
manifest. Unpacking refuses members that would land outside the target (absolute paths,
``..``, links, devices) and refuses the whole archive when the restored environment is not the
one the caches were built for.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from envguard import compat
from envguard._fs import atomic_write
from envguard.errors import EnvguardError, NotRestored
from envguard.lockfile import compat_as_lists
from envguard.model import CompileCache, Snapshot
from envguard.probes.caches import default_paths
from envguard.probes.caches import skipped as _skipped

MANIFEST = "envguard-caches.json"


def archive_path(lock_path: Path) -> Path:
    name = lock_path.name.removesuffix(".toml")
    return lock_path.with_name(f"{name}-caches.tar.gz")


@dataclass(frozen=True, kw_only=True)
class Unpacked:
    kind: str
    path: str
    files: int


def save(snap: Snapshot, lock_path: Path) -> tuple[Path, int]:
    """Archive every existing cache of ``snap``; returns the archive and its size in bytes."""
    caches = [c for c in snap.caches if c.exists and c.files]
    if not caches:
        raise EnvguardError("no compile cache with entries to save")
    buf = io.BytesIO()
    manifest = []
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for i, cache in enumerate(caches):
            folder = f"{i}-{cache.kind}"
            manifest.append({"folder": folder, **cache.to_dict()})
            for path in sorted(Path(cache.path).rglob("*")):
                rel = path.relative_to(cache.path)
                if (
                    path.is_file()
                    and not path.is_symlink()
                    and not any(_skipped(p) for p in rel.parts)
                ):
                    tar.add(path, arcname=f"{folder}/{rel.as_posix()}", recursive=False)
        data = json.dumps({"schema": 1, "caches": manifest}, indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    target = archive_path(lock_path)
    atomic_write(target, buf.getvalue())
    return target, len(buf.getvalue())


def restore(
    lock_path: Path, live: Snapshot, environ: dict[str, str] | None = None
) -> list[Unpacked]:
    archive = archive_path(lock_path)
    if not archive.is_file():
        raise EnvguardError(f"{archive}: no saved caches (envguard snapshot --save-cache)")
    targets = default_paths(environ if environ is not None else dict(os.environ))
    with tarfile.open(archive, "r:gz") as tar:
        manifest = _manifest(tar, archive)
        plan = []
        for entry in manifest:
            compat_as_lists(entry)
            cache = CompileCache.from_dict(
                {k: v for k, v in entry.items() if k != "folder"},
                path=f"{archive.name}:{entry.get('folder')}",
            )
            why = compat.mismatches(cache.compat, live)
            if why:
                raise NotRestored(
                    f"the saved {cache.kind} cache would not be reused here: "
                    f"{'; '.join(why)}. Nothing was unpacked"
                )
            dest = targets.get(cache.kind, Path(cache.path))
            plan.append((str(entry["folder"]), cache.kind, dest))
        return [_unpack(tar, folder, kind, dest) for folder, kind, dest in plan]


def _manifest(tar: tarfile.TarFile, archive: Path) -> list[dict[str, object]]:
    try:
        member = tar.extractfile(MANIFEST)
        data = json.loads(member.read() if member else b"")
        caches = data["caches"]
        assert isinstance(caches, list)
        return caches
    except (KeyError, ValueError, AssertionError, TypeError) as exc:
        raise EnvguardError(f"{archive}: not an envguard cache archive (no manifest)") from exc


def _unpack(tar: tarfile.TarFile, folder: str, kind: str, dest: Path) -> Unpacked:
    prefix = f"{folder}/"
    members = []
    for member in tar.getmembers():
        if not member.name.startswith(prefix):
            continue
        rel = member.name[len(prefix) :]
        _check(member, rel, dest)
        members.append(_renamed(member, rel))
    dest.mkdir(parents=True, exist_ok=True)
    for member in members:
        if hasattr(tarfile, "data_filter"):
            tar.extract(member, dest, filter="data")
        else:  # pragma: no cover - Python without PEP 706; _check already vetted the member
            tar.extract(member, dest)
    return Unpacked(kind=kind, path=str(dest), files=len(members))


def _renamed(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    copy = tarfile.TarInfo(name)
    copy.size, copy.mode, copy.mtime, copy.type = (
        member.size,
        member.mode,
        member.mtime,
        member.type,
    )
    copy.offset, copy.offset_data = member.offset, member.offset_data
    return copy


def _check(member: tarfile.TarInfo, rel: str, dest: Path) -> None:
    """Regular files and folders strictly inside ``dest``: nothing else is unpacked."""
    if not (member.isfile() or member.isdir()):
        raise NotRestored(f"refusing {member.name!r}: links and devices are never unpacked")
    target = (dest / rel).resolve()
    root = dest.resolve()
    if rel.startswith("/") or ".." in Path(rel).parts or not target.is_relative_to(root):
        raise NotRestored(f"refusing {member.name!r}: it would land outside {dest}")
