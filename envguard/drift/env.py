"""Environment variables that change how a step trains; not what launchers or venvs set."""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog
from envguard.drift.report import Change
from envguard.model import Snapshot

_WHY = (
    ("NCCL_", "collective algorithms and transports; can hang or slow multi-GPU runs"),
    ("TORCHINDUCTOR_", "how torch.compile builds kernels and where it caches them"),
    ("TRITON_", "how Triton compiles kernels and where it caches them"),
    ("CUDA_", "which GPUs are visible and how kernels launch"),
    ("PYTORCH_", "the CUDA allocator and runtime behaviour"),
    ("TORCH_", "torch runtime and compile behaviour"),
    ("LD_", "which shared libraries load, CUDA's included"),
    ("OMP_", "CPU threads for data loading and ops"),
    ("HF_", "where models and datasets load from"),
    ("TRANSFORMERS_", "where models load from and how"),
    ("PYTHONPATH", "which code is imported"),
)


def changes(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    # locks of older envguards recorded variables now known to be noise (VIRTUAL_ENV)
    a = {k: v for k, v in old.environ.items() if catalog.env_captured(k)}
    b = {k: v for k, v in new.environ.items() if catalog.env_captured(k)}
    launchers = tuple(x for x in (old.launcher, new.launcher) if x)
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y or catalog.set_for_you(name, x, y, launchers):
            continue
        why = next((w for prefix, w in _WHY if name.startswith(prefix)), "")
        installer = name.startswith(("UV_", "PIP_"))
        yield Change(
            severity="info" if installer or not why else "warning",
            area="env",
            subject=name,
            old="unset" if x is None else x,
            new="unset" if y is None else y,
            why=why or "installer or shell setting; does not change a running job",
        )
