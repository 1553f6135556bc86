"""Snapshots built in memory, for the pure drift tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from envguard.model import (
    CacheCompat,
    CodeState,
    CompileCache,
    CudaLibrary,
    CudaStack,
    Distribution,
    GpuInfo,
    GpuState,
    HostInfo,
    PackageBuild,
    PythonInfo,
    Snapshot,
    VenvInfo,
)  # fmt: skip

GIT = "70d99e998b4955e0049d13a98d77ae1b14db1f45"


def torch_build(version: str = "2.11.0+cu128", cuda: str = "12.8", git: str = GIT) -> PackageBuild:
    return PackageBuild(
        name="torch",
        version=version,
        metadata_version=version,
        variant="cu" + cuda.replace(".", ""),
        index_url="x",
        source="version.py",
        git_version=git,
        cuda=cuda,
        debug=False,
    )


def inductor(
    entries: int = 285, size: int = 353_000_000, fp: str = "f1", **compat: Any
) -> CompileCache:
    base = CacheCompat(
        torch=("2.11.0+cu128",),
        torch_git=(GIT,),
        cuda=("12.8",),
        triton=("3.6.0",),
        gpus=("NVIDIA H200",),
    )
    return CompileCache(
        kind="inductor",
        path="/tmp/torchinductor_u",
        exists=entries > 0 or size > 0,
        files=entries,
        bytes=size,
        entries=entries,
        fingerprint=fp,
        compat=dataclasses.replace(base, **compat),
    )


def base(**changes: Any) -> Snapshot:
    snap = Snapshot(
        name="train",
        taken_at="2026-11-28T10:00:00Z",
        envguard_version="0.1.0",
        venv=VenvInfo(path="/data/venv", kind="venv"),
        python=PythonInfo(
            version="3.12.3",
            implementation="cpython",
            abi="cp312",
            site_packages="/data/venv/lib/python3.12/site-packages",
        ),
        host=HostInfo(
            hostname="gpu-01",
            os="Ubuntu 24.04.3 LTS",
            kernel="6.8",
            machine="x86_64",
            cpu_count=16,
            memory_bytes=128 << 30,
        ),
        torch=torch_build(),
        cuda=CudaStack(
            runtime=CudaLibrary(name="cudart", version="12.8", source="h"),
            cudnn=CudaLibrary(name="cudnn", version="9.10.2", source="h"),
            nccl=CudaLibrary(name="nccl", version="2.27.3", source="h"),
        ),
        gpu=GpuState(
            driver="580.159.04",
            source="nvml",
            gpus=(GpuInfo(index=0, name="NVIDIA H200", uuid="GPU-1", compute_capability="9.0"),),
        ),
        key_libraries={"torch": "2.11.0+cu128", "transformers": "5.6.0"},
        caches=(inductor(),),
        code=CodeState(root="/src/train", head="a" * 40, branch="main"),
        environ={"NCCL_DEBUG": "WARN"},
        packages=(
            dist("torch", "2.11.0+cu128"),
            dist("transformers", "5.6.0"),
            dist("numpy", "2.3.0"),
        ),
    )
    return dataclasses.replace(snap, **changes)


def dist(
    name: str, version: str, at: str = "2026-11-01T09:00:00Z", requires: tuple[str, ...] = ()
) -> Distribution:
    return Distribution(name=name, version=version, installed_at=at, requires=requires)
