"""The lockfile: one schema-versioned TOML file per snapshot, written atomically.

Everything but the ``taken_at`` line (and the seal's, which hashes it) is a pure function of
the environment, in a stable order, so re-snapshotting an unchanged environment changes two
lines and lockfiles review well in git.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envguard import _toml, redact
from envguard._fs import atomic_write, read_regular, user_cache_dir
from envguard.errors import LockfileError
from envguard.model import Snapshot

SCHEMA = 4  # the newest this envguard reads and writes
# A lock is written with the oldest schema that holds it, so that a teammate's envguard
# that predates a section still reads every lock without it: schema 3 adds [bench], 4 adds
# [saved_caches].
_SCHEMA_OF_BENCH = 3
_SCHEMA_OF_SAVED = 4
_PLAIN_SCHEMA = 2
SUFFIX = ".envguard.toml"
DEFAULT_DIR = Path("lockfiles")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_path(name: str, folder: Path = DEFAULT_DIR) -> Path:
    safe = _UNSAFE.sub("-", name).strip(".-") or "env"
    return folder / f"{safe}{SUFFIX}"


def expand_output(path: Path, snapshot: Snapshot) -> Path:
    """``%h`` hostname, ``%j`` Slurm job, ``%r`` rank, ``%%`` a percent sign: one file per node
    on shared storage, so that ``srun … envguard snapshot -o DIR/%h.envguard.toml`` never
    clobbers."""
    env = os.environ
    rank = env.get("RANK") or env.get("SLURM_PROCID") or env.get("PMI_RANK") or "0"
    values = {
        "h": snapshot.host.hostname,
        "j": env.get("SLURM_JOB_ID", "nojob"),
        "r": rank,
        "%": "%",
    }
    return Path(re.sub(r"%([hjr%])", lambda m: _UNSAFE.sub("-", values[m.group(1)]), str(path)))


def find_for_venv(name: str, venv_path: str, folder: Path = DEFAULT_DIR) -> Path:
    """The lockfile ``snapshot`` wrote for this venv by default, or else the newest one in
    ``folder`` that records this venv's path (a snapshot taken with ``--name``)."""
    default = default_path(name, folder)
    if default.is_file():
        return default
    matches = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            snap = read(path)
        except LockfileError:
            continue  # another tool's or a broken file: not this venv's
        if snap.venv.path == venv_path:
            matches.append((snap.taken_at, path))
    if not matches:
        raise LockfileError(
            f"no lockfile for {venv_path} in {folder}/: run `envguard snapshot` first, or pass LOCK"
        )
    return max(matches)[1]


def dumps(snapshot: Snapshot) -> bytes:
    # committed and shared: every string passes the redactor, whichever probe it came from
    schema = (
        _SCHEMA_OF_SAVED if snapshot.saved_caches is not None
        else _SCHEMA_OF_BENCH if snapshot.bench is not None
        else _PLAIN_SCHEMA
    )  # fmt: skip
    doc: dict[str, Any] = redact.redact_data({"schema": schema, **snapshot.to_dict()})
    # tomli-w's layout (envguard._toml renders it faster, byte for byte). Multi-line strings
    # keep patches readable, but tomli-w writes a "\r\n" in them raw and
    # TOML readers turn it into "\n": any carriage return forces escaped one-line strings.
    body = _toml.dumps(doc, multiline_strings=not _has_cr(doc)).encode("utf-8")
    return _sealed(body, doc)


# --- the seal: a lock cut short (an interrupted copy, a truncated download, a merge gone
# wrong) reads as valid TOML with fewer packages, so envguard's lock opens with a line that
# counts every table and ends with one that hashes the data it holds. Both are TOML
# comments: an older envguard, or any TOML reader, reads the lock as before. The hash is of
# the data, not the bytes: a comment a user adds, or line ends git turns, change nothing.
_HEAD = b"# envguard lockfile: "
_HEAD_END = b"; its last line seals it"
_SEAL = b"# envguard seal: sha256="
_COUNT = re.compile(rb"^([A-Za-z_][A-Za-z0-9_]*)=([0-9]{1,9})$")
_SEAL_LINE = re.compile(rb"^# envguard seal: sha256=([0-9a-f]{64})\s*$", re.MULTILINE)


def _counts(doc: dict[str, Any]) -> dict[str, int]:
    """Each top-level table's size: an array's entries, a table's keys."""
    return {k: len(v) for k, v in doc.items() if isinstance(v, (list, dict))}


def _digest(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sealed(body: bytes, doc: dict[str, Any]) -> bytes:
    counts = " ".join(f"{k}={n}" for k, n in _counts(doc).items()).encode()
    head = _HEAD + counts + _HEAD_END + b"\n"
    return head + body + _SEAL + _digest(doc).encode() + b"\n"


def seal(data: bytes) -> bytes:
    """A lock's TOML (edited by hand, written by another tool) sealed as envguard seals a
    lock it writes: what a teammate's envguard reads as whole. A seal it had is replaced."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    lines = data.splitlines(keepends=True)
    body = b"".join(ln for ln in lines if not ln.startswith((_HEAD, _SEAL)))
    return _sealed(body, tomllib.loads(body.decode("utf-8")))


def _expected(data: bytes) -> dict[str, int] | None:
    """The table sizes the lock's first line says it holds; None: no seal (a lock written
    before envguard sealed them, or by another tool), whose end cannot be told."""
    if not data.startswith(_HEAD):
        return None
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    counts: dict[str, int] = {}
    if line.endswith(_HEAD_END):
        for word in line[len(_HEAD) : -len(_HEAD_END)].split():
            m = _COUNT.match(word)
            if m is not None:
                counts[m.group(1).decode()] = int(m.group(2))
    return counts


def _check_seal(data: bytes, doc: dict[str, Any], expected: dict[str, int], source: str) -> None:
    """A sealed lock holds the data its seal hashes, or is refused: cut short (the seal is
    gone, and what its first line counts says what is missing) or changed since."""
    seals = _SEAL_LINE.findall(data)
    if not seals:
        raise LockfileError(f"{source}: {_CUT}: {_missing(expected, _counts(doc))}")
    if len(seals) > 1 or seals[0].decode() != _digest(doc):
        raise LockfileError(
            f"{source}: changed since envguard wrote it (its seal, the last line, hashes "
            "other data: a merge or an edit); take it again with `envguard snapshot`, or "
            "delete its first and last lines to read it as edited"
        )


_CUT = "cut short (its last line, envguard's seal, is gone: an interrupted copy or download?)"


def _missing(expected: dict[str, int], found: dict[str, int]) -> str:
    """What a lock cut short lacks, against what its first line says it holds."""
    said = []
    for name, want in expected.items():
        have = found.get(name, 0)
        if have < want:
            said.append(f"{have} of its {want} {name}" if have else f"its {name}")
    return ("it lacks " + ", ".join(said)) if said else "every table is there, but not its end"


def _has_cr(value: Any) -> bool:
    if isinstance(value, str):
        return "\r" in value
    if isinstance(value, dict):
        return any(_has_cr(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cr(v) for v in value)
    return False


_REMEMBER_FROM = 32 * 1024  # smaller lockfiles parse in a few ms
_REMEMBERED = 64  # parsed lockfiles kept in envguard's cache folder, newest by use


def _parsed(data: bytes, parse: Callable[[str], dict[str, Any]], remember: bool) -> dict[str, Any]:
    """``parse`` (tomllib) of ``data``; for a large lockfile, remembered as JSON in envguard's
    cache folder under its content's hash. TOML read in Python costs ~150 ms at 5,000
    distributions, JSON ~15; the same bytes are the same document, so it cannot go stale.
    ``remember=False`` for files read once in bulk (a fleet's node snapshots), which would only
    push the project's own locks out."""
    if not remember or len(data) < _REMEMBER_FROM:
        return parse(data.decode("utf-8"))
    folder = user_cache_dir() / "parsed"
    file = folder / f"{hashlib.sha256(data).hexdigest()}.json"
    try:
        doc = json.loads(file.read_bytes())
        if isinstance(doc, dict):
            with contextlib.suppress(OSError):
                os.utime(file)  # recently used: kept longest
            return doc
    except (OSError, ValueError, RecursionError):
        pass  # not remembered, or damaged: read the TOML
    doc = parse(data.decode("utf-8"))
    with contextlib.suppress(OSError, TypeError, ValueError, RecursionError):
        atomic_write(file, json.dumps(doc, ensure_ascii=False).encode())
        _forget_oldest(folder)
    return doc


def _forget_oldest(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[_REMEMBERED:]:
        old.unlink(missing_ok=True)


def loads(data: bytes, source: str = "lockfile", *, remember: bool = True) -> Snapshot:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    if not data.strip():
        raise LockfileError(f"{source}: empty file, not a lockfile")
    expected = _expected(data)
    try:
        doc = _parsed(data, tomllib.loads, remember)
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{source}: not UTF-8 text, not a lockfile") from exc
    except tomllib.TOMLDecodeError as exc:
        if expected is not None and not _SEAL_LINE.search(data):
            raise LockfileError(f"{source}: {_CUT}, inside a value") from exc
        raise LockfileError(f"{source}: not valid TOML ({exc}); truncated or damaged?") from exc
    except RecursionError as exc:
        raise LockfileError(f"{source}: nested too deeply to be a lockfile") from exc
    if expected is not None:
        _check_seal(data, doc, expected, source)
    schema = doc.pop("schema", None)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise LockfileError(f"{source}: no integer 'schema' field, not an envguard lockfile")
    if schema > SCHEMA:
        raise LockfileError(
            f"{source}: written with lockfile schema {schema}, this envguard reads up to "
            f"{SCHEMA}; upgrade envguard"
        )
    if schema < 1:
        raise LockfileError(f"{source}: schema {schema} is not a valid lockfile schema")
    if schema == 1:
        _from_schema_1(doc)
    if schema < _SCHEMA_OF_BENCH and "bench" in doc:
        raise LockfileError(f"{source}: a [bench] table in a schema {schema} lock (it came in 3)")
    if schema < _SCHEMA_OF_SAVED and "saved_caches" in doc:
        raise LockfileError(
            f"{source}: a [saved_caches] table in a schema {schema} lock (it came in 4)"
        )
    try:
        return Snapshot.from_dict(doc, path=source)
    except LockfileError:
        raise
    except (TypeError, ValueError) as exc:
        raise LockfileError(f"{source}: {exc}") from exc
    except RecursionError as exc:
        raise LockfileError(f"{source}: nested too deeply to be a lockfile") from exc


def _from_schema_1(doc: dict[str, Any]) -> None:
    """Schema 1 kept a cache's compatibility facts as single strings; schema 2 keeps what
    the entries themselves say, as lists. Its per-file patch hashes were cut one newline
    short (every file but the last), so they are taken again from the stored patch."""
    for cache in doc.get("caches", []) if isinstance(doc.get("caches"), list) else []:
        compat_as_lists(cache)
    code = doc.get("code")
    if isinstance(code, dict) and isinstance(code.get("changed"), list):
        _rehash_sections(code)


def compat_as_lists(cache: object) -> None:
    """A schema-1 cache record's ``compat`` strings as schema 2's lists (also in archives)."""
    compat = cache.get("compat") if isinstance(cache, dict) else None
    if isinstance(compat, dict):
        for key, value in compat.items():
            if isinstance(value, str):
                compat[key] = [value]


def _rehash_sections(code: dict[str, Any]) -> None:
    import base64

    from envguard.patch import section_facts, split_patch

    patch = code.get("patch", "")
    if not isinstance(patch, str):
        return
    try:
        data = base64.b64decode(patch) if code.get("patch_encoding") == "base64" else patch.encode()
    except ValueError:
        return
    sections = [s.encode("latin-1") for s in split_patch(data.decode("latin-1"))]
    for row, section in zip(code["changed"], sections, strict=False):
        if isinstance(row, dict):
            row["sha256"], row["blob"], row["base_blob"] = section_facts(section)


def read(path: Path, *, remember: bool = True) -> Snapshot:
    try:
        data = read_regular(path)
    except FileNotFoundError as exc:
        raise LockfileError(f"{path}: no such lockfile") from exc
    except IsADirectoryError as exc:
        raise LockfileError(f"{path}: is a directory, not a lockfile") from exc
    except OSError as exc:
        raise LockfileError(f"{path}: cannot read ({exc.strerror})") from exc
    return loads(data, source=str(path), remember=remember)


def write(path: Path, snapshot: Snapshot) -> None:
    try:
        atomic_write(path, dumps(snapshot))
    except OSError as exc:
        raise LockfileError(f"{path}: cannot write ({exc.strerror})") from exc
