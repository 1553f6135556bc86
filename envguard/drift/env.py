"""Environment variables that change how a step trains; not what launchers or venvs set."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog
from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import Snapshot

AREA = named("env")
_WHY = (
    ("NCCL_", "collective algorithms and transports; can hang or slow multi-GPU runs"),
    ("TORCHINDUCTOR_", "how torch.compile builds kernels and where it caches them"),
    ("TORCHDYNAMO_", "what torch.compile captures and when it falls back"),
    ("TRITON_", "how Triton compiles kernels and where it caches them"),
    ("CUDA_", "which GPUs are visible and how kernels launch"),
    ("CUDNN_", "cuDNN's algorithm choices and logging"),
    ("CUBLAS_", "cuBLAS workspaces, and so determinism"),
    ("PYTORCH_", "the CUDA allocator and runtime behaviour"),
    ("TORCH_", "torch runtime and compile behaviour"),
    ("NVTE_", "Transformer Engine's kernels and precision"),
    ("NVIDIA_", "which GPUs and driver features a container sees"),
    ("XLA_", "how XLA compiles and runs"),
    ("LD_", "which shared libraries load, CUDA's included"),
    ("OMP_", "CPU threads for data loading and ops"),
    ("MKL_", "CPU threads and math kernels"),
    ("KMP_", "CPU threads and their placement"),
    ("OPENBLAS_", "CPU threads and math kernels"),
    ("HF_", "where models and datasets load from"),
    ("HUGGINGFACE_", "where models and datasets load from"),
    ("TRANSFORMERS_", "where models load from and how"),
    ("TOKENIZERS_", "tokenizer threads"),
    ("ACCELERATE_", "the training loop's precision, devices and distribution"),
    ("DEEPSPEED_", "sharding, offload and its kernels"),
    ("VLLM_", "the inference engine's kernels and memory"),
    ("SGLANG_", "the inference engine's kernels and memory"),
    ("FLASHINFER_", "attention kernels"),
    ("PYTHONHASHSEED", "string hashing, and so set and dict orders that feed data"),
    ("PYTHONPATH", "which code is imported"),
    ("PYTHONHOME", "which interpreter's standard library is used"),
)
# Captured, but they do not change the computation of a step.
_NOT_THE_JOB = (
    ("UV_", "installer setting; does not change a running job"),
    ("PIP_", "installer setting; does not change a running job"),
    ("WANDB_", "experiment tracking; does not change a step's computation"),
)


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    # locks of older envguards recorded variables now known to be noise (VIRTUAL_ENV)
    a = {k: v for k, v in old.environ.items() if catalog.env_captured(k)}
    b = {k: v for k, v in new.environ.items() if catalog.env_captured(k)}
    launchers = tuple(x for x in (old.launcher, new.launcher) if x)
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y or catalog.set_for_you(name, x, y, launchers):
            continue
        quiet = next((w for prefix, w in _NOT_THE_JOB if name.startswith(prefix)), "")
        why = quiet or next(
            (w for prefix, w in _WHY if name.startswith(prefix)), "how the job runs"
        )
        yield AREA.change(
            severity="info" if quiet else AREA.severity,
            subject=name,
            old="unset" if x is None else x,
            new="unset" if y is None else y,
            why=why,
        )
