"""Atomic writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import errno
import os
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
    path.parent.mkdir(parents=True, exist_ok=True)
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


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
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
