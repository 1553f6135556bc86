"""The NVIDIA driver and GPUs: /proc first, then NVML (nvidia-ml-py), then nvidia-smi.

No GPU is a normal state (a login node, a CPU CI runner) and is recorded as such.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

from envguard.errors import CommandError
from envguard.model import GpuInfo, GpuState

PROC_VERSION = Path("/proc/driver/nvidia/version")
_DRIVER = re.compile(r"NVRM version:.*?\s(\d{2,4}\.\d+(?:\.\d+)?)\s")


def parse_proc_version(text: str) -> str | None:
    m = _DRIVER.search(text + " ")
    return m.group(1) if m else None


def probe(proc_version: Path = PROC_VERSION) -> GpuState:
    driver = _proc_driver(proc_version)
    if driver is None and not Path("/dev/nvidiactl").exists() and not shutil.which("nvidia-smi"):
        return GpuState(source="none")  # no driver: skip NVML's import and load attempt
    for source, reader in (("nvml", _from_nvml), ("nvidia-smi", _from_smi)):
        found = reader()
        if found is not None:
            smi_driver, gpus = found
            return GpuState(driver=driver or smi_driver, source=source, gpus=gpus)
    return GpuState(driver=driver, source="none")


def _proc_driver(path: Path) -> str | None:
    try:
        return parse_proc_version(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def _from_nvml() -> tuple[str | None, tuple[GpuInfo, ...]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound and friends: no driver here
        return None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                GpuInfo(
                    index=i,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    compute_capability=f"{major}.{minor}",
                    memory_mib=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20,
                )
            )
        return driver, tuple(gpus)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):  # shutting down a library we are done with
            pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


SMI_QUERY = "index,name,uuid,compute_cap,memory.total,driver_version"


def parse_smi_csv(text: str) -> tuple[str | None, tuple[GpuInfo, ...]]:
    driver, gpus = None, []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 6 or not cells[0].isdigit():
            continue
        index, name, uuid, cap, mem, driver = cells
        gpus.append(
            GpuInfo(
                index=int(index),
                name=name,
                uuid=uuid,
                compute_capability=cap,
                memory_mib=int(float(mem)) if mem.replace(".", "").isdigit() else 0,
            )
        )
    return driver, tuple(gpus)


def _from_smi() -> tuple[str | None, tuple[GpuInfo, ...]] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    from envguard._run import run

    try:
        done = run([smi, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"], timeout=20)
    except CommandError:
        return None
    return parse_smi_csv(done.stdout)
