"""Files, safely: atomic writes (a reader sees the old file or the new one, never half of
one), streams and devices written through rather than replaced, regular files read within a
limit, and envguard's own cache folder."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, fsync, rename.

    The file keeps the mode it had (a venv's ``bin/activate``), else gets the one the user's
    umask gives new files (0644 usually): lockfiles are read by teammates and collectors.
    A symlink keeps pointing where it did: the file it names is the one replaced. A device or
    a pipe (``-o /dev/null``, ``-o /dev/stdout``) is written through, never replaced: a rename
    over /dev/null, as root, would leave a regular file there for every program after.
    """
    fd = descriptor(path)
    if fd is not None:  # -o /dev/stdout: the stream itself, appended as the shell opened it
        _write_all(fd, data)
        return
    try:
        st = path.stat()  # through symlinks
    except FileNotFoundError:
        st = None
    except NotADirectoryError:  # a file where a folder should be: the same error as writing
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        with path.open("wb") as fh:
            fh.write(data)
        return
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # a file where a folder of the path should be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from exc
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_DESCRIPTOR = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/([0-9]+))|/proc/self/fd/([0-9]+)")


def descriptor(path: Path) -> int | None:
    """The open file descriptor ``path`` names (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/1``, or a symlink to one of them), else None. Resolving such a path leads
    to the file the shell opened (``>> build.log``): renaming over it would replace the log."""
    name = Path(path).absolute()
    for _ in range(40):  # as many links as the kernel follows
        m = _DESCRIPTOR.fullmatch(os.path.normpath(name))
        if m:
            return 1 if m.group(1) else 2 if m.group(2) else int(m.group(3) or m.group(4))
        try:
            target = name.readlink()
        except OSError:  # not a link (or not there): names no descriptor
            return None
        name = name.parent / target  # an absolute target replaces the parent
    return None


def read_regular(path: Path, limit: int = 256 << 20) -> bytes:
    """``path``'s bytes, if it is a regular file (through links) of at most ``limit`` bytes:
    /dev/zero or a FIFO named as a lockfile or a journal would be read without end."""
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):  # before opening: a FIFO's open would wait
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with path.open("rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped in between
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", str(path))
        # read(limit) would allocate the whole limit for a 2 kB lock: its size, and a byte
        # more to see whether it grew meanwhile
        data = fh.read(st.st_size + 1)
        if len(data) > st.st_size:
            data += fh.read(limit + 1 - len(data))
            if len(data) > limit:
                raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", str(path))
        return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~umask()


def umask() -> int:
    """The process umask, read without changing it where /proc tells it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_cache_dir() -> Path:
    """Where envguard keeps its own cache (the stat cache): ENVGUARD_CACHE_DIR, XDG, ~/.cache."""
    explicit = os.environ.get("ENVGUARD_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "envguard"


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported.

    At no moment does either path stand empty: the caller's "old or new, never neither".
    """
    import ctypes
    import errno

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False  # a filesystem or kernel without RENAME_EXCHANGE
    raise OSError(err, os.strerror(err), str(a))


def is_inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or under it, links resolved (a symlinked folder that
    points into ``root`` is inside it)."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def normal(path: Path) -> Path:
    """``path`` absolute, with ``.`` and ``..`` folded by name, as the user reads it: no
    link is followed (where links lead is looked at on the disk, when unpacking), and
    ``//etc`` is ``/etc`` (POSIX leaves a leading ``//`` to the system; Linux reads ``/``)."""
    text = os.path.normpath(path.absolute())
    return Path("/" + text.lstrip("/") if text.startswith("//") else text)


# Never a cache's home, whatever names it: the system, folders of folders, a home's own.
_SYSTEM = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/Users",  # noqa: S108
           "/var", "/var/tmp")  # noqa: S108  # fmt: skip
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                 "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/spool")  # fmt: skip
_HOME_CACHES = (".cache", ".triton")  # a home's dot-folders a cache may be in (~/.triton/cache)


def is_cache_place(path: Path) -> bool:
    """Whether a cache may be in the folder ``path`` (absolute, normalised), which a lock may
    name: never the system, a folder of homes, a home or above it, another user's home, or
    one of a home's own dot-folders (~/.ssh, ~/.config) but those of caches (~/.cache,
    ~/.triton). One rule for every writer of a lock's cache folders (restore, bisect)."""
    return not (_is_system(path) or _is_home_folder(path, normal(Path.home())))


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


def missing_parents(root: Path) -> list[Path]:
    """The folders above ``root`` that are not there, the nearest first."""
    missing = []
    for parent in root.parents:
        if parent.exists() or parent.is_symlink():
            break
        missing.append(parent)
    return missing
