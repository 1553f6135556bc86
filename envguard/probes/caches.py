"""Compile caches (TorchInductor, Triton): size, kinds of entry, a stable fingerprint.

The fingerprint is a sha256 over sorted (relative path, size, content sha256). Content hashes
are kept in a stat cache keyed by (path, size, mtime_ns, inode), so fingerprinting an unchanged
cache again reads no file contents.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import marshal
import os
import re
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from io import BufferedReader
from pathlib import Path

from envguard._fs import atomic_write, user_cache_dir
from envguard.errors import LockfileError
from envguard.model import CacheCompat, CompileCache

Progress = Callable[[int, int], None]  # (files done, files total)
KINDS = ("fxgraph", "aotautograd", "triton_kernels", "generated_code", "autotune")
_STATCACHE_VERSION = 3
_JSON_LIMIT = 1 << 20
_CHUNK = 1 << 20
# Inductor's FX graph entries embed the repro header torch writes: its version, CUDA, commit
# and the GPUs it compiled on. It sits in the first tens of kB of the entry.
_GRAPH_HEADER = re.compile(
    rb"# torch version: (\S+)\n# torch cuda version: (\S+)\n# torch git version: (\S+)\n"
)
_GPU_INFO = re.compile(rb"# GPU Hardware Info: ?\n((?:# .+ : \d+ ?\n)+)")
_GPU_LINE = re.compile(rb"# (.+?) : \d+ ?\n")
_FACT_KEYS = ("torch", "torch_git", "cuda", "triton", "gpus", "archs")
# A file changed twice within one mtime tick keeps its size and mtime ("racy git"): entries
# this fresh are hashed again next time rather than trusted.
_RACY_SECONDS = 2.0
_SKIP_SUFFIXES = (".lock", ".tmp", ".temp", ".swp", "~")
_TMP_NAME = re.compile(r"^(tmp[a-z0-9_]{6,}|\.)", re.IGNORECASE)


def default_paths(environ: Mapping[str, str]) -> dict[str, Path]:
    """Where torch and triton put their caches, by their own rules."""
    inductor = environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not inductor:
        user = re.sub(r'[\\/:*?"<>|]', "_", _user(environ))
        inductor = str(Path(tempfile.gettempdir()) / f"torchinductor_{user}")
    triton = environ.get("TRITON_CACHE_DIR", "").strip()
    # torch.compile points TRITON_CACHE_DIR into its own cache (<inductor>/triton/0) in its
    # own process: those kernels are part of the Inductor cache, and Triton's is the usual one
    if not triton or Path(triton).absolute().is_relative_to(Path(inductor).absolute()):
        home = environ.get("TRITON_HOME") or str(Path.home())
        triton = str(Path(home) / ".triton" / "cache")
    return {"inductor": Path(inductor), "triton": Path(triton)}


def _user(environ: Mapping[str, str]) -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return environ.get("USER", "unknown")


# (path relative to the cache, size, mtime_ns, inode): a tuple, not a dataclass, since a warm
# pass over 100,000 files is made of little else.
_Entry = tuple[str, int, int, int]


def probe(
    kind: str, path: Path, *, progress: Progress | None = None
) -> tuple[CompileCache, tuple[str, ...]]:
    if not path.is_dir():
        return CompileCache(kind=kind, path=str(path), exists=False), ()
    # Freshness is judged against when the files were looked at, not when their hashes come
    # back: a file read early and merged late is as racy as when it was stat'ed.
    started = time.time()
    entries, unreadable_dirs = _walk(path)
    # Every file's (path, size, mtime, inode) unchanged since the last probe: its result
    # stands, without loading the per-file hashes (the bulk of a warm pass's time).
    listing = hashlib.sha256(marshal.dumps((kind, unreadable_dirs, entries), 2)).hexdigest()
    known = _StatCache.summary(path, listing)
    if known is not None:
        return known, ()
    store = _StatCache.load(path, started)
    digests: list[tuple[str, int, str]] = []
    facts: dict[str, set[str]] = {k: set() for k in _FACT_KEYS}
    unreadable = unreadable_dirs
    for i, (entry, cached, read) in enumerate(_hashed(path, entries, store)):
        if cached is None:
            unreadable += 1
            continue
        if read:
            store.put(entry, cached)
        digests.append((entry[0], entry[1], cached[0]))
        if cached[1]:
            _add_facts(facts, cached[1])
        if progress is not None:
            progress(i + 1, len(entries))
    counts = _counts(kind, [e[0] for e in entries])
    cache = CompileCache(
        kind=kind,
        path=str(path),
        exists=True,
        files=len(digests),
        bytes=sum(size for _, size, _ in digests),
        entries=sum(counts.get(k, 0) for k in KINDS),
        counts=counts,
        fingerprint=_fingerprint(digests),
        unreadable=unreadable,
        compat=CacheCompat(**{k: tuple(sorted(v)) for k, v in facts.items()}),
    )
    # an unreadable file is read again next time; a racy one is not trusted yet
    store.save(cache if not unreadable and len(store.fresh) == len(entries) else None, listing)
    warnings = (f"{kind} cache {path}: {unreadable} unreadable, left out of the fingerprint",)
    return cache, warnings if unreadable else ()


def _hashed(
    root: Path, entries: list[_Entry], store: _StatCache
) -> Iterator[tuple[_Entry, tuple[str, str] | None, bool]]:
    """Each entry, in order, with its (sha256, facts) or None if unreadable, and whether it
    was read now: the stat cache's answer, else the file's. Files are read on threads (hashlib
    lets go of the GIL), so a cold pass hashes on every core it may use."""
    known = [store.get(e) for e in entries]
    todo = [e for e, k in zip(entries, known, strict=True) if k is None]
    workers = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if len(todo) < 4 or workers < 2:
        read: Iterator[tuple[str, str] | None] = (_hash(root, e) for e in todo)
        yield from _merged(entries, known, read)
        return
    from concurrent.futures import ThreadPoolExecutor  # only a cold pass pays its import

    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from _merged(entries, known, pool.map(lambda e: _hash(root, e), todo))


def _merged(
    entries: list[_Entry],
    known: list[tuple[str, str] | None],
    read: Iterator[tuple[str, str] | None],
) -> Iterator[tuple[_Entry, tuple[str, str] | None, bool]]:
    for entry, cached in zip(entries, known, strict=True):
        yield (entry, cached, False) if cached is not None else (entry, next(read), True)


def _add_facts(facts: dict[str, set[str]], encoded: str) -> None:
    for item in encoded.split("\t"):
        key, _, value = item.partition("=")
        if key in facts and value:
            facts[key].add(value)


def skipped(name: str) -> bool:
    """Locks, temp files and __pycache__: never part of a fingerprint or an archive."""
    if name == "__pycache__" or name.endswith(_SKIP_SUFFIXES):
        return True
    # the regex only for names that can match it: it runs once per file of the cache
    return name[:1] == "." or (name[:3].lower() == "tmp" and bool(_TMP_NAME.match(name)))


def _walk(root: Path) -> tuple[list[_Entry], int]:
    entries: list[_Entry] = []
    unreadable = 0
    stack = [""]
    is_dir, is_reg = stat.S_ISDIR, stat.S_ISREG
    base = str(root)  # str paths: pathlib per folder costs more than the scandir
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(f"{base}/{rel_dir}" if rel_dir else base) as it:
                items = list(it)
        except OSError:
            unreadable += 1
            continue
        for item in items:
            name = item.name
            if skipped(name):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                unreadable += 1
                continue
            if is_dir(st.st_mode):
                stack.append(rel)
            elif is_reg(st.st_mode):
                entries.append((rel, st.st_size, st.st_mtime_ns, st.st_ino))
    entries.sort()
    return entries, unreadable


def _hash(root: Path, entry: _Entry) -> tuple[str, str] | None:
    """(content sha256, what the entry says it was built for) or None if unreadable."""
    rel, size = entry[0], entry[1]
    try:
        # a str path and one read of the whole file when it is small (most are): a 1 MB
        # buffer zeroed per file and pathlib per name cost more than hashing them
        with open(f"{root}/{rel}", "rb") as fh:  # noqa: PTH123
            if size > _CHUNK:
                return _file_sha256(fh, graph=_is_graph(rel))
            data = fh.read()
    except OSError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    if rel.endswith(".json") and len(data) <= _JSON_LIMIT:
        return digest, _kernel_facts(rel, data)
    return digest, _graph_facts(data[:_CHUNK]) if _is_graph(rel) else ""


def _is_graph(rel: str) -> bool:
    return rel.startswith("fxgraph/") or "/fxgraph/" in rel


def _file_sha256(fh: BufferedReader, *, graph: bool) -> tuple[str, str]:
    h = hashlib.sha256()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    facts = ""
    first = True
    while n := fh.readinto(view):
        if first and graph:
            facts = _graph_facts(bytes(view[:n]))
        first = False
        h.update(view[:n])
    return h.hexdigest(), facts


def _graph_facts(head: bytes) -> str:
    """torch's version, CUDA and commit, and the GPUs, from an FX graph entry's repro header."""
    m = _GRAPH_HEADER.search(head)
    if m is None:
        return ""
    torch, cuda, git = (v.decode("utf-8", "replace") for v in m.groups())
    items = [f"torch={torch}", f"cuda={cuda}", f"torch_git={git}"]
    gpus = _GPU_INFO.search(head, m.end())
    if gpus is not None:
        items += [
            f"gpus={g.decode('utf-8', 'replace').strip()}" for g in _GPU_LINE.findall(gpus.group(1))
        ]
    return "\t".join(items)


def _kernel_facts(rel: str, data: bytes) -> str:
    """Triton writes ``<kernel>.json`` beside each compiled kernel: ``"arch": "sm90"`` and its
    ``triton_version``."""
    name = rel.rsplit("/", 1)[-1]
    if name.startswith("__grp__"):
        return ""
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested beyond any kernel's metadata
        return ""
    if not isinstance(meta, dict):
        return ""
    items = []
    arch = meta.get("arch")
    if isinstance(arch, int):
        arch = f"sm{arch}"
    if isinstance(arch, str) and arch.startswith(("sm", "gfx")):
        items.append(f"archs={arch}")
    version = meta.get("triton_version")
    if isinstance(version, str) and version and "\t" not in version:
        items.append(f"triton={version}")
    return "\t".join(items)


def _fingerprint(digests: list[tuple[str, int, str]]) -> str:
    h = hashlib.sha256()
    for rel, size, digest in digests:
        h.update(f"{rel}\0{size}\0{digest}\n".encode())
    return h.hexdigest()


def _counts(kind: str, rels: list[str]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    kernels: set[str] = set()
    for rel in rels:
        parts = rel.split("/")
        name = parts[-1]
        if kind == "triton" and len(parts) >= 2:
            kernels.add(parts[0])
        elif parts[0] == "triton" and len(parts) >= 4:
            kernels.add("/".join(parts[:3]))
        elif parts[0] in ("fxgraph", "aotautograd"):
            counts[parts[0]] += 1
        elif name.endswith(".best_config"):
            counts["autotune"] += 1
        elif len(parts) == 2 and len(parts[0]) == 2 and name.endswith(".py"):
            counts["generated_code"] += 1
        else:
            counts["other"] += 1
    if kernels:
        counts["triton_kernels"] = len(kernels)
    return {k: counts[k] for k in (*KINDS, "other") if counts[k]}


class _StatCache:
    """Content hashes of one cache folder's files, keyed by (path, size, mtime_ns, inode), and
    beside them the last result with the listing it was computed from."""

    def __init__(
        self, file: Path, root: str, rows: dict[str, list[object]], started: float
    ) -> None:
        self.file, self.root, self.rows, self.started = file, root, rows, started
        self.fresh: dict[str, list[object]] = {}
        self.changed = False

    @staticmethod
    def _file(root: Path) -> Path:
        key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        return user_cache_dir() / "statcache" / f"{key}.json"

    @classmethod
    def summary(cls, root: Path, listing: str) -> CompileCache | None:
        """The last result for ``root`` if it was computed from this very ``listing``."""
        try:
            data = json.loads(cls._file(root).with_suffix(".summary.json").read_bytes())
            if (
                isinstance(data, dict)
                and data.get("version") == _STATCACHE_VERSION
                and data.get("root") == str(root)
                and data.get("listing") == listing
            ):
                return CompileCache.from_dict(data["cache"])
        except (
            OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, LockfileError
        ):  # fmt: skip
            pass  # missing or damaged: the per-file pass decides
        return None

    @classmethod
    def load(cls, root: Path, started: float) -> _StatCache:
        """``started``: when the cache's files were stat'ed (entries newer are racy)."""
        file = cls._file(root)
        rows: dict[str, list[object]] = {}
        try:
            data = json.loads(file.read_bytes())
            if (
                isinstance(data, dict)
                and data.get("version") == _STATCACHE_VERSION
                and data.get("root") == str(root)
                and isinstance(data.get("files"), dict)
            ):
                rows = data["files"]
        except (OSError, ValueError, RecursionError):
            pass  # a missing or damaged stat cache only costs a re-read
        return cls(file, str(root), rows, started)

    def get(self, e: _Entry) -> tuple[str, str] | None:
        rel = e[0]
        row = self.rows.get(rel)
        if not isinstance(row, list) or len(row) != 5 or row[:3] != [e[1], e[2], e[3]]:
            return None
        self.fresh[rel] = row
        return str(row[3]), str(row[4])

    def put(self, e: _Entry, value: tuple[str, str]) -> None:
        self.changed = True
        if self.started - e[2] / 1e9 > _RACY_SECONDS:
            self.fresh[e[0]] = [e[1], e[2], e[3], *value]

    def save(self, result: CompileCache | None, listing: str) -> None:
        """``result``: what to answer next time the listing is the same (None: nothing)."""
        # A read-only home only costs speed: fingerprints stay right, re-read next time.
        with contextlib.suppress(OSError):
            if self.changed or len(self.fresh) != len(self.rows):
                payload = {"version": _STATCACHE_VERSION, "root": self.root, "files": self.fresh}
                atomic_write(self.file, json.dumps(payload, separators=(",", ":")).encode())
            summary = self.file.with_suffix(".summary.json")
            if result is None:
                summary.unlink(missing_ok=True)
                return
            known = {"version": _STATCACHE_VERSION, "root": self.root, "listing": listing}
            atomic_write(summary, json.dumps({**known, "cache": result.to_dict()}).encode())
