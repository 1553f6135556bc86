"""Compile caches saved beside a lockfile, and unpacked again only where they will be reused.

``train.envguard.toml`` gets ``train.envguard-caches.tar.gz``: one folder per cache and a
manifest. The archive and the lockfile are untrusted input (a pull request, a CI artifact):
where each cache goes is a folder this environment uses (torch's and Triton's own cache
settings here) or one the user allows (``restore --cache-dir``, ``cache-dirs`` in
``[tool.envguard]``), normalised before it is compared, never a folder of the archive's or
the lockfile's choosing. The archive is read one header at a time, up to a member count and
a total size; every member of every folder is checked (regular files and folders only,
strictly inside their folder) and then against its final place (no file in the way of a
folder, no link leading out of the cache) before anything is written. The new files are
written into a private folder beside each cache and moved into place only once all of them,
for every cache, are complete: all or none. A dry run makes every check and writes nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import itertools
import json
import os
import posixpath
import shlex
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from envguard import compat
from envguard._confine import Root
from envguard._fs import atomic_write, is_cache_place, normal
from envguard._units import human_bytes
from envguard.errors import CacheArchiveError, NotRestored
from envguard.lockfile import compat_as_lists
from envguard.model import CompileCache, SavedCaches, Snapshot
from envguard.probes.caches import default_paths
from envguard.probes.caches import skipped as _skipped

MANIFEST = "envguard-caches.json"
_MANIFEST_LIMIT = 16 << 20
# A real cache has thousands of files, a big Triton one tens of thousands: reading stops at
# the limit, holding what it read until then (at the limit: 6 s and 140 MB, measured).
_MEMBER_LIMIT = 200_000
_SIZE_LIMIT = 64 << 30  # the files' total, whatever the free space says
_READ_LIMIT = 1 << 20  # one read of the archive: a header, a chunk of a file or the manifest
_NAME_LIMIT = 4096  # a member's name: PATH_MAX, and no quadratic walk of a hostile one
_KINDS = ("inductor", "triton", "custom")
_HEADROOM = 64 << 20  # left free on the disk after unpacking
_HASH_CHUNK = 1 << 20


def archive_path(lock_path: Path) -> Path:
    name = lock_path.name.removesuffix(".toml")
    return lock_path.with_name(f"{name}-caches.tar.gz")


@dataclass(frozen=True, kw_only=True)
class Unpacked:
    kind: str
    path: str
    files: int


def pack(snap: Snapshot) -> bytes:
    """Every existing cache of ``snap``, archived: the bytes :func:`save` writes."""
    caches = [c for c in snap.caches if c.exists and c.files]
    if not caches:
        raise CacheArchiveError("no compile cache with entries to save")
    buf = io.BytesIO()
    manifest = []
    # the same caches make the same bytes (gzip's header keeps no time): the same hash, one
    # file in a cache store however often they are saved
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=6, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
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
    return buf.getvalue()


def saved(data: bytes) -> SavedCaches:
    """What the lock records of the archive ``data``: restore unpacks that file only."""
    return SavedCaches(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))


def store_name(saved: SavedCaches) -> str:
    """An archive's name in a cache store: its hash, so that two locks never overwrite each
    other's and a lock finds its own whatever the lock is called on the reader's side."""
    return f"{saved.sha256}.envguard-caches.tar.gz"


def located(lock_path: Path, lock: Snapshot, store: Path | None) -> Path:
    """Where the lock's archive is: beside the lock, else, when the lock records it by hash
    and the project has a cache store, in the store. The archive is checked by that hash
    where it is read, wherever it was found."""
    beside = archive_path(lock_path)
    saved = lock.saved_caches
    if store is None or saved is None:
        return beside
    with contextlib.suppress(OSError):
        if beside.stat().st_size == saved.bytes:
            return beside
    return store / store_name(saved)


def save_to_store(data: bytes, saved: SavedCaches, store: Path) -> Path:
    """The archive written into the cache store (a folder that must be there: an unmounted
    share would otherwise fill the local disk unseen); one already there with this hash is
    kept."""
    if not store.is_dir():
        raise CacheArchiveError(
            f"cache-store {store}: no such folder (is the shared filesystem mounted?)"
        )
    target = store / store_name(saved)
    with contextlib.suppress(OSError):
        if target.stat().st_size == saved.bytes and _sha256_of(target) == saved.sha256:
            return target
    atomic_write(target, data)
    return target


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def save(snap: Snapshot, lock_path: Path, data: bytes | None = None) -> tuple[Path, int]:
    """Write the archive of ``snap``'s caches (``data``, else packed now) beside its lock;
    returns the archive and its size in bytes."""
    data = pack(snap) if data is None else data
    target = archive_path(lock_path)
    atomic_write(target, data)
    return target, len(data)


def missing(lock_path: Path, lock: Snapshot, store: Path | None) -> str:
    """Why there is no archive to unpack, and where to look."""
    beside = archive_path(lock_path)
    saved = lock.saved_caches
    if saved is None:
        return f"{beside}: no saved caches (envguard snapshot --save-cache)"
    what = f"the lock's archive ({human_bytes(saved.bytes)}, sha256 {saved.sha256[:12]})"
    if store is None:
        return (
            f"{beside}: not here, and no cache-store is set: {what} may be in the store it "
            "was saved to (cache-store in [tool.envguard], or ENVGUARD_CACHE_STORE)"
        )
    return f"{what} is neither beside the lock nor in the cache store {store}"


@dataclass(frozen=True, kw_only=True)
class _Target:
    folder: str
    cache: CompileCache
    dest: Path  # normalised, absolute
    members: tuple[tuple[tarfile.TarInfo, str], ...]  # (member, its path inside the cache)


@dataclass(frozen=True, kw_only=True)
class _Plan:
    target: _Target
    files: tuple[tuple[tarfile.TarInfo, str], ...]  # the members not there yet: to write


def restore(
    lock_path: Path,
    lock: Snapshot,
    live: Snapshot,
    environ: dict[str, str] | None = None,
    *,
    allowed: Iterable[Path] = (),
    custom_into: Mapping[str, Path] | None = None,
    dry_run: bool = False,
    store: Path | None = None,
) -> list[Unpacked]:
    """Unpack the saved caches of ``lock`` where this environment's torch and Triton will
    look for them (or into the custom cache folders in ``allowed``), if (and only if) their
    entries will be reused by ``live``. ``custom_into``: each custom cache's folder (as the
    lock records it) → a folder of envguard's to unpack it into instead; given, the custom
    caches it leaves out are not unpacked. ``dry_run``: every check, nothing written.
    ``store``: the project's cache store, where the archive is when it is not beside."""
    archive = located(lock_path, lock, store)
    if not archive.is_file():
        raise CacheArchiveError(missing(lock_path, lock, store))
    environ = environ if environ is not None else dict(os.environ)
    here = {k: normal(p) for k, p in default_paths(environ).items()}
    try:
        with _open(archive, lock.saved_caches) as tar:
            targets = _targets(tar, archive, lock, here, tuple(allowed), custom_into)
            _check_compat(targets, live)
            plans = [_planned(t) for t in targets]
            _check_space(plans)
            if dry_run:
                return [_unpacked(p) for p in plans]
            return _unpack_all(tar, plans)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise
        raise CacheArchiveError(f"{archive}: not a readable cache archive ({exc})") from exc


class _Bounded:
    """The decompressed archive, for tarfile, in reads of at most ``_READ_LIMIT`` bytes:
    tarfile reads a long name or a pax header in one read of its declared size, and 1 MB of
    archive can declare a 1 GB name (2 GB of memory, measured) before any check runs."""

    def __init__(self, raw: gzip.GzipFile) -> None:
        self._raw = raw

    def read(self, size: int = -1, /) -> bytes:
        if size is None or size < 0 or size > _READ_LIMIT:
            raise NotRestored(
                f"refusing the archive: a header or read of more than {human_bytes(_READ_LIMIT)}"
            )
        return self._raw.read(size)

    def seek(self, pos: int, whence: int = 0, /) -> int:
        return self._raw.seek(pos, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def write(self, b: bytes, /) -> int:
        raise io.UnsupportedOperation("read only")

    def close(self) -> None:
        self._raw.close()


@contextlib.contextmanager
def _open(archive: Path, expected: SavedCaches | None) -> Iterator[tarfile.TarFile]:
    """The archive, read once for its hash (when the lock records one) and then for its
    members, through one open file: the bytes checked are the bytes unpacked."""
    with archive.open("rb") as fh:
        if expected is not None:
            _check_is(archive, fh, expected)
        with (
            gzip.GzipFile(fileobj=fh, mode="rb") as raw,
            tarfile.open(fileobj=_Bounded(raw), mode="r:") as tar,
        ):
            yield tar


def _check_is(archive: Path, fh: BinaryIO, expected: SavedCaches) -> None:
    size = os.fstat(fh.fileno()).st_size
    if size != expected.bytes:
        raise CacheArchiveError(
            f"{archive}: {human_bytes(size)}, not the {human_bytes(expected.bytes)} archive this "
            "lock saved (another snapshot's, or damaged): envguard snapshot --save-cache again"
        )
    digest = hashlib.sha256()
    while chunk := fh.read(_HASH_CHUNK):
        digest.update(chunk)
    if digest.hexdigest() != expected.sha256:
        raise CacheArchiveError(
            f"{archive}: not the archive this lock saved (its SHA-256 differs: another "
            "snapshot's, or damaged): envguard snapshot --save-cache again"
        )
    fh.seek(0)


def _lazily(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members one header at a time (iterating a TarFile, or getmember, reads every
    header of the archive first); tarfile's own list of them is emptied as it goes, so that
    what stays in memory is what the caller keeps."""
    while (member := tar.next()) is not None:
        tar.members.clear()  # type: ignore[attr-defined]  # a plain attribute; typeshed omits it
        yield member


def _targets(
    tar: tarfile.TarFile,
    archive: Path,
    lock: Snapshot,
    here: dict[str, Path],
    allowed: tuple[Path, ...],
    custom_into: Mapping[str, Path] | None = None,
) -> list[_Target]:
    """Each saved cache, where it goes (decided here, not by the archive), and its members;
    any member that is not a plain file or folder inside a known cache refuses them all."""
    entries, members = _read(tar, archive)
    by_folder: dict[str, list[tuple[tarfile.TarInfo, str]]] = {e: [] for e in entries}
    for folder, member, rel in members:
        if folder not in by_folder:
            raise NotRestored(f"refusing {member.name!r}: not inside a cache the manifest lists")
        by_folder[folder].append((member, rel))
    if custom_into is not None:  # envguard's own folders: the lock chooses none of them
        entries = {f: c for f, c in entries.items()
                   if c.kind != "custom" or c.path in custom_into}  # fmt: skip
    targets = [
        _Target(
            folder=f, cache=c, members=tuple(by_folder[f]),
            dest=normal(custom_into[c.path]) if custom_into is not None and c.kind == "custom"
            else _destination(c, lock, here, allowed),
        )
        for f, c in entries.items()
    ]  # fmt: skip
    _apart(targets)
    return targets


def _apart(targets: list[_Target]) -> None:
    """No two caches into one folder, or one inside the other: each would find the other's
    files missing and write them again. Sorted by path, a folder's insides follow it."""
    ordered = sorted(targets, key=lambda t: t.dest.parts)
    for a, b in itertools.pairwise(ordered):
        if b.dest.is_relative_to(a.dest):
            raise NotRestored(
                f"refusing the archive: its caches {a.folder!r} and {b.folder!r} both go into "
                f"{a.dest}; nothing was unpacked"
            )


def _read(
    tar: tarfile.TarFile, archive: Path
) -> tuple[dict[str, CompileCache], list[tuple[str, tarfile.TarInfo, str]]]:
    """The manifest (wherever it is) and every other member, (folder, member, path in it),
    each checked as it is read: the reading stops at the first refusal or limit."""
    manifest: dict[str, CompileCache] | None = None
    members: list[tuple[str, tarfile.TarInfo, str]] = []
    seen: dict[str, str] = {}  # every path, "f" file or "d" folder
    total = 0
    for count, member in enumerate(_lazily(tar), start=1):
        if count > _MEMBER_LIMIT:
            raise NotRestored(f"refusing {archive}: more than {_MEMBER_LIMIT:,} members")
        if member.name == MANIFEST:
            if manifest is not None:
                raise NotRestored(f"refusing {archive}: it holds two manifests")
            manifest = _manifest(tar, member, archive)
            continue
        folder, rel = _split(member.name)
        _check(member, rel)
        _unique(member, seen)
        total += member.size
        if total > _SIZE_LIMIT:  # before tarfile reads past this member's data
            raise NotRestored(f"refusing {archive}: more than {human_bytes(_SIZE_LIMIT)} of files")
        members.append((folder, member, rel))
    if manifest is None:
        raise CacheArchiveError(f"{archive}: not an envguard cache archive (no manifest)")
    return manifest, members


def _manifest(
    tar: tarfile.TarFile, info: tarfile.TarInfo, archive: Path
) -> dict[str, CompileCache]:
    try:
        if not info.isfile() or info.size > _MANIFEST_LIMIT:
            raise ValueError("manifest is not a small file")
        data = json.loads(_data(tar, info))
        caches = data["caches"]
        if not isinstance(caches, list):
            raise TypeError("caches is not a list")
    except (KeyError, ValueError, TypeError, RecursionError) as exc:
        raise CacheArchiveError(f"{archive}: not an envguard cache archive (no manifest)") from exc
    out: dict[str, CompileCache] = {}
    for i, entry in enumerate(caches):
        if not isinstance(entry, dict) or not isinstance(entry.get("folder"), str):
            raise CacheArchiveError(f"{archive}: manifest entry {i} names no folder")
        folder = entry["folder"]
        if not folder or "/" in folder or folder in (".", "..") or folder in out:
            raise NotRestored(f"refusing manifest folder {folder!r}")
        compat_as_lists(entry)
        out[folder] = CompileCache.from_dict(
            {k: v for k, v in entry.items() if k != "folder"}, path=f"{archive.name}:{folder}"
        )
    return out


def _data(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    """A small member's bytes, read in chunks that _Bounded lets through."""
    source, chunks, left = tar.extractfile(info), [], info.size
    while source is not None and left > 0 and (chunk := source.read(min(left, _READ_LIMIT))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
    if path not in {*here.values(), *(normal(a.expanduser()) for a in allowed)}:
        raise NotRestored(
            f"refusing the lockfile's cache folder {path}: not one this environment uses; to "
            f"allow it: envguard restore --cache-dir {shlex.quote(str(path))} (or cache-dirs "
            "in [tool.envguard]); nothing was unpacked"
        )
    return path


def _plausible_cache(path: Path) -> Path:
    """A custom cache folder, normalised: never relative (to which folder?), the system, a
    folder of homes, a home or above it, another user's home, or in one of a home's own
    dot-folders (~/.ssh, ~/.config) but those of caches (~/.cache, ~/.triton)."""
    if not path.is_absolute():
        raise NotRestored(
            f"refusing the cache folder {str(path)!r}: not an absolute path; nothing was unpacked"
        )
    real = normal(path)
    if not is_cache_place(real):
        raise NotRestored(f"refusing to unpack a cache into {real}: not a cache folder")
    return real


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
    if len(member.name) > _NAME_LIMIT:
        raise NotRestored(
            f"refusing {member.name[:80]!r}...: a name of over {_NAME_LIMIT} characters"
        )
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


def _check_compat(targets: list[_Target], live: Snapshot) -> None:
    for t in targets:
        why = compat.mismatches(t.cache.compat, live)
        if why:
            raise NotRestored(
                f"the saved {t.cache.kind} cache would not be reused here: "
                f"{'; '.join(why)}. Nothing was unpacked"
            )


def _planned(target: _Target) -> _Plan:
    """The members to write, each checked against its final place before anything is: the
    folders on its way that exist are folders, and none of them is a link.
    What is there stays (a cache is filled, never rewritten: its names are its contents'
    hashes)."""
    dest = target.dest
    root = Path(os.path.realpath(dest))
    if target.cache.kind == "custom":  # where the folder's own links lead, too
        _plausible_cache(root)
    # the cache's folders looked at: whether they exist
    folders = {"": _is_folder(dest, root, top=True)}
    files = []
    for member, rel in target.members:
        if member.isdir():
            continue  # folders are made for the files in them
        if _folder_exists(dest, root, posixpath.dirname(rel), folders) and (
            (dest / rel).exists() or (dest / rel).is_symlink()
        ):
            continue
        files.append((member, rel))
    return _Plan(target=target, files=tuple(files))


def _folder_exists(dest: Path, root: Path, rel: str, known: dict[str, bool]) -> bool:
    """Whether the cache's folder ``rel`` exists, each folder above it looked at once."""
    unknown = []
    while rel not in known:
        unknown.append(rel)
        rel = posixpath.dirname(rel)
    for sub in reversed(unknown):
        known[sub] = known[posixpath.dirname(sub)] and _is_folder(dest / sub, root)
    return known[unknown[0] if unknown else rel]


def _is_folder(path: Path, root: Path, *, top: bool = False) -> bool:
    """Whether ``path`` exists; refused if it is a file or a link (nothing is written
    through a link: one leading out of ``root`` would write outside the cache)."""
    if not (path.exists() or path.is_symlink()):
        return False
    real = Path(os.path.realpath(path))
    if path.is_symlink() and not real.is_relative_to(root):
        raise NotRestored(f"refusing {path}: a link in the cache that leads elsewhere ({real})")
    if path.is_symlink() and not top:  # the cache's own folder may be a link: the user's
        raise NotRestored(f"refusing {path}: a link in the cache; nothing is written through it")
    if not path.is_dir():
        raise NotRestored(f"refusing {path}: a file is where the cache has a folder")
    return True


def _check_space(plans: list[_Plan]) -> None:
    """The sizes of the files to write against the free space, before anything is written."""
    need: dict[Path, int] = {}
    for p in plans:
        root = _existing(p.target.dest)
        need[root] = need.get(root, 0) + sum(m.size for m, _ in p.files)
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


def _unpacked(plan: _Plan) -> Unpacked:
    t = plan.target
    return Unpacked(kind=t.cache.kind, path=str(t.dest), files=len(plan.files))


def _unpack_all(tar: tarfile.TarFile, plans: list[_Plan]) -> list[Unpacked]:
    """Every new file of every cache written into a private folder beside its cache, then
    all moved into place: on any failure, what was moved or made is taken back, and every
    cache (and what is around it) is as it was. Every write goes through a :class:`Root`:
    what the checks above passed cannot be turned into a link meanwhile."""
    undo: list[Path] = []  # folders made and files moved into place, in that order
    staged: list[tuple[_Plan, Root]] = []
    try:
        try:
            for plan in plans:
                if plan.files:
                    staged.append((plan, Root(_staging(plan.target.dest, undo), what=_WHAT)))
                    for member, rel in plan.files:
                        _copy(tar, member, staged[-1][1], rel)
            for plan, staging in staged:
                _place(plan, staging, undo)
        finally:  # before taking back: a staging folder is in a folder that may be taken back
            for _, staging in staged:
                shutil.rmtree(staging.path, ignore_errors=True)
    except BaseException:
        _take_back(undo)
        raise
    return [_unpacked(p) for p in plans]


_WHAT = "a cache archive's file"


def _staging(dest: Path, undo: list[Path]) -> Path:
    _make_folders(dest.parent, undo)
    for stale in dest.parent.glob(f".{dest.name}.envguard-unpack-*"):
        shutil.rmtree(stale, ignore_errors=True)  # what a killed unpack left
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.envguard-unpack-", dir=dest.parent))


def _place(plan: _Plan, staging: Root, undo: list[Path]) -> None:
    _make_folders(plan.target.dest, undo)
    room = Root(plan.target.dest, what=_WHAT)
    for _, rel in plan.files:
        undo.append(room.move_in(rel, staging.path / rel, made=undo))


def _make_folders(path: Path, undo: list[Path]) -> None:
    """``path`` and the folders above it that are missing, each recorded to be taken back."""
    missing = []
    while not path.exists() and not path.is_symlink() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir()
        undo.append(folder)


def _take_back(undo: list[Path]) -> None:
    for path in reversed(undo):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                path.rmdir()  # only if empty: what someone else put there stays
            else:
                path.unlink()


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, staging: Root, rel: str) -> None:
    """Exactly the member's declared size, or it is refused."""
    source = tar.extractfile(member)
    if source is None:
        raise NotRestored(f"refusing {member.name!r}: no data")
    left = member.size
    with staging.writer(rel) as out:
        while left:
            chunk = source.read(min(left, 1 << 20))
            if not chunk:
                raise NotRestored(f"refusing {member.name!r}: the archive is truncated")
            out.write(chunk)
            left -= len(chunk)
    with contextlib.suppress(OSError):
        os.utime(staging.path / rel, (member.mtime, member.mtime))
