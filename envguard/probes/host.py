"""Host facts: name, OS, kernel, glibc, CPU, memory (psutil)."""

from __future__ import annotations

import os
from pathlib import Path

from envguard.model import HostInfo


def probe() -> HostInfo:
    cpus, memory = _cpus_and_memory()
    hostname, kernel, machine = _uname()
    return HostInfo(
        hostname=hostname,
        os=_os_name(),
        kernel=kernel,
        machine=machine,
        glibc=_glibc(),
        cpu_model=_cpu_model(),
        cpu_count=cpus,
        memory_bytes=memory,
    )


def _uname() -> tuple[str, str, str]:
    if hasattr(os, "uname"):  # what socket.gethostname and platform read, without importing them
        u = os.uname()
        return u.nodename, u.release, u.machine
    import platform

    p = platform.uname()
    return p.node, p.release, p.machine


def _cpus_and_memory() -> tuple[int, int]:
    """POSIX sysconf gives what psutil reads (MemTotal) without its 15-30 ms import, which is
    a third of a snapshot; psutil covers the platforms without it."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and page_size > 0:
            return os.cpu_count() or 0, pages * page_size
    except (AttributeError, ValueError, OSError):
        pass
    import psutil

    return psutil.cpu_count(logical=True) or 0, int(psutil.virtual_memory().total)


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    import platform

    return f"{platform.system()} {platform.release()}".strip()


def _glibc() -> str | None:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None
    return value.split()[-1] if value else None


def _cpu_model() -> str | None:
    try:
        # Line by line: on a 128-core node /proc/cpuinfo is ~150 kB, and the model is line 5.
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:  # noqa: PTH123
            for line in fh:
                if line.startswith(("model name", "Model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or None
