"""The CUDA libraries torch loads (from its wheels), and the system's copies."""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.report import Change
from envguard.model import CudaLibrary, Snapshot

LABELS = {"runtime": "CUDA runtime", "cudnn": "cuDNN", "nccl": "NCCL"}
_WHY = {
    "runtime": "kernels, cuBLAS heuristics and the driver it needs all follow the runtime",
    "cudnn": "convolution and attention kernels and their numerics",
    "nccl": "collective algorithms; a mismatch across nodes can hang the job",
}


def changes(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    for part, label in LABELS.items():
        a: CudaLibrary | None = getattr(old.cuda, part)
        b: CudaLibrary | None = getattr(new.cuda, part)
        va, vb = (a.version if a else ""), (b.version if b else "")
        if va == vb:
            continue
        major_moved = va.split(".")[0] != vb.split(".")[0]
        yield Change(
            severity="critical" if major_moved else "warning",
            area="cuda",
            subject=label,
            old=va or "absent",
            new=vb or "absent",
            why=_WHY[part],
        )
    sys_a = {lib.name: lib.version for lib in old.cuda.system}
    sys_b = {lib.name: lib.version for lib in new.cuda.system}
    for name in sorted(set(sys_a) | set(sys_b)):
        if sys_a.get(name) != sys_b.get(name):
            yield Change(
                severity="info",
                area="cuda",
                subject=f"system {name}",
                old=sys_a.get(name, "absent"),
                new=sys_b.get(name, "absent"),
                why="outside the venv; torch loads the wheels' copy",
            )
