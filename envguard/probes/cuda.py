"""The CUDA libraries torch loads, read from the nvidia wheels' own headers, and the system's.

torch preloads cudart, cuDNN and NCCL from the ``nvidia`` namespace in site-packages, so those
headers, not ``/usr/lib``, say which versions the training process runs with.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from envguard import catalog
from envguard.model import CudaLibrary, CudaStack, Distribution

_DEFINE = re.compile(rb"^\s*#\s*define\s+(\w+)\s+\(?\s*(\d+)", re.MULTILINE)
_RUNTIME_HEADERS = (
    "nvidia/cu13/include/cuda_runtime_api.h",
    "nvidia/cuda_runtime/include/cuda_runtime_api.h",
    "nvidia/cu12/include/cuda_runtime_api.h",
)
_CUDNN_HEADER = "nvidia/cudnn/include/cudnn_version.h"
_NCCL_HEADER = "nvidia/nccl/include/nccl.h"
_SUFFIXED = re.compile(r"-cu\d+")  # a wheel of one CUDA major: nvidia-cudnn-cu13
_SO_VERSION = re.compile(r"^lib(cudnn|nccl|cudart)\.so\.(\d+\.\d+\.\d+)$")
DEFAULT_SYSTEM_ROOTS = ("/usr", "/usr/local/cuda")


def header_defines(path: Path) -> dict[str, int]:
    """Integer ``#define``s of a C header: all the version facts the nvidia headers hold."""
    return {k.decode(): int(v) for k, v in _DEFINE.findall(path.read_bytes())}


def cudart_version(code: int) -> str:
    """``CUDART_VERSION`` 13000 -> "13.0", 12080 -> "12.8" (major*1000 + minor*10)."""
    return f"{code // 1000}.{(code % 1000) // 10}"


def probe(
    sites: Sequence[Path],
    dists: Sequence[Distribution],
    *,
    torch_cuda: str | None = None,
    system_roots: Iterable[str] | None = None,
) -> tuple[CudaStack, tuple[str, ...]]:
    """``sites``: where the interpreter imports from, in order (the venv's site-packages, then
    what a --system-site-packages venv inherits). ``torch_cuda`` (torch's ``version.cuda``)
    picks among cu12 and cu13 wheels when both are installed, as they are after one install
    swaps torch's CUDA build."""
    wheels = {d.name: d.version for d in dists if catalog.is_cuda_wheel(d.name)}
    major = torch_cuda.split(".")[0] if torch_cuda else None
    stack = CudaStack(
        runtime=_wheel_runtime(sites, wheels, major),
        cudnn=_wheel_lib(sites, _CUDNN_HEADER, "cudnn", "CUDNN", "PATCHLEVEL", wheels, major),
        nccl=_wheel_lib(sites, _NCCL_HEADER, "nccl", "NCCL", "PATCH", wheels, major),
        wheels=dict(sorted(wheels.items())),
        system=_system_libs(_roots(system_roots)),
    )
    return stack, _mismatches(stack)


def _roots(given: Iterable[str] | None) -> tuple[str, ...]:
    if given is not None:
        return tuple(given)
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return (*DEFAULT_SYSTEM_ROOTS, home) if home else DEFAULT_SYSTEM_ROOTS


def owner(wheels: Mapping[str, str], prefix: str, major: str | None) -> str | None:
    """The wheel among ``wheels`` that provides the library named by ``prefix`` for CUDA
    ``major``: the one with its ``-cuNN`` suffix, else (13 and later) the unsuffixed one, else
    the first. The one rule: the probe names a snapshot's wheels by it, and preflight the
    wheels an install will leave, so that the forecast and the next snapshot agree."""
    names = [n for n in sorted(wheels) if _provides(n, prefix)]
    matching = [n for n in names if major and n.endswith(f"-cu{major}")]
    # cu13 wheels dropped the suffix for the toolkit parts (nvidia-cuda-runtime 13.0.96).
    unsuffixed = [n for n in names if n == prefix and major and int(major) >= 13]
    return next(iter(matching or unsuffixed or names), None)


def _provides(name: str, prefix: str) -> bool:
    """``prefix`` itself or ``prefix-cuNN``: nvidia-cudnn-frontend is no cuDNN."""
    return name == prefix or (
        name.startswith(prefix) and _SUFFIXED.fullmatch(name[len(prefix) :]) is not None
    )


def _wheel_runtime(
    sites: Sequence[Path], wheels: dict[str, str], major: str | None
) -> CudaLibrary | None:
    found = []
    for rel in _RUNTIME_HEADERS:
        defines = _first_defines(sites, rel)
        if "CUDART_VERSION" in defines:
            found.append((cudart_version(defines["CUDART_VERSION"]), rel))
    if not found:
        return None
    version, rel = next((f for f in found if f[0].split(".")[0] == major), found[0])
    # the wheel of the header's own major, which may not be torch's when torch's is missing
    wheel = owner(wheels, "nvidia-cuda-runtime", version.split(".")[0])
    return CudaLibrary(name="cudart", version=version, source=rel, wheel=wheel)


def _wheel_lib(
    sites: Sequence[Path],
    rel: str,
    name: str,
    prefix: str,
    patch: str,
    wheels: dict[str, str],
    major: str | None,
) -> CudaLibrary | None:
    version = _triple(_first_defines(sites, rel), prefix, patch)
    if version is None:
        return None
    return CudaLibrary(
        name=name, version=version, source=rel, wheel=owner(wheels, f"nvidia-{name}", major)
    )


def _triple(defines: dict[str, int], prefix: str, patch: str) -> str | None:
    keys = (f"{prefix}_MAJOR", f"{prefix}_MINOR", f"{prefix}_{patch}")
    if not all(k in defines for k in keys):
        return None
    return ".".join(str(defines[k]) for k in keys)


def _first_defines(sites: Sequence[Path], rel: str) -> dict[str, int]:
    """The header's defines in the first site folder that has it, as imports would find it."""
    for site in sites:
        defines = _safe_defines(site / rel)
        if defines:
            return defines
    return {}


def _safe_defines(path: Path) -> dict[str, int]:
    try:
        return header_defines(path)
    except OSError:
        return {}


def _system_libs(roots: tuple[str, ...]) -> tuple[CudaLibrary, ...]:
    """What a system-wide scan finds: the version the venv's torch does *not* load."""
    found: dict[str, CudaLibrary] = {}
    for root in roots:
        base = Path(root)
        for header, name, prefix, patch in (
            ("include/cudnn_version.h", "cudnn", "CUDNN", "PATCHLEVEL"),
            ("include/nccl.h", "nccl", "NCCL", "PATCH"),
        ):
            version = _triple(_safe_defines(base / header), prefix, patch)
            if version and name not in found:
                found[name] = CudaLibrary(name=name, version=version, source=str(base / header))
        runtime = _cuda_toolkit_version(base)
        if runtime and "cudart" not in found:
            found["cudart"] = runtime
        for lib_dir in ("lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64", "lib"):
            for lib in _so_versions(base / lib_dir):
                found.setdefault(lib.name, lib)
    return tuple(found[k] for k in sorted(found))


def _cuda_toolkit_version(base: Path) -> CudaLibrary | None:
    try:
        data = json.loads((base / "version.json").read_text(encoding="utf-8"))
        version = data["cuda"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(version, str):
        return None
    return CudaLibrary(name="cudart", version=version, source=str(base / "version.json"))


def _so_versions(lib_dir: Path) -> list[CudaLibrary]:
    try:
        names = sorted(os.listdir(lib_dir))
    except OSError:
        return []
    out = []
    for fname in names:
        m = _SO_VERSION.match(fname)
        if m:
            out.append(
                CudaLibrary(name=m.group(1), version=m.group(2), source=str(lib_dir / fname))
            )
    return out


def _mismatches(stack: CudaStack) -> tuple[str, ...]:
    warnings = []
    loaded = {lib.name: lib for lib in (stack.runtime, stack.cudnn, stack.nccl) if lib}
    labels = {"cudart": "CUDA", "cudnn": "cuDNN", "nccl": "NCCL"}
    for sys_lib in stack.system:
        wheel_lib = loaded.get(sys_lib.name)
        if wheel_lib is None or _same_release(sys_lib.version, wheel_lib.version):
            continue
        label = labels[sys_lib.name]
        warnings.append(
            f"system {label} {sys_lib.version} ({sys_lib.source}) differs from the {label} "
            f"{wheel_lib.version} torch loads ({wheel_lib.wheel or wheel_lib.source}); "
            "tools that scan the system, like collect_env, report the wrong one"
        )
    return tuple(warnings)


def _same_release(system: str, wheel: str) -> bool:
    """13.0.88 and 13.0 are one CUDA release; compare on the wheel's precision."""
    parts = wheel.split(".")
    return system.split(".")[: len(parts)] == parts
