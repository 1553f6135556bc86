"""Writing data that came from elsewhere (a lockfile, its patch, a cache archive) inside one
folder, and nowhere else.

Every file envguard writes from such data (a bisect trial's untracked files and cache copies,
restore's caches and envguard's own files put back after a checkout) is written through a
:class:`Root`. A name is a relative path with no ``..``, no empty or ``.`` part and no NUL,
and it is walked one folder at a time from the root's open descriptor with ``O_NOFOLLOW``:
a symbolic link anywhere on the way (one a patch made, one a commit checked out) refuses the
write, as does a link at the final name, so nothing is ever written through a link and no
check can be raced between looking and writing. A file lands by a rename inside its folder:
a reader sees it whole or not at all. The root itself is the caller's choice (a trial's
folder, torch's cache folder as this environment names it) and is resolved once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from envguard._fs import normal
from envguard.errors import ConfinementError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class Root:
    """A folder that data from elsewhere is written into, and nothing outside it."""

    def __init__(self, path: Path, *, what: str = "") -> None:
        """``path``: the folder (made if missing); ``what``: how errors name the data
        ("the lock's untracked file")."""
        path = normal(path)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.real = Path(os.path.realpath(path))
        self.what = what or "a file"

    # -- names --

    def parts(self, name: str | PurePosixPath, *, empty: bool = False) -> tuple[str, ...]:
        """``name``'s folders and file, checked: relative, strictly inside, no NUL."""
        text = str(name)
        parts = tuple(p for p in text.split("/") if p not in ("", "."))
        if (
            text.startswith("/")
            or "\0" in text
            or "\\" in text
            or ".." in parts
            or (not parts and not empty)
        ):
            raise ConfinementError(
                f"refusing {self.what} {text!r}: not a path inside {self.path}; nothing was written"
            )
        return parts

    def inside(self, path: Path) -> tuple[str, ...] | None:
        """The parts of ``path`` below the root, ``..`` folded by name (never by following a
        link), or None when it is not below it."""
        try:
            rel = normal(path).relative_to(self.path)
        except ValueError:
            return None
        return tuple(p for p in rel.parts if p != ".")

    # -- writing --

    def folder(self, name: str | PurePosixPath) -> Path:
        """The folder ``name`` under the root, made with the folders above it."""
        parts = self.parts(name, empty=True)
        os.close(self._walk(parts, make=True))
        return self.path.joinpath(*parts)

    def write(self, name: str | PurePosixPath, data: bytes, *, mode: int = 0o666) -> Path:
        """``data`` as the file ``name`` (a file there is replaced; a link or folder refuses)."""
        with self.writer(name, mode=mode) as fh:
            fh.write(data)
        return self.path.joinpath(*self.parts(name))

    @contextlib.contextmanager
    def writer(
        self, name: str | PurePosixPath, *, mode: int = 0o666, made: list[Path] | None = None
    ) -> Iterator[BinaryIO]:
        """A new file ``name`` to write into, in place when the block ends without error
        (a file there is replaced; a link or folder refuses). ``made``: the folders made
        for it are appended, the outermost first."""
        parts = self.parts(name)
        fd = self._walk(parts[:-1], make=True, made=made)
        try:
            self._replaceable(fd, parts)
            with (
                self._landing(fd, parts[-1]) as tmp,
                os.fdopen(os.open(tmp, _NEW, mode, dir_fd=fd), "wb") as fh,
            ):
                yield fh
        finally:
            os.close(fd)

    def copy(self, name: str | PurePosixPath, source: Path) -> bool:
        """The regular file or link ``source`` (of a place envguard trusts: the user's
        working tree, an archive unpacked into a fresh folder) as ``name``: a file's bytes,
        mode and mtime, a link as a link. Anything else (a FIFO, a device) is not copied:
        False."""
        parts = self.parts(name)
        fd = self._walk(parts[:-1], make=True)
        try:
            return self._copy_at(fd, parts, source)
        finally:
            os.close(fd)

    def copy_tree(self, name: str | PurePosixPath, source: Path) -> tuple[int, int]:
        """Everything under the folder ``source`` into the folder ``name``: (files copied,
        links left out). A link inside ``source`` is copied as a link only when it leads
        to a place inside ``source``: one that leads out would let what runs in the copy
        write into the original."""
        base = self.parts(name, empty=True)
        copied = left = 0
        source = normal(source)
        for here, dirs, files in os.walk(source):
            sub = Path(here).relative_to(source).parts
            fd = self._walk(base + sub, make=True)
            try:
                for entry in (*files, *(d for d in dirs if Path(here, d).is_symlink())):
                    path = Path(here, entry)
                    target = _inside_target(path, source) if path.is_symlink() else None
                    if path.is_symlink() and target is None:
                        left += 1
                        continue
                    copied += self._copy_at(fd, (*base, *sub, entry), path, target)
            finally:
                os.close(fd)
        return copied, left

    def move_in(
        self, name: str | PurePosixPath, source: Path, *, made: list[Path] | None = None
    ) -> Path:
        """The file ``source`` (on the same file system, in a folder of envguard's) renamed
        to ``name``; ``made`` as for :meth:`writer`."""
        parts = self.parts(name)
        fd = self._walk(parts[:-1], make=True, made=made)
        try:
            self._replaceable(fd, parts)
            os.rename(source, parts[-1], dst_dir_fd=fd)
        finally:
            os.close(fd)
        return self.path.joinpath(*parts)

    # -- internals --

    def _walk(self, parts: tuple[str, ...], *, make: bool, made: list[Path] | None = None) -> int:
        """An open descriptor of the folder ``parts`` below the root, never through a link;
        the folders it had to make appended to ``made``."""
        fd = os.open(self.real, _DIR)
        try:
            for i, part in enumerate(parts):
                nxt = self._step(fd, part, parts[: i + 1], make=make, made=made)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _step(
        self, fd: int, part: str, upto: tuple[str, ...], *, make: bool, made: list[Path] | None
    ) -> int:
        for attempt in (1, 2):
            try:
                return os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not make or attempt == 2:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                    if made is not None:
                        made.append(self.path.joinpath(*upto))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise self._refused(fd, part, upto) from None
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _replaceable(self, fd: int, parts: tuple[str, ...]) -> None:
        """The final name is free or a regular file: a link there is refused, not replaced
        (what it points at may be what the data was aimed at), and so is a folder."""
        try:
            st = os.lstat(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise self._refused(fd, parts[-1], parts)

    def _refused(self, fd: int, part: str, upto: tuple[str, ...]) -> ConfinementError:
        shown = "/".join(upto)
        try:
            st = os.lstat(part, dir_fd=fd)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            target = os.readlink(part, dir_fd=fd)
            why = f"{shown} is a symbolic link (to {target}): nothing is written through a link"
        elif st is not None and stat.S_ISDIR(st.st_mode):
            why = f"{shown} is a folder"
        else:
            why = f"{shown} is not a folder"
        return ConfinementError(
            f"refusing {self.what} under {self.path}: {why}; nothing was written outside"
        )

    @contextlib.contextmanager
    def _landing(self, fd: int, final: str) -> Iterator[str]:
        """A temporary name beside ``final``, renamed to it when the body succeeds."""
        tmp = f".{final[:180]}.{secrets.token_hex(4)}.envguard-tmp"
        try:
            yield tmp
            os.rename(tmp, final, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise

    def _copy_at(
        self, fd: int, parts: tuple[str, ...], source: Path, target: str | None = None
    ) -> bool:
        """``source`` as ``parts`` in the folder ``fd``; a link pointing at ``target``
        (its own when None)."""
        st = os.lstat(source)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            return False
        self._replaceable(fd, parts)
        with self._landing(fd, parts[-1]) as tmp:
            if stat.S_ISLNK(st.st_mode):
                os.symlink(target or source.readlink(), tmp, dir_fd=fd)
                return True
            _copy_bytes(source, fd, tmp, st)
        return True


def _copy_bytes(source: Path, fd: int, tmp: str, st: os.stat_result) -> None:
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        out = os.open(tmp, _NEW, stat.S_IMODE(st.st_mode), dir_fd=fd)
        try:
            left = st.st_size
            while left > 0:
                sent = os.sendfile(out, src, None, min(left, _CHUNK))
                if sent == 0:  # shrank meanwhile: what was there is copied
                    break
                left -= sent
            while chunk := os.read(src, _CHUNK):  # grew meanwhile
                os.write(out, chunk)
        finally:
            os.close(out)
    finally:
        os.close(src)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=fd, follow_symlinks=False)


def _inside_target(link: Path, root: Path) -> str | None:
    """Where ``link`` points, as a relative path, when that is inside ``root`` (read by
    name: the target may not exist); None when it leads out. Relative, so that the copy's
    link leads into the copy, not back into ``root``."""
    target = os.path.normpath(link.parent / link.readlink())
    if target != str(root) and not target.startswith(str(root).rstrip("/") + "/"):
        return None
    return os.path.relpath(target, link.parent)
