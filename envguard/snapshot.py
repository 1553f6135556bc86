"""Take a snapshot: call each probe once and assemble a :class:`Snapshot`. Nothing else."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from envguard import __version__
from envguard.model import CacheCompat, CompileCache, GpuState, Snapshot
from envguard.probes import caches, code, cuda, distributions, environ, gpu, host, torch, venv

# Nightly and ROCm/XPU builds of torch depend on these instead of "triton".
TRITON_NAMES = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")
Progress = Callable[[str, int, int], None]  # (phase, done, total)


def take(
    venv_path: Path,
    *,
    repo: Path | None = None,
    repo_required: bool = False,
    with_code: bool = True,
    cache_dirs: Iterable[Path] = (),
    default_caches: bool = True,
    name: str | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    system_roots: Iterable[str] | None = None,
) -> Snapshot:
    """Read ``venv_path`` (and the repo, caches, host) without importing anything from it."""
    env = os.environ if env is None else env
    step = progress or (lambda phase, done, total: None)
    found = venv.locate(venv_path)
    # NVML or nvidia-smi take 40-100 ms on a GPU node, mostly waiting on the driver: overlap it
    # with reading the distributions.
    gpu_state: list[GpuState] = []
    gpu_thread = threading.Thread(target=lambda: gpu_state.append(gpu.probe()), daemon=True)
    gpu_thread.start()
    step("distributions", 0, 1)
    dists, warnings = distributions.scan(found.site_packages)
    by_name = {d.name: d for d in dists}
    builds = {
        n: torch.probe(found.site_packages, by_name[n])
        for n in ("torch", *torch.FAMILY)
        if n in by_name
    }
    step("CUDA stack", 0, 1)
    torch_build = builds.pop("torch", None)
    stack, cuda_warnings = cuda.probe(
        found.site_packages,
        dists,
        system_roots=system_roots,
        torch_cuda=torch_build.cuda if torch_build else None,
    )
    gpu_thread.join()
    gpus = gpu_state[0] if gpu_state else GpuState(source="none")
    compat = CacheCompat(
        torch=torch_build.version if torch_build else None,
        torch_git=torch_build.git_version if torch_build else None,
        triton=next((by_name[n].version for n in TRITON_NAMES if n in by_name), None),
        cuda=torch_build.cuda if torch_build else None,
        gpus=tuple(sorted({g.name for g in gpus.gpus})),
    )
    cache_list, cache_warnings = _caches(env, cache_dirs, default_caches, compat, step)
    step("code", 0, 1)
    repo_path = repo if repo is not None else Path.cwd()
    code_state, code_warnings = (
        code.probe(repo_path, required=repo_required) if with_code else (None, ())
    )
    return Snapshot(
        name=name or found.name,
        taken_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        envguard_version=__version__,
        venv=found.info,
        python=found.python,
        host=host.probe(),
        torch=torch_build,
        torch_family=tuple(builds[n] for n in sorted(builds)),
        cuda=stack,
        gpu=gpus,
        # torch-family versions as their version.py says: METADATA's 2.11.0 hides the +cu130.
        key_libraries={
            **distributions.key_libraries(dists),
            **{b.name: b.version for b in (torch_build, *builds.values()) if b},
        },
        caches=cache_list,
        code=code_state,
        environ=environ.capture(env),
        warnings=(*warnings, *cuda_warnings, *cache_warnings, *code_warnings),
        packages=dists,
    )


def _caches(
    env: Mapping[str, str],
    extra: Iterable[Path],
    defaults: bool,
    compat: CacheCompat,
    step: Progress,
) -> tuple[tuple[CompileCache, ...], tuple[str, ...]]:
    wanted: list[tuple[str, Path]] = []
    if defaults:
        wanted.extend(caches.default_paths(env).items())
    seen = {p.absolute() for _, p in wanted}
    for path in extra:
        if path.absolute() not in seen:
            seen.add(path.absolute())
            wanted.append(("custom", path))
    out: list[CompileCache] = []
    warnings: list[str] = []
    for kind, path in wanted:

        def bar(done: int, total: int, label: str = f"{kind} cache") -> None:
            step(label, done, total)

        cache, warns = caches.probe(kind, path, compat, progress=bar)
        out.append(cache)
        warnings.extend(warns)
    return tuple(out), tuple(warnings)
