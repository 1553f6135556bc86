"""Compare two snapshots: a pure function from (old, new) to a :class:`DriftReport`.

Every change is classed (critical / warning / info) and says in one line why it matters for
training. No I/O here: the CLI decides where the two snapshots come from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envguard import attribution, grouping
from envguard._units import human_bytes
from envguard.model import (
    CodeState,
    CompileCache,
    CudaLibrary,
    Distribution,
    PackageBuild,
    Record,
    Snapshot,
)  # fmt: skip

SEVERITIES = ("critical", "warning", "info")
FAIL_ON = ("critical", "warning", "any")
_AREAS = (
    "python",
    "torch",
    "cuda",
    "gpu",
    "code",
    "caches",
    "libraries",
    "packages",
    "env",
    "host",
)
LIBRARY_WHY = {
    "transformers": "model code, attention defaults and tokenizer behaviour can change",
    "triton": "every Triton kernel in the compile caches is rebuilt",
    "torchvision": "a C++ extension built for one torch build",
    "torchaudio": "a C++ extension built for one torch build",
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


@dataclass(frozen=True, kw_only=True)
class Change(Record):
    severity: str
    area: str
    subject: str
    old: str = ""
    new: str = ""
    why: str
    members: tuple[str, ...] = ()  # drill-down: the packages of a group
    patch: str = ""  # the new side's patch for a code file, for --show-patch
    cause: str = ""  # who or what changed it: a journal record, or the install group


@dataclass(frozen=True, kw_only=True)
class DriftReport(Record):
    old: str  # "name (taken_at)" labels of the two sides
    new: str
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()  # the new side's snapshot warnings

    def counts(self) -> dict[str, int]:
        return {s: sum(c.severity == s for c in self.changes) for s in SEVERITIES}

    def fails(self, fail_on: str) -> bool:
        """Whether this report is drift at the ``fail_on`` threshold (exit 1)."""
        if fail_on == "any":
            return bool(self.changes)
        allowed = SEVERITIES[: SEVERITIES.index(fail_on) + 1]
        return any(c.severity in allowed for c in self.changes)


def compare(
    old: Snapshot, new: Snapshot, journal: Sequence[attribution.JournalEntry] = ()
) -> DriftReport:
    """``journal``: ``envguard run`` records, which win over inferred causes."""
    covered = {
        "torch",
        *(b.name for b in old.torch_family),
        *(b.name for b in new.torch_family),
        *old.key_libraries,
        *new.key_libraries,
    }
    changes = [
        *_python(old, new), *_torch(old.torch, new.torch), *_family(old, new),
        *_libraries(old, new), *_cuda(old, new), *_gpu(old, new), *_code(old.code, new.code),
        *_caches(old, new), *_packages(old, new, covered), *_environ(old, new), *_host(old, new),
    ]  # fmt: skip
    changes.sort(key=lambda c: (SEVERITIES.index(c.severity), _AREAS.index(c.area)))
    causes = attribution.causes(old, new, journal)
    # a CUDA library's cause is its wheel's: "nvidia-cudnn-cu13 9.19.0.56: installed with …"
    for label, lib in (
        ("CUDA runtime", new.cuda.runtime),
        ("cuDNN", new.cuda.cudnn),
        ("NCCL", new.cuda.nccl),
    ):
        if lib and lib.wheel and lib.wheel in causes:
            version = next((d.version for d in new.packages if d.name == lib.wheel), "")
            causes[label] = f"{lib.wheel} {version}: {causes[lib.wheel]}"
    changes = [_attributed(c, causes) for c in changes]
    return DriftReport(
        old=f"{old.name} ({old.taken_at})",
        new=f"{new.name} ({new.taken_at})",
        changes=tuple(changes),
        notes=new.warnings,
    )


def _attributed(change: Change, causes: dict[str, str]) -> Change:
    if change.area not in ("torch", "libraries", "packages", "cuda"):
        return change
    if change.members:
        names = [m.split(" ")[1] for m in change.members]
        members = tuple(
            f"{m} ({causes[n]})" if n in causes else m
            for m, n in zip(change.members, names, strict=True)
        )
        return dataclasses.replace(change, members=members)
    cause = causes.get(change.subject)
    return dataclasses.replace(change, cause=cause) if cause else change


def _python(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.python, new.python
    if (a.implementation, a.abi, a.version) == (b.implementation, b.abi, b.version):
        return
    same_abi = (a.implementation, a.abi) == (b.implementation, b.abi)
    why = (
        "a patch release of the same ABI: extensions still load, but the interpreter changed"
        if same_abi and _minor(a.version) == _minor(b.version)
        else "another interpreter ABI: every compiled extension, torch included, is another build"
    )
    yield Change(
        severity="critical",
        area="python",
        subject="Python",
        old=f"{a.implementation} {a.version}",
        new=f"{b.implementation} {b.version}",
        why=why,
    )


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _cuda_of(build: PackageBuild) -> str:
    if build.cuda:
        return f"CUDA build {build.cuda}"
    if build.hip or build.rocm:
        return f"ROCm build {build.hip or build.rocm}"
    return f"{build.variant or 'unknown'} build"


def _torch(a: PackageBuild | None, b: PackageBuild | None) -> Iterator[Change]:
    if a is None and b is None:
        return
    if a is None or b is None:
        yield Change(
            severity="critical",
            area="torch",
            subject="torch",
            old=a.version if a else "absent",
            new=b.version if b else "absent",
            why="torch was "
            + ("removed" if b is None else "installed")
            + ": training does not run as it did",
        )
        return
    if (a.version, a.git_version, a.debug) == (b.version, b.git_version, b.debug):
        if a.index_url != b.index_url:
            yield Change(
                severity="info",
                area="torch",
                subject="torch",
                old=a.index_url,
                new=b.index_url,
                why="the same build, from another index",
            )
        return
    yield Change(
        severity="critical",
        area="torch",
        subject="torch",
        old=a.version,
        new=b.version,
        why=_torch_why(a, b),
    )


def _torch_why(a: PackageBuild, b: PackageBuild) -> str:
    git_a, git_b = (a.git_version or "")[:7], (b.git_version or "")[:7]
    if git_a and git_a == git_b:
        source = f"same source (git {git_a})"
    elif git_a and git_b:
        source = f"other source (git {git_a} → {git_b})"
    else:
        source = "another release"
    build_a, build_b = _cuda_of(a), _cuda_of(b)
    build = f"{build_a} → {build_b.split(' build ')[-1]}" if build_a != build_b else build_a
    if a.debug != b.debug:
        build += f"; debug {a.debug} → {b.debug}"
    return f"{source}, {build}; compiled kernels in the Inductor cache will not be reused"


def _family(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a = {b.name: b for b in old.torch_family}
    b = {b.name: b for b in new.torch_family}
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x and y and x.version == y.version:
            continue
        why = LIBRARY_WHY.get(name, "a torch-family package")
        if x and y and x.variant != y.variant:
            why = f"{x.variant or '?'} → {y.variant or '?'} build; {why}"
        yield Change(
            severity="warning",
            area="libraries",
            subject=name,
            old=x.version if x else "absent",
            new=y.version if y else "absent",
            why=why,
        )


def _libraries(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    family = {b.name for b in (*old.torch_family, *new.torch_family)} | {"torch"}
    a, b = old.key_libraries, new.key_libraries
    for name in sorted((set(a) | set(b)) - family):
        if a.get(name) != b.get(name):
            yield Change(
                severity="warning",
                area="libraries",
                subject=name,
                old=a.get(name, "absent"),
                new=b.get(name, "absent"),
                why=LIBRARY_WHY.get(name, "a key ML library"),
            )


_CUDA_LABELS = {"runtime": "CUDA runtime", "cudnn": "cuDNN", "nccl": "NCCL"}
_CUDA_WHY = {
    "runtime": "kernels, cuBLAS heuristics and the driver it needs all follow the runtime",
    "cudnn": "convolution and attention kernels and their numerics",
    "nccl": "collective algorithms; a mismatch across nodes can hang the job",
}


def _cuda(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    for part, label in _CUDA_LABELS.items():
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
            why=_CUDA_WHY[part],
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


def _gpu(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.gpu, new.gpu
    if a.driver != b.driver:
        yield Change(
            severity="warning",
            area="gpu",
            subject="NVIDIA driver",
            old=a.driver or "absent",
            new=b.driver or "absent",
            why="the newest CUDA runtime it supports and its kernel behaviour",
        )
    models_a, models_b = _gpu_models(a.gpus), _gpu_models(b.gpus)
    if models_a != models_b:
        yield Change(
            severity="warning",
            area="gpu",
            subject="GPUs",
            old=models_a or "none",
            new=models_b or "none",
            why="kernels and autotuning were chosen for the old GPUs",
        )
    elif sorted(g.uuid for g in a.gpus) != sorted(g.uuid for g in b.gpus):
        yield Change(
            severity="info",
            area="gpu",
            subject="GPUs",
            old=models_a,
            new=models_b,
            why="the same model, other physical GPUs (another node?)",
        )


def _gpu_models(gpus: tuple[object, ...]) -> str:
    names: dict[str, int] = {}
    for g in gpus:
        label = f"{g.name} (sm {g.compute_capability})"  # type: ignore[attr-defined]
        names[label] = names.get(label, 0) + 1
    return ", ".join(f"{n}× {label}" for label, n in sorted(names.items()))


def _code(a: CodeState | None, b: CodeState | None) -> Iterator[Change]:
    if a is None or b is None:
        if a is not b:
            yield Change(
                severity="info",
                area="code",
                subject="repository",
                old=a.root if a else "not captured",
                new=b.root if b else "not captured",
                why="code state can only be compared when both sides captured it",
            )
        return
    if a.head != b.head:
        branch = f" on {b.branch}" if b.branch else " (detached)"
        yield Change(
            severity="critical",
            area="code",
            subject="git HEAD",
            old=a.head[:12],
            new=b.head[:12] + branch,
            why="the committed training code is not the snapshot's",
        )
    elif a.branch != b.branch:
        yield Change(
            severity="info",
            area="code",
            subject="git branch",
            old=a.branch or "-",
            new=b.branch or "-",
            why="same commit, another branch name",
        )
    yield from _patch(a, b)
    yield from _untracked(a, b)


def _stat(f: object) -> str:
    added, removed = f.added, f.removed  # type: ignore[attr-defined]
    return "binary" if added < 0 else f"+{added} −{removed}"


def _patch(a: CodeState, b: CodeState) -> Iterator[Change]:
    if a.patch_sha256 == b.patch_sha256:
        return
    old_files = {f.path: f for f in a.changed}
    new_files = {f.path: f for f in b.changed}
    sections = b.file_patches()
    reported = False
    for path in sorted(set(old_files) | set(new_files)):
        x, y = old_files.get(path), new_files.get(path)
        if x and y and x.sha256 == y.sha256:
            continue
        reported = True
        if y is None:
            why = f"{path}: the snapshot's uncommitted change ({_stat(x)}) is gone"
        elif x is None:
            why = f"{path} has an uncommitted change not in the snapshot ({_stat(y)})"
        else:
            why = f"{path}: uncommitted change differs ({_stat(x)} then, {_stat(y)} now)"
        yield Change(
            severity="critical",
            area="code",
            subject=path,
            old=_stat(x) if x else "clean",
            new=_stat(y) if y else "clean",
            why=why,
            patch=sections.get(path, ""),
        )
    if not reported:
        yield Change(
            severity="critical",
            area="code",
            subject="uncommitted patch",
            old=a.patch_sha256[:12] or "clean",
            new=b.patch_sha256[:12] or "clean",
            why="the dirty diff differs from the snapshot's",
        )


def _untracked(a: CodeState, b: CodeState) -> Iterator[Change]:
    x = {f.path: f for f in a.untracked}
    y = {f.path: f for f in b.untracked}
    for path in sorted(set(x) | set(y)):
        fx, fy = x.get(path), y.get(path)
        if fx and fy and (fx.size, fx.content) == (fy.size, fy.content):
            continue
        state = "new" if fx is None else "gone" if fy is None else "changed"
        yield Change(
            severity="info",
            area="code",
            subject=path,
            old=f"{fx.size} B" if fx else "absent",
            new=f"{fy.size} B" if fy else "absent",
            why=f"untracked file {state}; git does not version it",
        )


def _caches(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    b_by_key = {_cache_key(c): c for c in new.caches}
    for a in old.caches:
        b = b_by_key.get(_cache_key(a))
        if b is not None:
            yield from _cache(a, b)


def _cache_key(c: CompileCache) -> str:
    return c.kind if c.kind != "custom" else f"custom:{c.path}"


def _label(c: CompileCache) -> str:
    names = {"inductor": "Inductor cache", "triton": "Triton cache"}
    return names.get(c.kind, f"cache {c.path}")


def _size(c: CompileCache) -> str:
    return f"{c.entries} entries / {human_bytes(c.bytes)}" if c.exists else "absent"


def _cache(a: CompileCache, b: CompileCache) -> Iterator[Change]:
    label = _label(a)
    if a.path != b.path:
        yield Change(
            severity="warning",
            area="caches",
            subject=label,
            old=a.path,
            new=b.path,
            why="the cache folder moved; entries under the old path are not used",
        )
    if a.exists and a.entries > 0 and (not b.exists or b.entries == 0):
        state = "0" if b.exists else "gone"
        yield Change(
            severity="warning",
            area="caches",
            subject=label,
            old=_size(a),
            new=state,
            why=f"{label} {_size(a)} → {state}: cold, the first steps will recompile",
        )
        return
    if b.entries and (b.entries < a.entries or b.bytes < a.bytes * 0.9):
        yield Change(
            severity="warning",
            area="caches",
            subject=label,
            old=_size(a),
            new=_size(b),
            why="shrunk: the graphs whose entries went will recompile",
        )
    elif a.fingerprint != b.fingerprint and b.exists:
        grew = "grew" if b.entries > a.entries else "contents changed"
        yield Change(
            severity="info",
            area="caches",
            subject=label,
            old=_size(a),
            new=_size(b),
            why=f"{grew}: graphs compiled since the snapshot",
        )
    if b.entries and a.entries:
        yield from _compat(label, a, b)


def _compat_text(value: str | tuple[str, ...] | None) -> str:
    text = ", ".join(value) if isinstance(value, tuple) else value
    return text or "none"


def _compat(label: str, a: CompileCache, b: CompileCache) -> Iterator[Change]:
    diffs = []
    for field, name in (
        ("torch", "torch"),
        ("torch_git", "torch git"),
        ("cuda", "CUDA"),
        ("triton", "triton"),
        ("gpus", "GPUs"),
    ):
        x, y = _compat_text(getattr(a.compat, field)), _compat_text(getattr(b.compat, field))
        if x != y:
            diffs.append(f"{name} {x} → {y}")
    if diffs:
        yield Change(
            severity="warning",
            area="caches",
            subject=label,
            old="built for the snapshot's stack",
            new="; ".join(diffs),
            why="built for another torch/CUDA/GPU: its entries will not be reused",
        )


def _packages(old: Snapshot, new: Snapshot, covered: set[str]) -> Iterator[Change]:
    """Added and changed packages, grouped by install; ``covered`` ones (torch, key libraries)
    have rows of their own but still count in, and can root, the group they arrived with."""
    a = {d.name: d for d in old.packages}
    b = {d.name: d for d in new.packages}
    added = [b[n] for n in sorted(set(b) - set(a))]
    changed = [(a[n], b[n]) for n in sorted(set(a) & set(b)) if a[n].version != b[n].version]
    removed = [a[n] for n in sorted(set(a) - set(b)) if n not in covered]
    was, now = old.versions(), new.versions()
    before = {y.name: was[x.name] for x, y in changed}
    for group in grouping.install_groups(added, [y for _, y in changed]):
        if len(group.members) > 1 or group.members[0].name not in covered:
            yield _group_change(group, before, now)
    if removed:
        yield _removed_change(removed)


def _group_change(
    group: grouping.InstallGroup, before: dict[str, str], real: dict[str, str]
) -> Change:
    """``real`` holds torch-family versions as their version.py says (2.11.0+cu130)."""
    members = tuple(
        f"~ {d.name} {before[d.name]} → {real.get(d.name, d.version)}"
        if d.name in before
        else f"+ {d.name} {real.get(d.name, d.version)}"
        for d in group.members
    )
    n_added = sum(m.startswith("+") for m in members)
    n_changed = len(members) - n_added
    if len(members) == 1:
        d = group.members[0]
        if n_changed:
            return Change(
                severity="warning",
                area="packages",
                subject=d.name,
                old=before[d.name],
                new=d.version,
                why=f"{_bump(before[d.name], d.version)} of a package on the import path",
            )
        return Change(
            severity="warning",
            area="packages",
            subject=d.name,
            old="absent",
            new=d.version,
            why="new package on the import path",
        )
    parts = [
        f"{n_added} packages added" if n_added else "",
        f"{n_changed} changed" if n_changed else "",
    ]
    text = " and ".join(p for p in parts if p)
    root = f", with {group.root.name} {group.root.version}" if group.root else ""
    when = f" at {group.installed_at}" if group.installed_at else ""
    return Change(
        severity="warning",
        area="packages",
        subject=f"{len(members)} packages",
        old="",
        new=f"{len(members)} packages",
        members=members,
        why=f"{text} together{root}{when}",
    )


def _removed_change(removed: list[Distribution]) -> Change:
    members = tuple(f"- {d.name} {d.version}" for d in removed)
    if len(removed) == 1:
        d = removed[0]
        return Change(
            severity="warning",
            area="packages",
            subject=d.name,
            old=d.version,
            new="absent",
            why="removed: code that imports it fails",
        )
    return Change(
        severity="warning",
        area="packages",
        subject=f"{len(removed)} packages",
        old=f"{len(removed)} packages",
        new="absent",
        members=members,
        why=f"{len(removed)} packages removed: code that imports them fails",
    )


def _bump(old: str, new: str) -> str:
    try:
        return "upgrade" if Version(new) > Version(old) else "downgrade"
    except InvalidVersion:
        return "version change"


_ENV_WHY = (
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


def _environ(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.environ, new.environ
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        why = next((w for prefix, w in _ENV_WHY if name.startswith(prefix)), "")
        installer = name.startswith(("UV_", "PIP_")) or name in ("VIRTUAL_ENV", "CONDA_PREFIX")
        yield Change(
            severity="info" if installer or not why else "warning",
            area="env",
            subject=name,
            old=a.get(name, "unset"),
            new=b.get(name, "unset"),
            why=why or "installer or shell setting; does not change a running job",
        )


def _host(old: Snapshot, new: Snapshot) -> Iterator[Change]:
    a, b = old.host.to_dict(), new.host.to_dict()
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            yield Change(
                severity="info",
                area="host",
                subject=key.replace("_", " "),
                old=str(a.get(key, "")),
                new=str(b.get(key, "")),
                why="host facts; compare when the same job runs differently on nodes",
            )
