"""Real wheels for tests: valid METADATA, WHEEL and a RECORD with sha256 hashes."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from envguard import catalog


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    *,
    files: Mapping[str, bytes | str] | None = None,
    requires: Sequence[str] = (),
    extras: Sequence[str] = (),
    metadata_version: str | None = None,
) -> Path:
    """Write ``name-version-py3-none-any.whl``; METADATA says ``metadata_version`` if given
    (a PyPI torch says 2.11.0 while its version.py says 2.11.0+cu130)."""
    dist = catalog.canonical(name).replace("-", "_")
    stem = f"{dist}-{metadata_version or version}"
    info = f"{stem}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {metadata_version or version}"]
    meta += [f"Provides-Extra: {e}" for e in extras]
    meta += [f"Requires-Dist: {r}" for r in requires]
    contents: dict[str, bytes] = {
        k: v.encode() if isinstance(v, str) else v for k, v in (files or {}).items()
    }
    if not any(k.endswith(".py") for k in contents):
        contents[f"{dist}/__init__.py"] = b""
    contents[f"{info}/METADATA"] = ("\n".join(meta) + "\n\nA test package.\n").encode()
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: envguard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in contents.items()]
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in contents.items():
            zf.writestr(path, data)
    return wheel


def torch_version_py(version: str, cuda: str | None, git: str) -> str:
    """A ``torch/version.py`` in the exact shape torch 2.11 ships (see shared fixtures)."""
    cuda_lit = repr(cuda) if cuda else "None"
    return (
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
        f"__version__ = '{version}'\n"
        "debug = False\n"
        f"cuda: Optional[str] = {cuda_lit}\n"
        f"git_version = '{git}'\n"
        "hip: Optional[str] = None\n"
        "rocm: Optional[str] = None\n"
        "xpu: Optional[str] = None\n"
    )


def cudart_header(code: int) -> str:
    return (
        f"#ifndef __CUDA_RUNTIME_API_H__\n#define __CUDA_RUNTIME_API_H__\n"
        f"#define CUDART_VERSION  {code}\n#endif\n"
    )


def cudnn_header(major: int, minor: int, patch: int) -> str:
    return (
        f"#ifndef CUDNN_VERSION_H_\n#define CUDNN_VERSION_H_\n#define CUDNN_MAJOR {major}\n"
        f"#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n"
        "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
        "#endif\n"
    )


def nccl_header(major: int, minor: int, patch: int) -> str:
    return (
        f"#ifndef NCCL_H_\n#define NCCL_H_\n#define NCCL_MAJOR {major}\n"
        f'#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n#define NCCL_SUFFIX ""\n'
        f"#define NCCL_VERSION_CODE {major * 10000 + minor * 100 + patch}\n#endif\n"
    )
