"""Take a snapshot: call each probe once and assemble a :class:`Snapshot`.

:func:`live_for` is the one way to take the live snapshot that a lock is compared with, so
that ``diff``, ``guard``, ``run``, ``preflight`` and ``fleet`` cannot disagree about it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from envguard import __version__, catalog, checks
from envguard.errors import VenvError
from envguard.model import CompileCache, GpuState, Snapshot
from envguard.probes import caches, code, cuda, distributions, environ, gpu, host, torch, venv

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
    base_commit: str | None = None,
    own_files: Iterable[Path] = (),
) -> Snapshot:
    """Read ``venv_path`` (and the repo, caches, host) without importing anything from it.

    ``base_commit``: the lock's commit, to record what changed in the repo since;
    ``own_files``: files of envguard's whatever their name (the lockfile compared with).
    """
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
    inherited, where = distributions.scan_inherited(found.inherited_sites, dists)
    dists, inherited = distributions.in_effect(dists, inherited, found.python)
    # what the interpreter imports: the venv's own, then what it inherits (an NGC-style
    # container's torch lives in the base interpreter's site-packages)
    seen = (*dists, *inherited)
    by_name = {d.name: d for d in seen}
    builds = {
        n: torch.probe(where.get(n, found.site_packages), by_name[n])
        for n in catalog.BUILDS
        if n in by_name
    }
    step("CUDA stack", 0, 1)
    torch_build = builds.pop(catalog.TORCH, None)
    stack, cuda_warnings = cuda.probe(
        (found.site_packages, *found.inherited_sites),
        seen,
        system_roots=system_roots,
        torch_cuda=torch_build.cuda if torch_build else None,
    )
    gpu_thread.join()
    cache_list, cache_warnings = _caches(env, cache_dirs, default_caches, step)
    step("code", 0, 1)
    code_state, code_warnings = (
        code.probe(
            repo if repo is not None else Path.cwd(),
            required=repo_required,
            base=base_commit,
            exclude=(found.root,),
            own=own_files,
        )
        if with_code
        else (None, ())
    )
    snap = Snapshot(
        name=name or found.name,
        taken_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        envguard_version=__version__,
        venv=found.info,
        python=found.python,
        host=host.probe(),
        torch=torch_build,
        torch_family=tuple(builds[n] for n in sorted(builds)),
        cuda=stack,
        gpu=gpu_state[0] if gpu_state else GpuState(source="none"),
        # torch-family versions as their version.py says: METADATA's 2.11.0 hides the +cu130.
        key_libraries={
            **distributions.key_libraries(seen),
            **{b.name: b.version for b in (torch_build, *builds.values()) if b},
        },
        caches=cache_list,
        code=code_state,
        environ=environ.capture(env),
        launcher=catalog.launcher_of(env),
        packages=dists,
        inherited=inherited,
    )
    found_warnings = (*warnings, *cuda_warnings, *cache_warnings, *code_warnings)
    return snap.with_warnings((*found_warnings, *(f.why for f in checks.findings(snap))))


def live_for(
    lock: Snapshot,
    venv_path: Path,
    *,
    repo: Path | None = None,
    lock_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    with_code: bool = True,
    with_caches: bool = True,
) -> Snapshot:
    """The live snapshot to compare with ``lock``: ``venv_path``, the lock's repository
    (``targets.repo_for``), the caches the lock fingerprinted, what changed since its commit.
    ``lock_path``, when the lock is a file, is envguard's own whatever its name."""
    from envguard import targets

    if not venv_path.exists() and not venv_path.is_symlink():
        # a fresh checkout, or a lock from another machine: nothing to compare with yet
        shown = f" {lock_path}" if lock_path else ""
        raise VenvError(
            f"{venv_path}: no venv here to compare with the lock: build it from the lock "
            f"with `envguard restore{shown}`, or pass --venv PATH"
        )
    customs = [Path(c.path) for c in lock.caches if c.kind == "custom"]
    if repo is None:
        repo = targets.repo_for(lock)
    return take(
        venv_path,
        repo=repo,
        # a lock taken outside any repository has no code to compare with
        with_code=with_code and (lock.code is not None or repo is not None),
        cache_dirs=customs if with_caches else (),
        default_caches=with_caches and any(c.kind != "custom" for c in lock.caches),
        name=lock.name,
        env=env,
        progress=progress,
        base_commit=lock.code.head if lock.code else None,
        own_files=(lock_path,) if lock_path else (),
    )


def stored_against(lock: Snapshot, snap: Snapshot) -> Snapshot:
    """A stored snapshot (a fleet node's file, the second of two lockfiles) as the live one
    would be taken against ``lock``: with what changed in the repository between the two
    commits, read from the repository when it is here (else the commits alone are known)."""
    import dataclasses

    from envguard import targets

    a, b = lock.code, snap.code
    if a is None or b is None or a.head == b.head or b.since is not None:
        return snap
    roots = [r for r in (targets.repo_for(lock), Path(b.root), Path(a.root)) if r is not None]
    for root in roots:
        if root.is_dir():
            moved = code.since(root, a.head, b.head)
            if moved is not None:
                return dataclasses.replace(snap, code=dataclasses.replace(b, since=moved))
    return snap


def _caches(
    env: Mapping[str, str], extra: Iterable[Path], defaults: bool, step: Progress
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

        cache, warns = caches.probe(kind, path, progress=bar)
        out.append(cache)
        warnings.extend(warns)
    return tuple(out), tuple(warnings)
