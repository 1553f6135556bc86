"""Compile caches saved beside a lockfile, and unpacked again only where they will be reused.

``train.envguard.toml`` gets ``train.envguard-caches.tar.gz``: one folder per cache and a
manifest. An archive is untrusted input: where each cache goes comes from the trusted side
(torch's and Triton's own cache settings here, or a custom cache folder the lockfile names),
never from the archive. Every member of every folder is checked (regular files and folders
only, strictly inside their folder) and the declared sizes are checked against the free space
before anything is written; files are written into a staging folder beside the cache and
moved into place only once all of them are complete.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import secrets
import shutil
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
_MANIFEST_LIMIT = 16 << 20
_MEMBER_LIMIT = 1_000_000  # a real Inductor cache has thousands; an archive of more is hostile
# Never a cache's home, whatever a lockfile says: the system, and a home's own folders.
_SYSTEM = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/sbin",
           "/sys", "/usr", "/var")  # fmt: skip
_KINDS = ("inductor", "triton", "custom")
_HEADROOM = 64 << 20  # left free on the disk after unpacking


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


@dataclass(frozen=True, kw_only=True)
class _Target:
    folder: str
    cache: CompileCache
    dest: Path
    members: tuple[tuple[tarfile.TarInfo, str], ...]  # (member, its path inside the cache)


def restore(
    lock_path: Path, lock: Snapshot, live: Snapshot, environ: dict[str, str] | None = None
) -> list[Unpacked]:
    """Unpack the saved caches of ``lock`` where this environment's torch and Triton will
    look for them, if (and only if) their entries will be reused by ``live``."""
    archive = archive_path(lock_path)
    if not archive.is_file():
        raise EnvguardError(f"{archive}: no saved caches (envguard snapshot --save-cache)")
    here = default_paths(environ if environ is not None else dict(os.environ))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            targets = _targets(tar, archive, lock, here)
            for t in targets:
                why = compat.mismatches(t.cache.compat, live)
                if why:
                    raise NotRestored(
                        f"the saved {t.cache.kind} cache would not be reused here: "
                        f"{'; '.join(why)}. Nothing was unpacked"
                    )
            _check_space(targets)
            return [_unpack(tar, t) for t in targets]
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise
        raise EnvguardError(f"{archive}: not a readable cache archive ({exc})") from exc


def _targets(
    tar: tarfile.TarFile, archive: Path, lock: Snapshot, here: dict[str, Path]
) -> list[_Target]:
    """Each saved cache, where it goes (decided here, not by the archive), and its members;
    any member that is not a plain file or folder inside a known cache refuses them all."""
    entries = _manifest(tar, archive)
    by_folder: dict[str, list[tuple[tarfile.TarInfo, str]]] = {e: [] for e in entries}
    seen: dict[str, str] = {}  # every path, "f" file or "d" folder
    for count, member in enumerate(tar, start=1):
        if count > _MEMBER_LIMIT:
            raise NotRestored(f"refusing {archive}: more than {_MEMBER_LIMIT:,} members")
        if member.name == MANIFEST:
            continue
        folder, rel = _split(member.name)
        if folder not in by_folder:
            raise NotRestored(f"refusing {member.name!r}: not inside a cache the manifest lists")
        _check(member, rel)
        _unique(member, seen)
        by_folder[folder].append((member, rel))
    return [
        _Target(folder=f, cache=c, dest=_destination(c, lock, here), members=tuple(by_folder[f]))
        for f, c in entries.items()
    ]


def _manifest(tar: tarfile.TarFile, archive: Path) -> dict[str, CompileCache]:
    try:
        info = tar.getmember(MANIFEST)
        if not info.isfile() or info.size > _MANIFEST_LIMIT:
            raise ValueError("manifest is not a small file")
        member = tar.extractfile(info)
        data = json.loads(member.read() if member else b"")
        caches = data["caches"]
        if not isinstance(caches, list):
            raise TypeError("caches is not a list")
    except (KeyError, ValueError, TypeError, RecursionError) as exc:
        raise EnvguardError(f"{archive}: not an envguard cache archive (no manifest)") from exc
    out: dict[str, CompileCache] = {}
    for i, entry in enumerate(caches):
        if not isinstance(entry, dict) or not isinstance(entry.get("folder"), str):
            raise EnvguardError(f"{archive}: manifest entry {i} names no folder")
        folder = entry["folder"]
        if not folder or "/" in folder or folder in (".", "..") or folder in out:
            raise NotRestored(f"refusing manifest folder {folder!r}")
        compat_as_lists(entry)
        out[folder] = CompileCache.from_dict(
            {k: v for k, v in entry.items() if k != "folder"}, path=f"{archive.name}:{folder}"
        )
    return out


def _destination(cache: CompileCache, lock: Snapshot, here: dict[str, Path]) -> Path:
    """Where a saved cache goes: torch's or Triton's cache folder as this environment sets
    it, or a custom cache folder that the lockfile (which the user reviewed) recorded."""
    if cache.kind in ("inductor", "triton"):
        return here[cache.kind]
    if cache.kind == "custom":
        recorded = {c.path for c in lock.caches if c.kind == "custom"}
        if cache.path not in recorded:
            raise NotRestored(
                f"refusing the archive's cache folder {cache.path!r}: the lockfile records no "
                "such cache; nothing was unpacked"
            )
        _plausible_cache(Path(cache.path))
        return Path(cache.path)
    raise NotRestored(f"refusing a cache of unknown kind {cache.kind!r}; nothing was unpacked")


def _unique(member: tarfile.TarInfo, seen: dict[str, str]) -> None:
    """A path once, and never a file where a folder is (or the other way round): an archive
    that says two things about one path is refused, not half applied."""
    name = member.name.rstrip("/")
    kind = "d" if member.isdir() else "f"
    if name in seen and (kind == "f" or seen[name] == "f"):
        raise NotRestored(f"refusing {member.name!r}: the archive holds it twice")
    parts = name.split("/")
    for i in range(1, len(parts)):
        if seen.get("/".join(parts[:i])) == "f":
            raise NotRestored(f"refusing {member.name!r}: a file of the archive is in its way")
    seen[name] = kind


def _plausible_cache(path: Path) -> None:
    """A custom cache folder from a lockfile (which a pull request can change) is never the
    system, a home folder, or one of a home's own dot-folders (~/.ssh), ~/.cache aside."""
    real = path.expanduser().absolute()
    home = Path.home().absolute()
    dot = len(real.parts) > len(home.parts) and real.parts[: len(home.parts)] == home.parts
    top = real.parts[len(home.parts)] if dot else ""
    if (
        str(real) in _SYSTEM
        or real == home
        or home.is_relative_to(real)
        or (top.startswith(".") and top != ".cache")
    ):
        raise NotRestored(f"refusing to unpack a cache into {real}: not a cache folder")


def _split(name: str) -> tuple[str, str]:
    folder, _, rel = name.partition("/")
    return folder, rel


def _check(member: tarfile.TarInfo, rel: str) -> None:
    """Regular files and folders strictly inside their cache: nothing else is unpacked."""
    if not (member.isfile() or member.isdir()):
        raise NotRestored(f"refusing {member.name!r}: links and devices are never unpacked")
    parts = rel.split("/")
    clean = posixpath.normpath(rel) if rel else ""
    if (
        rel.startswith("/")
        or "\\" in rel
        or "\0" in rel
        or ".." in parts
        or (rel and clean != rel.rstrip("/"))
        or (member.isfile() and not rel)
    ):
        raise NotRestored(f"refusing {member.name!r}: it would land outside its cache folder")
    if member.size < 0:
        raise NotRestored(f"refusing {member.name!r}: a negative size")


def _check_space(targets: list[_Target]) -> None:
    """The archive's declared sizes against the free space, before anything is written."""
    need: dict[Path, int] = {}
    for t in targets:
        root = _existing(t.dest)
        need[root] = need.get(root, 0) + sum(m.size for m, _ in t.members if m.isfile())
    for root, size in need.items():
        free = shutil.disk_usage(root).free
        if size + _HEADROOM > free:
            raise NotRestored(
                f"the saved caches need {size / 1e6:.0f} MB under {root} and only "
                f"{free / 1e6:.0f} MB are free; nothing was unpacked"
            )


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _unpack(tar: tarfile.TarFile, target: _Target) -> Unpacked:
    dest = target.dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.envguard-unpack-*"):
        shutil.rmtree(stale, ignore_errors=True)  # what a killed unpack left
    staging = dest.parent / f".{dest.name}.envguard-unpack-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        files = []
        for member, rel in target.members:
            # a cache is filled, never rewritten: what is there stays (its names are its
            # contents' hashes), and nothing outside a cache's layout is replaced
            if member.isdir() or (dest / rel).exists() or (dest / rel).is_symlink():
                continue
            _copy(tar, member, staging / rel)
            files.append(rel)
        for rel in files:
            final = dest / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.parent.is_symlink() or not final.parent.resolve().is_relative_to(
                dest.resolve()
            ):
                raise NotRestored(f"refusing {rel!r}: a link inside {dest} leads elsewhere")
            os.replace(staging / rel, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Unpacked(kind=target.cache.kind, path=str(dest), files=len(files))


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    """Exactly the member's declared size, or it is refused."""
    source = tar.extractfile(member)
    if source is None:
        raise NotRestored(f"refusing {member.name!r}: no data")
    path.parent.mkdir(parents=True, exist_ok=True)
    left = member.size
    with path.open("wb") as out:
        while left:
            chunk = source.read(min(left, 1 << 20))
            if not chunk:
                raise NotRestored(f"refusing {member.name!r}: the archive is truncated")
            out.write(chunk)
            left -= len(chunk)
    with contextlib.suppress(OSError):
        os.utime(path, (member.mtime, member.mtime))
