"""The one catalogue of names envguard treats specially: packages, variables and its own files.

Probes, drift, protect, restore and export all ask here, so that they cannot disagree about,
say, whether ``pytorch-triton`` is Triton (it is: nightly torch depends on it instead).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

TORCH = "torch"
# C++ extensions built against one torch build; their version.py carries the CUDA build too.
TORCH_EXTENSIONS = ("torchvision", "torchaudio")
# Nightly and ROCm/XPU builds of torch depend on the pytorch-triton names instead of "triton";
# all of them install the `triton` module.
TRITON = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")
# Packages whose real build envguard reads (version.py where they ship one).
BUILDS = (TORCH, *TORCH_EXTENSIONS, *TRITON)

# Key ML libraries: each gets a row of its own in a diff, with why it matters.
KEY_LIBRARIES: Mapping[str, str] = {
    "torch": "the framework itself",
    "torchvision": "a C++ extension built for one torch build",
    "torchaudio": "a C++ extension built for one torch build",
    "triton": "every Triton kernel in the compile caches is rebuilt",
    "pytorch-triton": "every Triton kernel in the compile caches is rebuilt",
    "pytorch-triton-rocm": "every Triton kernel in the compile caches is rebuilt",
    "pytorch-triton-xpu": "every Triton kernel in the compile caches is rebuilt",
    "transformers": "model code, attention defaults and tokenizer behaviour can change",
    "flash-attn": "attention kernels built against one torch ABI",
    "xformers": "attention kernels built against one torch ABI",
    "flashinfer-python": "attention kernels built against one torch ABI",
    "vllm": "an inference server that pins its own torch build",
    "sglang": "an inference server that pins its own torch build",
    "accelerate": "the training loop's device placement and mixed precision",
    "deepspeed": "sharding, offload and fused optimizer kernels",
    "peft": "adapter layers and their merge behaviour",
    "tokenizers": "tokenization, and so every token the model sees",
    "safetensors": "checkpoint loading and saving",
    "numpy": "numerics and the C ABI of extensions built against it",
}

# Distributions that ship CUDA libraries (nvidia-cudnn-cu13, cuda-toolkit, ...). nvidia-ml-py
# is NVML's Python binding: a client library, not part of the CUDA stack torch loads.
_CUDA_PREFIXES = ("nvidia-", "cuda-")
_NOT_CUDA = frozenset({"nvidia-ml-py", "nvidia-ml-py3", "pynvml"})

# What `protect` pins and `preflight` calls a change of the training set.
PROTECTED = (TORCH, *TORCH_EXTENSIONS, *TRITON, "transformers")


_SEPARATORS = re.compile(r"[-_.]+")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 normalises it (``Foo_Bar.baz`` → ``foo-bar-baz``):
    packaging's ``canonicalize_name`` without importing packaging.tags, platform and
    subprocess on the snapshot's hot path."""
    return _SEPARATORS.sub("-", name).lower()


def is_cuda_wheel(name: str) -> bool:
    return name.startswith(_CUDA_PREFIXES) and name not in _NOT_CUDA


def is_triton(name: str) -> bool:
    return name in TRITON


def is_protected(name: str) -> bool:
    return name in PROTECTED or is_cuda_wheel(name)


def why_library(name: str) -> str:
    return KEY_LIBRARIES.get(name, "a key ML library")


# --- environment variables ------------------------------------------------------------------

# Captured: the variables that change how a training step runs.
ENV_PREFIXES = (
    "CUDA_", "CUDNN_", "NCCL_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_",
    "TRITON_", "PYTORCH_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "XLA_",
    "UV_", "PIP_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "NVTE_", "VLLM_", "SGLANG_",
    "FLASHINFER_", "WANDB_", "DEEPSPEED_", "ACCELERATE_",
)  # fmt: skip
ENV_NAMES = frozenset(
    {
        "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONHOME",
        "CUBLAS_WORKSPACE_CONFIG",
    }
)  # fmt: skip
# Never captured, never compared: per-process noise, what activating a venv sets, and what
# launchers set on every rank (topology differs on every run without changing a step).
ENV_IGNORED = frozenset(
    {
        "CUDA_VISIBLE_DEVICES_ORIG", "UV_RUN_RECURSION_DEPTH", "PIP_REQ_TRACKER",
        # activation
        "VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
        "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER", "PATH",
        # torchrun (torch.distributed.run) on every worker it starts
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
    }
)  # fmt: skip
ENV_IGNORED_PREFIXES = (
    "TORCHELASTIC_", "TORCH_ELASTIC_", "SLURM_", "SLURMD_", "OMPI_", "PMI_", "PMIX_",
    "MPI_LOCAL", "MV2_COMM_WORLD_", "ENVGUARD_",
)  # fmt: skip

# Set by a launcher or by torch itself when the user left them unset: a lock taken in a
# shell and a rank started by the launcher differ there without training differently.
# (name, value the launcher or torch sets, who sets it)
_SET_FOR_YOU = (
    ("OMP_NUM_THREADS", "1", "launcher"),  # torchrun, when more than one worker per node
    ("CUDA_MODULE_LOADING", "LAZY", "torch"),  # torch.cuda's lazy init, when unset
)
# Slurm binds GPUs to a job step by setting these (gres); under Slurm they are its choice.
_SLURM_GPU_BINDING = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES")


def env_captured(name: str) -> bool:
    if name in ENV_IGNORED or name.startswith(ENV_IGNORED_PREFIXES):
        return False
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def launcher_of(environ: Mapping[str, str]) -> str | None:
    """Which launcher started this process: torchrun, Slurm, MPI, or None."""
    if "TORCHELASTIC_RUN_ID" in environ or "TORCHELASTIC_RESTART_COUNT" in environ:
        return "torchrun"
    if "LOCAL_RANK" in environ and "WORLD_SIZE" in environ and "MASTER_ADDR" in environ:
        return "torchrun"
    if "SLURM_JOB_ID" in environ and "SLURM_PROCID" in environ:
        return "slurm"
    if any(k in environ for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")):
        return "mpi"
    return None


# torch.compile sets these in its own process when they are unset: the default cache folder,
# and Triton's folder inside it for the current device.
_TORCH_SETS = {
    "TORCHINDUCTOR_CACHE_DIR": re.compile(r"/torchinductor_[^/]+/?$"),
    "TRITON_CACHE_DIR": re.compile(r"/triton/\d+/?$"),
}


def set_for_you(name: str, old: str | None, new: str | None, launchers: tuple[str, ...]) -> bool:
    """Whether ``old`` → ``new`` of ``name`` is what a launcher or torch sets by itself.

    ``launchers``: the launcher detected on either side (empty when neither had one).
    """
    if name in _SLURM_GPU_BINDING and "slurm" in launchers:
        return True  # Slurm binds each rank its own GPUs
    if old is not None and new is not None:
        return False
    value = new if old is None else old
    assert value is not None
    for var, set_value, who in _SET_FOR_YOU:
        if name == var and value == set_value and (who == "torch" or launchers):
            return True
    pattern = _TORCH_SETS.get(name)
    return pattern is not None and pattern.search(value) is not None


# --- envguard's own files --------------------------------------------------------------------

# What envguard writes into a project: lockfiles, journals, cache archives, its config, and
# what restore leaves beside a venv. None of it is the training code's state.
ENVGUARD_FILE_PATTERNS = (
    "*.envguard.toml",
    "*.envguard-journal.jsonl",
    "*.envguard-caches.tar.gz",
    "envguard.toml",
    ".*.envguard-restore.json",
    ".*.envguard-restore.lock",
)
# Not code either: a PEP 751 lock describes an environment, which envguard compares itself.
NOT_CODE_PATTERNS = ("pylock.toml", "pylock.*.toml")
OWN_DIR_MARKERS = (".envguard-new-", ".envguard-backup-")


def is_envguard_file(path: str) -> bool:
    """``path`` (relative, ``/``-separated) is a file only envguard writes."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ENVGUARD_FILE_PATTERNS)


def is_own_file(path: str) -> bool:
    """``path`` is not the training code's: envguard's own file, a PEP 751 lock, or a file
    inside a venv that restore built or kept beside the venv."""
    parts = path.split("/")
    if any(marker in part for part in parts[:-1] for marker in OWN_DIR_MARKERS):
        return True
    name = parts[-1]
    return is_envguard_file(path) or any(fnmatch.fnmatchcase(name, p) for p in NOT_CODE_PATTERNS)
