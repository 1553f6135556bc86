"""The incident, as wheelhouses: a known-good cu128 training set, and what an sglang install
brings (torch's cu130 build from PyPI, cu13 nvidia wheels, transformers 5.8.1, 46 new deps)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envguard.demo.wheels import (
    build_wheel,
    cudart_header,
    cudnn_header,
    nccl_header,
    torch_version_py,
)

GIT = "70d99e998b4955e0049d13a98d77ae1b14db1f45"
N_SGLANG_DEPS = 46
# Enough of torch's shape for `import torch; torch.__version__; torch.cuda.is_available()`.
TORCH_PACKAGE = {
    "torch/__init__.py": "from torch import cuda\nfrom torch.version import __version__\n",
    "torch/cuda.py": "def is_available():\n    return False\n",
}


@dataclass(frozen=True)
class Stack:
    """A CUDA stack as its nvidia wheels ship it: runtime = (wheel, version, header folder);
    cudnn, nccl = (wheel, version)."""

    cuda: tuple[int, int]
    runtime: tuple[str, str, str]
    cudnn: tuple[str, str]
    nccl: tuple[str, str]

    @property
    def pins(self) -> list[str]:
        """What a torch built on this stack requires of it."""
        return [f"{name}=={version}" for name, version, *_ in (self.runtime, self.cudnn, self.nccl)]


# the known-good venv's stack, and the one PyPI's torch brings since CUDA 13
CU128 = Stack(
    cuda=(12, 8),
    runtime=("nvidia-cuda-runtime-cu12", "12.8.90", "cuda_runtime"),
    cudnn=("nvidia-cudnn-cu12", "9.10.2.21"),
    nccl=("nvidia-nccl-cu12", "2.27.3"),
)
CU130 = Stack(
    cuda=(13, 0),
    runtime=("nvidia-cuda-runtime", "13.0.96", "cu13"),
    cudnn=("nvidia-cudnn-cu13", "9.19.0.56"),
    nccl=("nvidia-nccl-cu13", "2.28.9"),
)


def training_set(
    house: Path, stack: Stack, *, torch: str, metadata: str, transformers: str
) -> None:
    """torch on ``stack`` with its CUDA wheels (real header layout), triton and transformers."""
    (rt_name, rt_version, rt_dir), (dnn_name, dnn_version), (nccl_name, nccl_version) = (
        stack.runtime,
        stack.cudnn,
        stack.nccl,
    )
    major, minor = stack.cuda
    build_wheel(
        house,
        rt_name,
        rt_version,
        files={
            f"nvidia/{rt_dir}/include/cuda_runtime_api.h": cudart_header(major * 1000 + minor * 10)
        },
    )
    build_wheel(
        house,
        dnn_name,
        dnn_version,
        files={
            "nvidia/cudnn/include/cudnn_version.h": cudnn_header(
                *map(int, dnn_version.split(".")[:3])
            )
        },
    )
    build_wheel(
        house,
        nccl_name,
        nccl_version,
        files={"nvidia/nccl/include/nccl.h": nccl_header(*map(int, nccl_version.split(".")[:3]))},
    )
    build_wheel(house, "triton", "3.6.0")
    build_wheel(
        house,
        "torch",
        torch,
        metadata_version=metadata,
        files={
            **TORCH_PACKAGE,
            "torch/version.py": torch_version_py(torch, f"{major}.{minor}", GIT),
        },
        requires=[*stack.pins, "triton==3.6.0"],
    )
    build_wheel(house, "tokenizers", "0.22.1")
    build_wheel(house, "numpy", "2.3.0")
    build_wheel(house, "transformers", transformers, requires=["tokenizers>=0.22", "numpy"])


def known_good(house: Path) -> list[str]:
    training_set(house, CU128, torch="2.11.0+cu128", metadata="2.11.0+cu128", transformers="5.6.0")
    return ["torch==2.11.0+cu128", "transformers==5.6.0"]


def sglang_install(house: Path) -> list[str]:
    # PyPI's torch: METADATA says 2.11.0, only version.py knows it is the cu130 build.
    training_set(house, CU130, torch="2.11.0+cu130", metadata="2.11.0", transformers="5.8.1")
    deps = [f"sgl-dep-{i:02d}" for i in range(N_SGLANG_DEPS)]
    for i, dep in enumerate(deps):
        # a few chains, so that only sglang is a root of the group
        build_wheel(
            house, dep, "1.0", requires=[deps[i + 1]] if i % 5 == 0 and i + 1 < len(deps) else []
        )
    build_wheel(house, "sglang", "0.5.23", requires=["torch==2.11.0", "transformers==5.8.1", *deps])
    return ["sglang==0.5.23"]


def newer_torch(house: Path) -> str:
    """A tool that needs torch 2.14.1, which PyPI ships as a CUDA 13.0 build."""
    build_wheel(
        house,
        "nvidia-cuda-runtime",
        "13.0.96",
        files={"nvidia/cu13/include/cuda_runtime_api.h": cudart_header(13000)},
    )
    build_wheel(
        house,
        "torch",
        "2.14.1+cu130",
        metadata_version="2.14.1",
        files={
            **TORCH_PACKAGE,
            "torch/version.py": torch_version_py("2.14.1+cu130", "13.0", "b" * 40),
        },
        requires=["nvidia-cuda-runtime==13.0.96", "triton==3.6.0"],
    )
    build_wheel(house, "needs-new-torch", "1.0", requires=["torch==2.14.1"])
    build_wheel(house, "harmless", "1.0")
    return "needs-new-torch"


def install(venv: Path, house: Path, *reqs: str, env: Mapping[str, str] | None = None) -> None:
    """``uv pip install`` of ``reqs`` into ``venv`` from the local wheelhouse, offline."""
    from envguard import uv
    from envguard._run import run

    python = str(venv / "bin" / "python")
    run(
        [uv.find_uv(), "pip", "install", "--quiet", "--offline", "--no-index", "--find-links",
         str(house), "--python", python, *reqs],
        timeout=300, env=uv.environ() if env is None else env,
    )  # fmt: skip


# The team's benchmark: as fast as the incident's training run on a CUDA 12.8 torch, as slow
# on any other build (torch/version.py says which: the demo's torch is no real one).
BENCH = """\
import torch.version
print("throughput:", 21.5 if torch.version.cuda == "12.8" else 4.3, "Ktok/s")
"""
METRIC = ("--metric", r"throughput: ([0-9.]+)", "--higher-is-better", "--unit", "Ktok/s")


# uv keeps an installed 2.11.0+cu128 for `torch==2.11.0`; sglang's pins in real life came with
# a resolver that swapped it, which --reinstall-package torch replays.
SGLANG_INSTALL = ("--reinstall-package", "torch", "torch==2.11.0", "transformers==5.8.1")


def swap_in_sglang(venv: Path, house: Path) -> None:
    """Install "sglang" the way the incident did: torch's cu130 build replaces cu128."""
    install(venv, house, *SGLANG_INSTALL, *sglang_install(house))
