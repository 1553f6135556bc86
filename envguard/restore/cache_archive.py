"""Compile caches saved beside a lockfile, and unpacked again only where they will be reused.

``train.envguard.toml`` gets ``train.envguard-caches.tar.gz``: one folder per cache and a
manifest. The archive and the lockfile are untrusted input (a pull request, a CI artifact):
where each cache goes is a folder this environment uses (torch's and Triton's own cache
settings here) or one the user allows (``restore --cache-dir``, ``cache-dirs`` in
``[tool.envguard]``), normalised before it is compared, never a folder of the archive's or
the lockfile's choosing. Every member of every folder is checked (regular files and folders
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
import shlex
import shutil
import tarfile
from collections.abc import Iterable
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
# Never a cache's home, whatever names it: the system, folders of folders, a home's own.
_SYSTEM = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/Users",  # noqa: S108
           "/var", "/var/tmp")  # noqa: S108  # fmt: skip
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                 "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/spool")  # fmt: skip
_HOME_CACHES = (".cache", ".triton")  # a home's dot-folders a cache may be in (~/.triton/cache)
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
    lock_path: Path,
    lock: Snapshot,
    live: Snapshot,
    environ: dict[str, str] | None = None,
    *,
    allowed: Iterable[Path] = (),
) -> list[Unpacked]:
    """Unpack the saved caches of ``lock`` where this environment's torch and Triton will
    look for them (or into the custom cache folders in ``allowed``), if (and only if) their
    entries will be reused by ``live``."""
    archive = archive_path(lock_path)
    if not archive.is_file():
        raise EnvguardError(f"{archive}: no saved caches (envguard snapshot --save-cache)")
    environ = environ if environ is not None else dict(os.environ)
    here = {k: _normal(p) for k, p in default_paths(environ).items()}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            targets = _targets(tar, archive, lock, here, tuple(allowed))
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
    tar: tarfile.TarFile,
    archive: Path,
    lock: Snapshot,
    here: dict[str, Path],
    allowed: tuple[Path, ...],
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
        _Target(
            folder=f, cache=c, dest=_destination(c, lock, here, allowed),
            members=tuple(by_folder[f]),
        )
        for f, c in entries.items()
    ]  # fmt: skip


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


def _destination(
    cache: CompileCache, lock: Snapshot, here: dict[str, Path], allowed: tuple[Path, ...]
) -> Path:
    """Where a saved cache goes: torch's or Triton's cache folder as this environment sets
    it, or a custom cache folder the lockfile records and the user allows (a lockfile is
    changed by a pull request as easily as the archive beside it)."""
    if cache.kind in ("inductor", "triton"):
        return here[cache.kind]
    if cache.kind != "custom":
        raise NotRestored(f"refusing a cache of unknown kind {cache.kind!r}; nothing was unpacked")
    if cache.path not in {c.path for c in lock.caches if c.kind == "custom"}:
        raise NotRestored(
            f"refusing the archive's cache folder {cache.path!r}: the lockfile records no "
            "such cache; nothing was unpacked"
        )
    path = _plausible_cache(Path(cache.path))
    if path not in {*here.values(), *(_normal(a.expanduser()) for a in allowed)}:
        raise NotRestored(
            f"refusing the lockfile's cache folder {path}: not one this environment uses; to "
            f"allow it: envguard restore --cache-dir {shlex.quote(str(path))} (or cache-dirs "
            "in [tool.envguard]); nothing was unpacked"
        )
    return path


def _normal(path: Path) -> Path:
    """``path`` absolute, with ``.`` and ``..`` folded by name, as the user reads it: no
    link is followed (where links lead is looked at on the disk, when unpacking), and
    ``//etc`` is ``/etc`` (POSIX leaves a leading ``//`` to the system; Linux reads ``/``)."""
    text = os.path.normpath(path.absolute())
    return Path("/" + text.lstrip("/") if text.startswith("//") else text)


def _plausible_cache(path: Path) -> Path:
    """A custom cache folder, normalised: never relative (to which folder?), the system, a
    folder of homes, a home or above it, another user's home, or in one of a home's own
    dot-folders (~/.ssh, ~/.config) but those of caches (~/.cache, ~/.triton)."""
    if not path.is_absolute():
        raise NotRestored(
            f"refusing the cache folder {str(path)!r}: not an absolute path; nothing was unpacked"
        )
    real, home = _normal(path), _normal(Path.home())
    if _is_system(real) or _is_home_folder(real, home):
        raise NotRestored(f"refusing to unpack a cache into {real}: not a cache folder")
    return real


def _is_system(path: Path) -> bool:
    return str(path) in _SYSTEM or any(path.is_relative_to(t) for t in _SYSTEM_TREES)


def _is_home_folder(path: Path, home: Path) -> bool:
    if home.is_relative_to(path):  # the home, or a folder above it
        return True
    if path.is_relative_to(home):
        top = path.parts[len(home.parts)]
        return top.startswith(".") and top not in _HOME_CACHES
    homes = home.parent  # /home: a folder of homes, unless the home is a top folder (/root)
    return homes != Path("/") and path.is_relative_to(homes)


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
