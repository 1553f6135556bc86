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

# The ML stack under the key libraries: no row of their own for a minor move (it comes with
# the install that brought it), but one, with why it matters, when the major version moves:
# an API or a format the libraries above them read changed.
MAJOR_MOVES: Mapping[str, str] = {
    "huggingface-hub": "what transformers downloads and loads, the cache's layout and the Hub "
    "API it calls",
    "datasets": "data loading and its cache",
    "pyarrow": "the columnar format datasets are stored and loaded in",
    "sentencepiece": "the tokenization of the models that use it",
    "protobuf": "the serialized tokenizers and configs some models load",
    "einops": "the tensor reshapes of model code",
    "bitsandbytes": "8-bit optimizers and quantized layers",
    "timm": "vision model code and weights",
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
# Each variable a rule of its own: (severity, what it does to a training step), from the
# library's own documentation (NVIDIA's cuBLAS/cuDNN and NCCL environment pages, torch's
# torch.compiler and CUDA semantics notes, Inductor's config.py, OpenMP's spec). A variable
# not named here is judged by its family alone, and says so (ENV_FAMILIES).
ENV_RULES: dict[str, tuple[str, str]] = {
    # precision and launch: several times a step's time
    "NVIDIA_TF32_OVERRIDE": ("critical", "set to 0, cuBLAS and cuDNN refuse TF32 whatever "
                             "torch allows: fp32 matmuls and convolutions run several times "
                             "slower"),
    "CUDA_LAUNCH_BLOCKING": ("critical", "every kernel launch waits for the GPU to finish: no "
                             "overlap of CPU and GPU work (a debugging switch)"),
    "TORCH_COMPILE_DISABLE": ("critical", "torch.compile returns the model as it is: no "
                              "compiled kernels, eager speed"),
    "TORCHDYNAMO_DISABLE": ("critical", "TorchDynamo captures nothing: torch.compile runs "
                            "eagerly"),
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": ("critical", "Inductor reads no cache: every graph "
                                           "compiles again at start"),
    "CUDA_VISIBLE_DEVICES": ("warning", "which GPUs the job sees, and in what order"),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("warning", "how many hardware queues run kernels at once; "
                                    "1 orders communication behind compute (Megatron sets it)"),
    "CUDA_MODULE_LOADING": ("warning", "EAGER loads every kernel at start: more memory and a "
                            "slower start"),
    "CUBLAS_WORKSPACE_CONFIG": ("warning", "cuBLAS workspace sizes, set for deterministic "
                                "matmuls"),
    "PYTORCH_CUDA_ALLOC_CONF": ("warning", "the CUDA caching allocator (the old name of "
                                "PYTORCH_ALLOC_CONF): fragmentation, peak memory"),
    "PYTORCH_ALLOC_CONF": ("warning", "the CUDA caching allocator: fragmentation, peak "
                           "memory, expandable segments"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("critical", "every CUDA allocation goes to the driver: "
                                       "no caching allocator, far slower steps"),
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": ("warning", "1 forces TF32 in cuBLAS matmuls whatever "
                                         "set_float32_matmul_precision says: other numerics"),
    "TORCHINDUCTOR_MAX_AUTOTUNE": ("warning", "Inductor autotunes matmul and convolution "
                                   "kernels: other kernels, longer compiles"),
    "TORCHINDUCTOR_CACHE_DIR": ("warning", "where torch.compile caches its kernels: another "
                                "folder is a cold cache"),
    "TRITON_CACHE_DIR": ("warning", "where Triton caches its kernels: another folder is a "
                         "cold cache"),
    "TORCH_DISTRIBUTED_DEBUG": ("warning", "DETAIL checks every collective's arguments: "
                                "slower steps"),
    "TORCH_NCCL_BLOCKING_WAIT": ("warning", "collectives wait on the host: a hang becomes an "
                                 "error, and steps slow"),
    # NCCL: what runs against what only logs
    "NCCL_ALGO": ("warning", "which collective algorithms NCCL may use (Ring, Tree...): can "
                  "slow multi-GPU steps"),
    "NCCL_PROTO": ("warning", "which protocols NCCL may use (LL, LL128, Simple): can slow "
                   "multi-GPU steps"),
    "NCCL_P2P_DISABLE": ("warning", "no peer-to-peer transfers between GPUs: collectives go "
                         "through host memory"),
    "NCCL_IB_DISABLE": ("warning", "no InfiniBand: collectives across nodes go over sockets"),
    "NCCL_SOCKET_IFNAME": ("warning", "which network interface NCCL's sockets use"),
    "NCCL_DEBUG": ("info", "NCCL's logging only: collectives run the same"),
    "NCCL_DEBUG_SUBSYS": ("info", "which parts of NCCL log: collectives run the same"),
    "NCCL_DEBUG_FILE": ("info", "where NCCL's log goes: collectives run the same"),
    "TORCH_LOGS": ("info", "what torch logs: a step computes the same"),
    "TORCH_SHOW_CPP_STACKTRACES": ("info", "how errors print: a step computes the same"),
    # CPU threads
    "OMP_NUM_THREADS": ("warning", "OpenMP threads per process for torch's CPU ops: too few "
                        "starves them, too many oversubscribe the cores"),
    "MKL_NUM_THREADS": ("warning", "MKL's threads for CPU math"),
    "TOKENIZERS_PARALLELISM": ("info", "whether tokenizers use threads, and its fork warning"),
    # where things load from
    "HF_HUB_OFFLINE": ("info", "whether the Hub is asked: a step computes the same"),
    "HF_TOKEN": ("info", "the Hub's credentials: a step computes the same"),
    "PYTHONHASHSEED": ("warning", "string hashing, and so set and dict orders that feed "
                       "data"),
    "PYTHONPATH": ("warning", "which code is imported"),
    "PYTHONHOME": ("warning", "which interpreter's standard library is used"),
    "LD_LIBRARY_PATH": ("warning", "which shared libraries load, CUDA's included"),
    "LD_PRELOAD": ("warning", "a library loaded into every process before all others"),
}  # fmt: skip
# A variable with no rule of its own: its family, said as such ("envguard has no rule for
# this NVIDIA_ variable (NVIDIA's drivers and libraries)"), never another variable's reason.
ENV_FAMILIES = (
    ("NCCL_", "NCCL, the GPUs' collectives"),
    ("TORCHINDUCTOR_", "TorchInductor, torch.compile's kernels and caches"),
    ("TORCHDYNAMO_", "TorchDynamo, what torch.compile captures"),
    ("TRITON_", "Triton's compiler and caches"),
    ("CUDA_", "the CUDA runtime"),
    ("CUDNN_", "cuDNN"),
    ("CUBLAS_", "cuBLAS"),
    ("PYTORCH_", "torch's runtime"),
    ("TORCH_", "torch's runtime"),
    ("NVTE_", "Transformer Engine"),
    ("NVIDIA_", "NVIDIA's drivers and libraries"),
    ("XLA_", "XLA"),
    ("LD_", "the dynamic loader"),
    ("OMP_", "OpenMP's CPU threads"),
    ("MKL_", "MKL's CPU math"),
    ("KMP_", "Intel OpenMP's threads"),
    ("OPENBLAS_", "OpenBLAS's CPU math"),
    ("HF_", "the Hugging Face Hub"),
    ("HUGGINGFACE_", "the Hugging Face Hub"),
    ("TRANSFORMERS_", "transformers"),
    ("TOKENIZERS_", "tokenizers"),
    ("ACCELERATE_", "accelerate's training loop"),
    ("DEEPSPEED_", "DeepSpeed"),
    ("VLLM_", "vLLM"),
    ("SGLANG_", "SGLang"),
    ("FLASHINFER_", "FlashInfer's kernels"),
)
# Captured, but they do not change the computation of a step.
ENV_NOT_THE_JOB = (
    ("UV_", "installer setting; does not change a running job"),
    ("PIP_", "installer setting; does not change a running job"),
    ("WANDB_", "experiment tracking; does not change a step's computation"),
)


def env_rule(name: str) -> tuple[str, str]:
    """A variable's severity ("" for its area's) and why its change matters: its own rule,
    else its family's, said as such."""
    if name in ENV_RULES:
        return ENV_RULES[name]
    quiet = next((why for prefix, why in ENV_NOT_THE_JOB if name.startswith(prefix)), "")
    if quiet:
        return "info", quiet
    for prefix, family in ENV_FAMILIES:
        if name.startswith(prefix):
            return "", f"envguard has no rule for this {prefix} variable ({family})"
    return "", "envguard has no rule for this variable"


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
