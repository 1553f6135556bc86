"""The NVIDIA driver and the GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import GpuInfo, Snapshot

AREA = named("gpu")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    a, b = old.gpu, new.gpu
    if a.driver != b.driver:
        yield AREA.change(
            subject="NVIDIA driver",
            old=a.driver or "absent",
            new=b.driver or "absent",
            why="the newest CUDA runtime it supports and its kernel behaviour",
        )
    models_a, models_b = models(a.gpus), models(b.gpus)
    if models_a != models_b:
        yield AREA.change(
            subject="GPUs",
            old=models_a or "none",
            new=models_b or "none",
            why="kernels and autotuning were chosen for the old GPUs",
        )
    elif sorted(g.uuid for g in a.gpus) != sorted(g.uuid for g in b.gpus):
        yield AREA.change(
            severity="info",
            subject="GPUs",
            old=models_a,
            new=models_b,
            why="the same model, other physical GPUs (another node?)",
        )


def models(gpus: tuple[GpuInfo, ...]) -> str:
    """ "2× NVIDIA H200 (sm 9.0)": GPU models and how many of each."""
    names: dict[str, int] = {}
    for g in gpus:
        label = f"{g.name} (sm {g.compute_capability})"
        names[label] = names.get(label, 0) + 1
    return ", ".join(f"{n}× {label}" for label, n in sorted(names.items()))
