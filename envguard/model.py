"""The snapshot's data model: frozen, keyword-only dataclasses that serialise themselves.

``to_dict`` gives plain TOML/JSON-able data (``None`` fields are left out, since TOML has no
null); ``from_dict`` rebuilds and validates it, and every error names the field's path, e.g.
``packages[3].version: expected a string, got 12``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, Union

from envguard.errors import LockfileError

R = TypeVar("R", bound="Record")


class Record:
    """Mixin: dict round-trip for frozen dataclasses, driven by their type hints."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type,unused-ignore]
            value = _encode(getattr(self, f.name))
            # TOML has no null, and an empty table or list with a default says nothing.
            has_default = f.default is not dataclasses.MISSING or (
                f.default_factory is not dataclasses.MISSING
            )
            if value is None or (has_default and value in ([], {})):
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls: type[R], data: Any, path: str = "") -> R:
        return typing.cast(R, _decode(cls, data, path or cls.__name__))

    def validate(self, path: str) -> None:
        """Checks beyond types; subclasses override and raise LockfileError."""


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _fail(path: str, expected: str, got: Any) -> LockfileError:
    shown = repr(got) if len(repr(got)) <= 40 else type(got).__name__
    return LockfileError(f"{path}: expected {expected}, got {shown}")


_SCALARS: dict[type, str] = {str: "a string", bool: "true or false", int: "an integer"}


def _decode(tp: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if data is None else _decode(args[0], data, path)
    if origin is tuple:
        if not isinstance(data, list):
            raise _fail(path, "a list", data)
        (item,) = typing.get_args(tp)[:1]
        return tuple(_decode(item, v, f"{path}[{i}]") for i, v in enumerate(data))
    if origin is dict:
        if not isinstance(data, dict):
            raise _fail(path, "a table", data)
        _, vt = typing.get_args(tp)
        return {str(k): _decode(vt, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, Record):
        return _decode_record(tp, data, path)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _fail(path, "a number", data)
        return float(data)
    if tp in _SCALARS:
        # bool is an int in Python; a lockfile saying `files = true` is still wrong.
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise _fail(path, _SCALARS[tp], data)
        return data
    raise TypeError(f"model type {tp!r} at {path} is not supported")  # a bug, not bad input


_SCHEMAS: dict[type, tuple[dict[str, Any], dict[str, bool]]] = {}


def _schema(cls: type[Record]) -> tuple[dict[str, Any], dict[str, bool]]:
    """Per class, once: each field's type, and whether the field is required."""
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    hints = typing.get_type_hints(cls)  # each class's own module globals, MRO included
    required = {
        f.name: f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in dataclasses.fields(cls)  # type: ignore[arg-type,unused-ignore]
    }
    _SCHEMAS[cls] = (hints, required)
    return hints, required


def _decode_record(cls: type[Record], data: Any, path: str) -> Record:
    if not isinstance(data, dict):
        raise _fail(path, "a table", data)
    hints, required = _schema(cls)
    unknown = sorted(set(data) - set(required))
    if unknown:
        raise LockfileError(f"{path}.{unknown[0]}: unknown field")
    kwargs: dict[str, Any] = {}
    for name, needed in required.items():
        if name in data:
            kwargs[name] = _decode(hints[name], data[name], f"{path}.{name}")
        elif needed:
            raise LockfileError(f"{path}.{name}: missing")
    record = cls(**kwargs)
    record.validate(path)
    return record


# ---------------------------------------------------------------------------------------------
# The snapshot's parts, in the order they appear in a lockfile.


@dataclass(frozen=True, kw_only=True)
class PythonInfo(Record):
    version: str
    implementation: str
    abi: str
    site_packages: str
    home: str | None = None


@dataclass(frozen=True, kw_only=True)
class VenvInfo(Record):
    path: str
    kind: str  # "venv" (pyvenv.cfg) or "conda" (conda-meta/)
    creator: str | None = None  # "uv 0.11.15", "venv", "virtualenv 20.26.0"
    prompt: str | None = None


@dataclass(frozen=True, kw_only=True)
class Distribution(Record):
    name: str  # canonical (PEP 503)
    version: str
    installer: str = ""
    requested: bool = False
    editable: bool = False
    format: str = "dist-info"  # or "egg-info"
    installed_at: str = ""  # ISO 8601 UTC, from the metadata folder's mtime
    direct_url: str | None = None  # credentials stripped
    requires: tuple[str, ...] = ()  # Requires-Dist without extras, as written
    problem: str | None = None  # set when the metadata was incomplete


@dataclass(frozen=True, kw_only=True)
class PackageBuild(Record):
    """What a torch-family package really is: the version its own ``version.py`` declares."""

    name: str
    version: str  # the full version, local label included (2.11.0+cu130)
    metadata_version: str  # what METADATA says (2.11.0 for PyPI wheels)
    variant: str  # cu130, cpu, rocm6.4, xpu, or "" when nothing tells
    index_url: str  # where that exact build comes from
    source: str  # "version.py" or "METADATA"
    git_version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    rocm: str | None = None
    xpu: str | None = None
    debug: bool | None = None


@dataclass(frozen=True, kw_only=True)
class CudaLibrary(Record):
    name: str  # "cudart", "cudnn", "nccl"
    version: str
    source: str  # where it was read: a header path relative to site-packages, or a system path
    wheel: str | None = None  # the distribution that ships it


@dataclass(frozen=True, kw_only=True)
class CudaStack(Record):
    """The CUDA libraries torch loads (from the nvidia wheels) and what the system has."""

    runtime: CudaLibrary | None = None
    cudnn: CudaLibrary | None = None
    nccl: CudaLibrary | None = None
    wheels: dict[str, str] = field(default_factory=dict)  # every nvidia-* distribution
    system: tuple[CudaLibrary, ...] = ()  # what the OS has outside the venv


@dataclass(frozen=True, kw_only=True)
class GpuInfo(Record):
    index: int
    name: str
    uuid: str = ""
    compute_capability: str = ""
    memory_mib: int = 0


@dataclass(frozen=True, kw_only=True)
class GpuState(Record):
    driver: str | None = None
    source: str = "none"  # "nvml", "nvidia-smi" or "none"
    gpus: tuple[GpuInfo, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CacheCompat(Record):
    """The facts a compile cache's entries depend on; another value means they will miss."""

    torch: str | None = None
    torch_git: str | None = None
    triton: str | None = None
    cuda: str | None = None
    gpus: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()  # the GPU targets of the cache's own kernels (sm_90, ...)


@dataclass(frozen=True, kw_only=True)
class CompileCache(Record):
    kind: str  # "inductor", "triton" or "custom"
    path: str
    exists: bool
    files: int = 0
    bytes: int = 0
    entries: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    fingerprint: str = ""
    unreadable: int = 0
    compat: CacheCompat = field(default_factory=CacheCompat)


@dataclass(frozen=True, kw_only=True)
class ChangedFile(Record):
    path: str
    added: int  # -1 for a binary file
    removed: int
    sha256: str  # of this file's part of the patch


@dataclass(frozen=True, kw_only=True)
class UntrackedFile(Record):
    path: str
    size: int
    content: str | None = None  # small text files only, secrets redacted


@dataclass(frozen=True, kw_only=True)
class CodeState(Record):
    root: str
    head: str  # "" in a repository without commits
    branch: str | None = None  # None when detached
    remote: str | None = None  # credentials stripped
    dirty: bool = False
    patch_sha256: str = ""
    patch: str = ""  # `git diff HEAD --binary`, byte-exact when patch_encoding is "utf-8"
    patch_encoding: str = "utf-8"  # or "base64" when the patch is not valid UTF-8
    changed: tuple[ChangedFile, ...] = ()
    untracked: tuple[UntrackedFile, ...] = ()
    untracked_omitted: int = 0

    def validate(self, path: str) -> None:
        if self.patch_encoding not in ("utf-8", "base64"):
            raise LockfileError(f"{path}.patch_encoding: expected 'utf-8' or 'base64'")

    def file_patches(self) -> dict[str, str]:
        """Each changed file's part of the patch (``git diff`` orders both the same way)."""
        if self.patch_encoding != "utf-8" or not self.patch:
            return {}
        parts = self.patch.split("\ndiff --git ")
        sections = [parts[0], *("diff --git " + p for p in parts[1:])]
        return {f.path: s for f, s in zip(self.changed, sections, strict=False)}

    def patch_bytes(self) -> bytes:
        import base64

        if self.patch_encoding == "base64":
            return base64.b64decode(self.patch)
        return self.patch.encode("utf-8")


@dataclass(frozen=True, kw_only=True)
class HostInfo(Record):
    hostname: str
    os: str
    kernel: str
    machine: str
    glibc: str | None = None
    cpu_model: str | None = None
    cpu_count: int = 0
    memory_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class Snapshot(Record):
    name: str
    taken_at: str
    envguard_version: str
    venv: VenvInfo
    python: PythonInfo
    host: HostInfo
    torch: PackageBuild | None = None
    torch_family: tuple[PackageBuild, ...] = ()  # torchvision, torchaudio, triton
    cuda: CudaStack = field(default_factory=CudaStack)
    gpu: GpuState = field(default_factory=GpuState)
    key_libraries: dict[str, str] = field(default_factory=dict)
    caches: tuple[CompileCache, ...] = ()
    code: CodeState | None = None
    environ: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    packages: tuple[Distribution, ...] = ()

    def versions(self) -> dict[str, str]:
        """Every distribution's version; torch-family ones as their ``version.py`` says
        (2.11.0+cu130), since PyPI's METADATA (2.11.0) hides the build."""
        real = {b.name: b.version for b in (self.torch, *self.torch_family) if b}
        return {d.name: real.get(d.name, d.version) for d in self.packages}

    def package(self, name: str) -> Distribution | None:
        for dist in self.packages:
            if dist.name == name:
                return dist
        return None
