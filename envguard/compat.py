"""Will a compile cache's entries be reused by an environment? The one place that decides.

A cache says what it was built for (see :class:`~envguard.model.CacheCompat`, read from the
entries themselves); the environment says what it runs. torch keys Inductor's graphs on its
version, git commit, CUDA, Triton and GPU model, and Triton keys kernels on its own version
and the GPU arch: any of those missing from the cache means its entries are misses here.
Facts neither side knows (no GPU visible on a login node, a cache that does not say) are
left out, never guessed.
"""

from __future__ import annotations

from typing import Any

from envguard import catalog, requirements
from envguard.model import CacheCompat, Snapshot


def triton_version(snap: Snapshot) -> str | None:
    """The Triton the environment runs, whichever distribution ships it: the one torch
    requires (nightlies require pytorch-triton), else the first one installed."""
    versions = {d.name: d.version for d in snap.packages}
    torch = snap.package(catalog.TORCH)
    wanted = [
        r.name
        for r in map(requirements.parse, torch.requires if torch else ())
        if r is not None and catalog.is_triton(r.name)
    ]
    for name in (*wanted, *catalog.TRITON):
        if name in versions:
            return versions[name]
    return None


def gpu_archs(snap: Snapshot) -> tuple[str, ...]:
    """sm90 for a compute capability 9.0, as Triton names its targets."""
    return tuple(
        sorted(
            {
                "sm" + g.compute_capability.replace(".", "")
                for g in snap.gpu.gpus
                if g.compute_capability
            }
        )
    )


def _cuda_here(torch: Any) -> str | None:
    if torch is None or torch.source != "version.py":
        return None
    return str(torch.cuda or "None")


def mismatches(cache: CacheCompat, snap: Snapshot) -> list[str]:
    """Why entries built for ``cache`` would not be reused in ``snap``; empty if they would
    (or if nothing known says otherwise)."""
    torch = snap.torch
    out = []
    triton = triton_version(snap)
    checks = (
        ("torch", cache.torch, torch.version if torch else None),
        ("torch commit", cache.torch_git, torch.git_version if torch else None),
        # a CPU build's version.py says cuda = None, which the cache records as "None"; a
        # version.py that could not be read says nothing, and nothing is compared
        ("CUDA", cache.cuda, _cuda_here(torch)),
        # pytorch-triton 3.7.0+git1a2b3c4 says triton_version 3.7.0 in its kernels
        ("Triton", tuple(v.split("+")[0] for v in cache.triton), triton and triton.split("+")[0]),
    )
    for label, built_for, here in checks:
        if built_for and here and here not in built_for:
            shown = [v[:7] if label == "torch commit" else v for v in built_for]
            here_shown = here[:7] if label == "torch commit" else here
            here_shown = "no CUDA (a CPU build)" if here_shown == "None" else here_shown
            out.append(f"{label} {', '.join(shown)} (cache) vs {here_shown} (here)")
    archs = gpu_archs(snap)
    if cache.archs and archs and not set(cache.archs) & set(archs):
        out.append(f"kernels for {', '.join(cache.archs)} vs GPUs of {', '.join(archs)} here")
    models = sorted({g.name for g in snap.gpu.gpus})
    if cache.gpus and models and not set(cache.gpus) & set(models):
        out.append(f"compiled on {', '.join(cache.gpus)} vs {', '.join(models)} here")
    return out
