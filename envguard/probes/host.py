"""Host facts: name, OS, kernel, glibc, CPU, memory (psutil)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from envguard.model import HostInfo


def probe() -> HostInfo:
    import psutil

    return HostInfo(
        hostname=socket.gethostname(),
        os=_os_name(),
        kernel=platform.release(),
        machine=platform.machine(),
        glibc=_glibc(),
        cpu_model=_cpu_model(),
        cpu_count=psutil.cpu_count(logical=True) or 0,
        memory_bytes=int(psutil.virtual_memory().total),
    )


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}".strip()


def _glibc() -> str | None:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None
    return value.split()[-1] if value else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
