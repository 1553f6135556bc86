"""The CUDA libraries torch loads (from its wheels), and the system's copies."""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import CudaLibrary, Snapshot

AREA = named("cuda")
LABELS = {"runtime": "CUDA runtime", "cudnn": "cuDNN", "nccl": "NCCL"}
_WHY = {
    "runtime": "kernels, cuBLAS heuristics and the driver it needs all follow the runtime",
    "cudnn": "convolution and attention kernels and their numerics",
    "nccl": "collective algorithms; a mismatch across nodes can hang the job",
}


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    loaded_from_system: set[str] = set()
    for part, label in LABELS.items():
        (va, a_sys), (vb, b_sys) = _loaded(old, part), _loaded(new, part)
        if a_sys or b_sys:
            loaded_from_system.add(_NAMES[part])
        if va == vb:
            continue
        major_moved = va.split(".")[0] != vb.split(".")[0]
        system = " (torch loads the system's copy: no CUDA wheels)" if a_sys and b_sys else ""
        yield AREA.change(
            severity="critical" if major_moved else AREA.severity,
            subject=label,
            old=va or "absent",
            new=vb or "absent",
            why=_WHY[part] + system,
        )
    sys_a = {lib.name: lib.version for lib in old.cuda.system}
    sys_b = {lib.name: lib.version for lib in new.cuda.system}
    for name in sorted((set(sys_a) | set(sys_b)) - loaded_from_system):
        if sys_a.get(name) != sys_b.get(name):
            yield AREA.change(
                severity="info",
                subject=f"system {name}",
                old=sys_a.get(name, "absent"),
                new=sys_b.get(name, "absent"),
                why="outside the venv; torch loads the wheels' copy"
                if _has_wheels(old, new)
                else "outside the venv; nothing here loads it",
            )


_NAMES = {"runtime": "cudart", "cudnn": "cudnn", "nccl": "nccl"}


def _loaded(snap: Snapshot, part: str) -> tuple[str, bool]:
    """(the version torch loads, whether it is the system's): the wheel's copy, else, for a
    torch with no CUDA wheels beside it (a container that builds torch against the system's
    CUDA), the system's."""
    lib: CudaLibrary | None = getattr(snap.cuda, part)
    if lib is not None:
        return lib.version, False
    if snap.torch is None or not snap.torch.cuda:
        return "", False
    system = next((s for s in snap.cuda.system if s.name == _NAMES[part]), None)
    return (system.version, True) if system else ("", False)


def _has_wheels(old: Snapshot, new: Snapshot) -> bool:
    return any(getattr(s.cuda, p) for s in (old, new) for p in LABELS)
