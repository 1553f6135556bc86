"""Environment variables that change how training runs, with secrets redacted."""

from __future__ import annotations

from collections.abc import Mapping

from envguard.redact import redact_value

PREFIXES = (
    "CUDA_", "CUDNN_", "NCCL_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_",
    "TRITON_", "PYTORCH_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "XLA_",
    "UV_", "PIP_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "NVTE_", "VLLM_", "SGLANG_",
    "FLASHINFER_", "WANDB_", "DEEPSPEED_", "ACCELERATE_",
)  # fmt: skip
NAMES = frozenset({
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONHOME",
    "CUBLAS_WORKSPACE_CONFIG", "VIRTUAL_ENV", "CONDA_PREFIX",
})  # fmt: skip
# Launch topology (MASTER_ADDR, RANK, WORLD_SIZE, SLURM_*) is left out on purpose: it differs
# on every run and every rank without changing how a step trains.
# Per-process or per-shell noise: they differ on every run and say nothing about training.
# torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING on every rank it starts: a lock taken outside
# the launcher would otherwise see every rank as drifted.
IGNORED = frozenset(
    {
        "CUDA_VISIBLE_DEVICES_ORIG",
        "UV_RUN_RECURSION_DEPTH",
        "PIP_REQ_TRACKER",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    }
)


def capture(environ: Mapping[str, str]) -> dict[str, str]:
    """The training-relevant subset of ``environ``, sorted, each value redacted as needed."""
    picked = {
        name: redact_value(name, value)
        for name, value in environ.items()
        if _relevant(name) and name not in IGNORED
    }
    return dict(sorted(picked.items()))


def _relevant(name: str) -> bool:
    return name in NAMES or name.startswith(PREFIXES)
