"""The snapshot's data model: the lockfile's records (:class:`envguard.record.Record`), in the
order they appear in a lockfile, and the checks each field gets when a lock is read.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from envguard import catalog
from envguard.errors import LockfileError
from envguard.patch import is_new_file, link_target, section_path, split_patch
from envguard.record import Record

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
        len(value) > 4096  # git has no limit; a loose ref, 255 a folder name
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
    # Requires-Dist lines in effect in its venv (markers true there; an extra's lines where
    # a line in effect asks for it), as written
    requires: tuple[str, ...] = ()
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
    """A file git does not track, by size and blob id: never its content (an ``.env``, a key
    or a token is the usual untracked file), and a lock that carries one is refused, since
    bisect or restore would have to write it (#39)."""

    REFUSED: ClassVar[dict[str, str]] = {
        "content": "envguard never records an untracked file's content, and a lock that "
        "carries one is refused (it would be written into your tree)"
    }

    path: str
    size: int
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

    def links(self) -> dict[str, str]:
        """Each symbolic link the patch makes or changes → where it points."""
        out = {}
        for section in self.sections():
            path, target = section_path(section), link_target(section)
            if path is not None and target is not None:
                out[path] = target
        return out

    def new_files(self) -> tuple[str, ...]:
        """The files and links the patch adds."""
        found = (section_path(s) for s in self.sections() if is_new_file(s))
        return tuple(path for path in found if path is not None)

    def is_own(self, path: str) -> bool:
        """envguard's own file, by name or because this snapshot was compared with it."""
        return path in self.own or catalog.is_own_file(path)

    def patch_bytes(self) -> bytes:
        import base64

        if self.patch_encoding == "base64":
            return base64.b64decode(self.patch)
        return self.patch.encode("utf-8")


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


_DIRECTIONS = ("higher", "lower")
BENCH_MAX_RUNS = 1000


ARCHIVE_MAX_BYTES = 64 << 30  # as large as the caches an archive may unpack


@dataclass(frozen=True, kw_only=True)
class SavedCaches(Record):
    """The compile-cache archive ``snapshot --save-cache`` wrote with this lock, by its
    SHA-256 and size: a lock and its archive travel apart (the archive is not committed), so
    restore and bisect unpack a file only if it is this one."""

    sha256: str
    bytes: int

    def validate(self, path: str) -> None:
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise LockfileError(
                f"{path}.sha256: {_shown(self.sha256)} is not a SHA-256 (64 hex digits)"
            )
        if not 0 < self.bytes <= ARCHIVE_MAX_BYTES:
            raise LockfileError(f"{path}.bytes: {self.bytes} is not the size of an archive")


@dataclass(frozen=True, kw_only=True)
class Benchmark(Record):
    """The known-good state's own benchmark (``snapshot --bench``), measured when the lock
    was taken: what bisect runs when it is given no command, and what GOOD, rebuilt in a
    trial, must measure again. A lock is untrusted: its command runs only when the user asks
    a command that runs it, and each field is checked here, where the lock is read."""

    command: tuple[str, ...]
    cwd: str = ""  # where it ran, inside the repository ("" its root, or no repository)
    metric: str = ""  # the regex whose first group is the number; "": exit statuses
    direction: str = ""  # "higher" or "lower" is better; "" either way
    unit: str = ""
    runs: int
    values: tuple[float, ...]  # each run's number, in the order they ran
    median: float
    spread: float  # highest less lowest, the farthest run left out from five on

    def validate(self, path: str) -> None:
        if not self.command or not self.command[0]:
            raise LockfileError(f"{path}.command: empty, no command to run")
        if len(self.command) > 256:
            raise LockfileError(f"{path}.command: {len(self.command)} words, not a command")
        for i, word in enumerate(self.command):
            _one_line(word, f"{path}.command[{i}]")
        if self.cwd:
            _repo_path(self.cwd, f"{path}.cwd")
        self._check_metric(path)
        if not 1 <= self.runs <= BENCH_MAX_RUNS or len(self.values) != self.runs:
            raise LockfileError(
                f"{path}.runs: {self.runs} runs with {len(self.values)} values; expected "
                f"1 to {BENCH_MAX_RUNS}, one value each"
            )
        import math

        figures = (*self.values, self.median, self.spread)
        if not all(math.isfinite(v) for v in figures) or self.spread < 0:
            raise LockfileError(f"{path}: values, median and spread must be finite numbers")
        if not min(self.values) <= self.median <= max(self.values):
            raise LockfileError(f"{path}.median: {self.median} is outside its own values")

    def _check_metric(self, path: str) -> None:
        if self.metric:
            from envguard.bisect.metric import compile_metric

            _one_line(self.metric, f"{path}.metric", limit=400)
            try:
                compile_metric(self.metric)
            except ValueError as exc:
                raise LockfileError(f"{path}.metric: {exc}") from None
        if self.direction and (self.direction not in _DIRECTIONS or not self.metric):
            raise LockfileError(
                f"{path}.direction: {_shown(self.direction)}; expected 'higher' or 'lower', "
                "with a metric"
            )
        if len(self.unit) > 40 or _CONTROL.search(self.unit):
            raise LockfileError(f"{path}.unit: {_shown(self.unit)} is not a short unit")


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
    saved_caches: SavedCaches | None = None  # snapshot --save-cache: the archive of them
    code: CodeState | None = None
    environ: dict[str, str] = field(default_factory=dict)
    launcher: str | None = None  # torchrun, slurm or mpi, when one started this process
    bench: Benchmark | None = None  # snapshot --bench: the known-good speed
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
