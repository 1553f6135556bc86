"""The snapshot's data model: frozen, keyword-only dataclasses that serialise themselves.

``to_dict`` gives plain TOML/JSON-able data (``None`` fields are left out, since TOML has no
null); ``from_dict`` rebuilds and validates it, and every error names the field's path, e.g.
``packages[3].version: expected a string, got 12``.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, Union

from envguard import catalog
from envguard.errors import LockfileError

R = TypeVar("R", bound="Record")


class Record:
    """Mixin: dict round-trip for frozen dataclasses, driven by their type hints."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, has_default in _layout(type(self)):
            value = _encode(getattr(self, name))
            # TOML has no null, and an empty table or list with a default says nothing.
            if value is None or (has_default and value in ([], {})):
                continue
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: type[R], data: Any, path: str = "") -> R:
        return typing.cast(R, _decode(cls, data, path or cls.__name__))

    def validate(self, path: str) -> None:
        """Checks beyond types; subclasses override and raise LockfileError."""


_LAYOUTS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, bool], ...]:
    """Per class, once: each field's name and whether it has a default (a lockfile writes
    hundreds of records of a handful of classes)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = tuple(
            (
                f.name,
                f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return layout


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


# What may reach uv's argv or a requirements file from a lockfile: checked when a lock is
# read, so that a field cannot smuggle an option ("1.0\n--find-links /evil") into uv (#23).
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$")
_PY_VERSION = re.compile(r"^\d{1,3}(\.\d{1,4}){1,3}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^\s\x00-\x1f\x7f]{1,4096}$")
# C0 and C1 controls, DEL and Unicode's line separators: any of them can end a line of uv's
# requirements file, cut an argv (NUL), or rewrite the terminal (ESC).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # a commit: SHA-1 or SHA-256 git


def _pep440(value: str, path: str) -> None:
    from envguard.versions import valid

    # packaging reads "2.3.0\n" as 2.3.0: a version is its plain form or nothing
    if _CONTROL.search(value) or value != value.strip() or not valid(value):
        raise LockfileError(f"{path}: {_shown(value)} is not a PEP 440 version")


def _url(value: str, path: str) -> None:
    """A URL whose every decoding is one line: plan.py turns an editable ``file://`` URL into
    a path with url2pathname, which decodes ``%0A`` into a line break of uv's requirements
    file (``-e /x\n--find-links=/evil``). A ``file:`` URL names an absolute path, never the
    working directory (``file://host`` has none, and became ``-e .``)."""
    from urllib.parse import unquote, urlsplit

    if not _URL.match(value):
        raise LockfileError(f"{path}: {_shown(value)} is not a URL")
    if _CONTROL.search(unquote(value)):
        raise LockfileError(
            f"{path}: {_shown(value)} hides a control character (percent-encoded, as %0A)"
        )
    if value.lower().startswith("file:") and not unquote(urlsplit(value).path).startswith("/"):
        raise LockfileError(f"{path}: {_shown(value)} is not a file URL of an absolute path")


def _abs_path(value: str, path: str) -> None:
    """A folder restore writes, runs in or hands to uv: absolute, so that nothing reads it
    as an option or against the working directory, and free of control characters."""
    if not value.startswith("/"):
        raise LockfileError(f"{path}: {_shown(value)} is not an absolute path")
    _plain(value, path)


def _plain(value: str, path: str) -> None:
    if len(value) > 4096 or _CONTROL.search(value):
        raise LockfileError(f"{path}: {_shown(value)} is not one line of plain text")


def _repo_path(value: str, path: str) -> None:
    """A file of the repository as git names it: relative, inside it, no NUL (git has none)."""
    parts = value.split("/")
    if not value or value.startswith("/") or ".." in parts or "\x00" in value:
        raise LockfileError(f"{path}: {_shown(value)} is not a path inside the repository")


def _commit(value: str, path: str) -> None:
    if value and not _SHA.match(value):
        raise LockfileError(f"{path}: {_shown(value)} is not a commit (40 or 64 hex digits)")


# git check-ref-format's rules, enough that a branch is never an option, nor two arguments
_REF_BAD = re.compile(r"[\x00-\x20\x7f-\x9f~^:?*\[\\]|\.\.|@\{")


def _branch(value: str | None, path: str) -> None:
    if value is None:
        return
    parts = value.split("/")
    if (
        len(value) > 255
        or value.startswith("-")
        or _REF_BAD.search(value)
        or any(not p or p.startswith(".") or p.endswith((".", ".lock")) for p in parts)
    ):
        raise LockfileError(f"{path}: {_shown(value)} is not a git branch name")


def _pep508_name(value: str, path: str) -> None:
    if not _NAME.match(value):
        raise LockfileError(f"{path}: {_shown(value)} is not a package name (PEP 508)")


def _one_line(value: str, path: str, limit: int = 4096) -> None:
    if len(value) > limit or any(c in value for c in "\n\r\x00"):
        raise LockfileError(f"{path}: {_shown(value)} is not one line of text")


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 40 else f"{value[:37]!r}… ({len(value)} characters)"


@dataclass(frozen=True, kw_only=True)
class PythonInfo(Record):
    """The venv's interpreter: version, implementation and ABI, and where its packages live."""

    version: str
    implementation: str
    abi: str
    site_packages: str
    home: str | None = None

    def validate(self, path: str) -> None:
        if self.version and not _PY_VERSION.match(self.version):
            raise LockfileError(f"{path}.version: {_shown(self.version)} is not a Python version")
        if self.home:  # a record of the snapshot's machine: nothing runs it (#23)
            _abs_path(self.home, f"{path}.home")


# uv writes the prompt into bin/activate and reads it from its argv: no shell code, no option
_PROMPT = re.compile(r"^(?!-)[^\x00-\x1f\x7f-\x9f\"'`$\\]{1,100}$")


@dataclass(frozen=True, kw_only=True)
class VenvInfo(Record):
    """The venv itself: where it is, what kind, what made it, and whether it can start."""

    path: str
    kind: str  # "venv" (pyvenv.cfg), "conda" (conda-meta/) or "prefix" (a plain install)
    creator: str | None = None  # "uv 0.11.15", "venv", "virtualenv 20.26.0"
    prompt: str | None = None
    system_site_packages: bool = False  # pyvenv.cfg include-system-site-packages = true
    problem: str | None = None  # why the environment cannot start, when it cannot

    def validate(self, path: str) -> None:
        # the path is where restore builds, the prompt goes into bin/activate: a lockfile
        # from a pull request must not choose a relative folder or smuggle shell code
        _abs_path(self.path, f"{path}.path")
        if self.prompt is not None and not _PROMPT.match(self.prompt):
            raise LockfileError(f"{path}.prompt: {_shown(self.prompt)} is not a plain prompt")


@dataclass(frozen=True, kw_only=True)
class Distribution(Record):
    """One installed distribution as its metadata folder describes it."""

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
    duplicates: tuple[str, ...] = ()  # other metadata folders of the same name on disk

    def validate(self, path: str) -> None:
        _pep508_name(self.name, f"{path}.name")
        if not self.problem:  # restore never pins a distribution recorded with a problem
            _pep440(self.version, f"{path}.version")
        if self.direct_url is not None:
            _url(self.direct_url, f"{path}.direct_url")
        for i, req in enumerate(self.requires):
            _one_line(req, f"{path}.requires[{i}]")


@dataclass(frozen=True, kw_only=True)
class PackageBuild(Record):
    """What a torch-family package really is: the version its own ``version.py`` declares."""

    name: str
    version: str  # the full version, local label included (2.11.0+cu130)
    metadata_version: str  # what METADATA says (2.11.0 for PyPI wheels)
    variant: str  # cu130, cpu, rocm6.4, xpu, or "" when nothing tells
    # where this build came from, when its install recorded it (direct_url.json); None:
    # unknown, since pip and uv record no index (nor a --find-links folder)
    index_url: str | None = None
    source: str  # "version.py" or "METADATA"
    git_version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    rocm: str | None = None
    xpu: str | None = None
    debug: bool | None = None

    def validate(self, path: str) -> None:
        _pep508_name(self.name, f"{path}.name")
        _pep440(self.version, f"{path}.version")
        if self.variant and not _NAME.match(self.variant):
            raise LockfileError(f"{path}.variant: {_shown(self.variant)} is not a build variant")
        if self.index_url is not None:  # a source on screen, never uv's
            _plain(self.index_url, f"{path}.index_url")


@dataclass(frozen=True, kw_only=True)
class CudaLibrary(Record):
    """One CUDA library torch loads (runtime, cuDNN, NCCL): its version and origin."""

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
    """One GPU as the driver reports it."""

    index: int
    name: str
    uuid: str = ""
    compute_capability: str = ""
    memory_mib: int = 0


@dataclass(frozen=True, kw_only=True)
class GpuState(Record):
    """The driver and its GPUs, and which source answered."""

    driver: str | None = None
    source: str = "none"  # "nvml", "nvidia-smi" or "none"
    gpus: tuple[GpuInfo, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CacheCompat(Record):
    """What a compile cache's entries say they were built for, read from the entries
    themselves: Inductor's graphs carry torch's version, CUDA and git commit; Triton's
    kernel metadata carries its triton_version and arch. Empty means the cache does not say.
    A cache can hold entries of several builds, hence the tuples."""

    torch: tuple[str, ...] = ()
    torch_git: tuple[str, ...] = ()
    cuda: tuple[str, ...] = ()
    triton: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()  # GPU models the graphs were compiled on
    archs: tuple[str, ...] = ()  # the GPU targets of the cache's own kernels (sm90, ...)


@dataclass(frozen=True, kw_only=True)
class CompileCache(Record):
    """A compile cache: its files, content fingerprint, and what its entries were built for."""

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
    """A tracked file changed since HEAD: its line counts, hashes and git blob ids."""

    path: str
    added: int  # -1 for a binary file
    removed: int
    sha256: str  # of this file's part of the patch
    blob: str = ""  # git blob id of the working-tree file ("" when deleted or unknown)
    base_blob: str = ""  # git blob id of the file at HEAD ("" when new or unknown)

    def validate(self, path: str) -> None:
        _repo_path(self.path, f"{path}.path")


@dataclass(frozen=True, kw_only=True)
class MovedFile(Record):
    """A file that differs between the lock's commit and the current HEAD."""

    path: str
    old_blob: str  # "" when the file did not exist at the lock's commit
    new_blob: str  # "" when it does not exist at HEAD
    own: bool = False  # envguard's own file (a lockfile, its journal, its config)
    patch: str = ""  # `git diff <lock's commit> HEAD -- path`, for --show-patch

    def validate(self, path: str) -> None:
        _repo_path(self.path, f"{path}.path")


@dataclass(frozen=True, kw_only=True)
class HeadMove(Record):
    """What changed between the lock's commit and HEAD; taken only against a lock."""

    base: str  # the lock's commit
    found: bool  # False when that commit is not in this repository (rebased away)
    files: tuple[MovedFile, ...] = ()
    omitted: int = 0  # files past the limit, not listed

    def validate(self, path: str) -> None:
        _commit(self.base, f"{path}.base")


@dataclass(frozen=True, kw_only=True)
class UntrackedFile(Record):
    """A file git does not track, by size and blob id."""

    path: str
    size: int
    content: str | None = None  # small text files only, secrets redacted
    blob: str = ""  # git's blob id of the content, whatever the size (up to 64 MB)

    def validate(self, path: str) -> None:
        _repo_path(self.path, f"{path}.path")


@dataclass(frozen=True, kw_only=True)
class CodeState(Record):
    """The training code's repository: HEAD, branch, remote and the uncommitted patch."""

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
    since: HeadMove | None = None  # only in a live snapshot taken against a lock
    own: tuple[str, ...] = ()  # more files that are envguard's (the lock compared with)
    redacted: int = 0  # lines of the patch whose secrets were redacted: it cannot apply as is

    def validate(self, path: str) -> None:
        # restore --code runs git in root and hands it head and branch (#23)
        _abs_path(self.root, f"{path}.root")
        _commit(self.head, f"{path}.head")
        _branch(self.branch, f"{path}.branch")
        if self.patch_encoding not in ("utf-8", "base64"):
            raise LockfileError(f"{path}.patch_encoding: expected 'utf-8' or 'base64'")

    def file_patches(self) -> dict[str, str]:
        """Each changed file's part of the patch, for people (a base64 patch decoded)."""
        out = {}
        for section in self.sections():
            path = section_path(section)
            if path is not None:
                out[path] = section.decode("utf-8", "replace")
        return out

    def sections(self) -> list[bytes]:
        """The patch's per-file sections as bytes, whatever its encoding in the lockfile."""
        # latin-1 maps bytes 1:1, and "diff --git " and "\n" are single bytes in UTF-8 too.
        text = self.patch_bytes().decode("latin-1")
        return [s.encode("latin-1") for s in split_patch(text)]

    def is_own(self, path: str) -> bool:
        """envguard's own file, by name or because this snapshot was compared with it."""
        return path in self.own or catalog.is_own_file(path)

    def patch_bytes(self) -> bytes:
        import base64

        if self.patch_encoding == "base64":
            return base64.b64decode(self.patch)
        return self.patch.encode("utf-8")


def split_patch(patch: str) -> list[str]:
    """A ``git diff`` cut into its per-file sections, each byte for byte as git wrote it
    (its trailing newline included), so that a file's section never depends on its neighbours.

    A section starts at a line beginning ``diff --git ``; no content line can (hunk lines start
    with a space, ``+`` or ``-``; binary patches are base85, which has no space).
    """
    starts = [m.start() for m in _SECTION.finditer(patch)]
    if not starts:
        return [patch] if patch else []
    if starts[0] != 0:
        starts.insert(0, 0)
    return [patch[a:b] for a, b in zip(starts, [*starts[1:], len(patch)], strict=True)]


_SECTION = re.compile(r"^diff --git ", re.MULTILINE)
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.MULTILINE)


def section_path(section: bytes) -> str | None:
    """The file a section of ``git diff --no-renames`` is about, from its header line
    (``diff --git a/P b/P``: both sides are one path; git quotes unusual names)."""
    line = section.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
    rest = line.removeprefix("diff --git ")
    if rest == line:
        return None
    if rest.startswith('"'):
        return _unquote(rest)
    n = (len(rest) - 5) // 2
    return rest[2 : 2 + n] if rest[:2] == "a/" and rest[n + 2 : n + 5] == " b/" else None


def _unquote(rest: str) -> str | None:
    """git's C-style quoting of ``"a/path"``, the first of the two."""
    import ast

    end, i = None, 1
    while i < len(rest):
        if rest[i] == "\\":
            i += 2
            continue
        if rest[i] == '"':
            end = i
            break
        i += 1
    if end is None:
        return None
    try:
        raw = ast.literal_eval("b" + rest[: end + 1])
    except (ValueError, SyntaxError):
        return None
    text = bytes(raw).decode("utf-8", "surrogateescape")
    return text[2:] if text.startswith("a/") else None


def section_facts(section: bytes) -> tuple[str, str, str]:
    """(sha256 of the section, the file's blob id now, its blob id at HEAD) of one file's part
    of a ``git diff --binary`` (which implies ``--full-index``). A blob id of zeros (a file
    added or deleted) and a section without an index line (a mode change) give "".
    """
    import hashlib

    m = _INDEX.search(section.decode("latin-1"))
    base, blob = (m.group(1), m.group(2)) if m else ("", "")
    return (
        hashlib.sha256(section).hexdigest(),
        "" if set(blob) <= {"0"} else blob,
        "" if set(base) <= {"0"} else base,
    )


@dataclass(frozen=True, kw_only=True)
class HostInfo(Record):
    """The machine: hostname, OS, kernel, CPU and memory."""

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
    """Everything one snapshot records: what a lockfile holds."""

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
    launcher: str | None = None  # torchrun, slurm or mpi, when one started this process
    warnings: tuple[str, ...] = ()
    packages: tuple[Distribution, ...] = ()
    # distributions a --system-site-packages venv sees from its base interpreter, apart
    # from the ones the venv has itself
    inherited: tuple[Distribution, ...] = ()

    def versions(self) -> dict[str, str]:
        """Every distribution's version; torch-family ones as their ``version.py`` says
        (2.11.0+cu130), since PyPI's METADATA (2.11.0) hides the build."""
        real = {b.name: b.version for b in (self.torch, *self.torch_family) if b}
        return {d.name: real.get(d.name, d.version) for d in self.packages}

    def with_warnings(self, warnings: Iterable[str]) -> Snapshot:
        """The snapshot with ``warnings`` recorded once each, in order."""
        return dataclasses.replace(self, warnings=tuple(dict.fromkeys(warnings)))

    def package(self, name: str) -> Distribution | None:
        for dist in self.packages:
            if dist.name == name:
                return dist
        return None
