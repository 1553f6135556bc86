"""Many nodes, one truth: compare node snapshots with the lock and with each other.

Each node's verdict is ``drift.compare(lock, node)`` at the ``fail_on`` threshold, exactly as
``diff`` would give it; the matrix shows the facts that make nodes train differently.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import drift, lockfile, snapshot
from envguard.config import Config
from envguard.errors import LockfileError
from envguard.model import Snapshot
from envguard.record import Record

COLUMNS = ("torch", "cuda", "cudnn", "nccl", "driver", "gpus", "head", "patch", "cache")
# The cache fingerprint differs on every node that compiled on its own; it is shown, and a
# cold cache is drift, but it does not split the groups.
_GROUPED = tuple(c for c in COLUMNS if c != "cache")
_PARALLEL_FROM = 200


@dataclass(frozen=True, kw_only=True)
class NodeChange(Record):
    """A change of a node, as diff has it, less what a thousand nodes cannot carry (code
    patches, whole journal commands). A group's ``old`` and ``new`` are "": its members say."""

    severity: str
    area: str
    subject: str
    old: str
    new: str
    why: str
    members: tuple[drift.Member, ...]
    unit: str = ""  # as a change of diff has it


@dataclass(frozen=True, kw_only=True)
class FactChange(Record):
    """A fact (a column: torch, cuda, …) of a node that is not the lock's: ``old`` is the
    lock's, ``new`` the node's, as a change of diff has them."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, kw_only=True)
class Node(Record):
    file: str
    host: str
    facts: dict[str, str]
    differs: tuple[FactChange, ...] = ()  # the facts the node's verdict counts moved
    fails: bool = False  # drift at the fail_on threshold, as diff would say
    changes: tuple[NodeChange, ...] = ()  # every one, at every severity; the screen shows 8


@dataclass(frozen=True, kw_only=True)
class Group(Record):
    facts: dict[str, str]
    hosts: tuple[str, ...]
    matches_lock: bool
    differs: tuple[FactChange, ...] = ()


@dataclass(frozen=True, kw_only=True)
class FleetReport(Record):
    lock: dict[str, str]
    nodes: tuple[Node, ...]  # outliers first
    groups: tuple[Group, ...]  # outliers first, smallest first
    problems: tuple[str, ...] = ()  # files that could not be used, by name
    notes: tuple[str, ...] = ()  # what to know about usable files (a host named twice)

    def drifted(self) -> bool:
        return any(n.fails for n in self.nodes)


def facts(snap: Snapshot) -> dict[str, str]:
    """The facts that make one node train differently from another."""
    cuda = snap.cuda
    inductor = next((c for c in snap.caches if c.kind == "inductor"), None)
    models = Counter(g.name for g in snap.gpu.gpus)
    code = snap.code
    return {
        "torch": snap.torch.version if snap.torch else "none",
        "cuda": cuda.runtime.version if cuda.runtime else "none",
        "cudnn": cuda.cudnn.version if cuda.cudnn else "none",
        "nccl": cuda.nccl.version if cuda.nccl else "none",
        "driver": snap.gpu.driver or "none",
        "gpus": ", ".join(f"{n}× {m}" for m, n in sorted(models.items())) or "none",
        "head": code.head[:12] if code else "none",
        "patch": (code.patch_sha256[:12] if code.dirty else "clean") if code else "none",
        "cache": (inductor.fingerprint[:12] if inductor.entries else "cold")
        if inductor and inductor.exists
        else "cold",
    }


def expand(paths: Iterable[Path]) -> list[Path]:
    """The node files: each folder's lockfiles, each file as given; a file reached twice (named
    twice, or named and inside a named folder) counts once."""
    paths = list(paths)
    out: list[Path] = []
    seen: set[str] = set()
    for p in paths:
        for file in sorted(p.glob(f"*{lockfile.SUFFIX}")) if p.is_dir() else [p]:
            key = file.resolve()
            if str(key) not in seen:
                seen.add(str(key))
                out.append(Path(os.path.normpath(file)))  # as typed: messages name it so
    if not out:
        named = ", ".join(str(p) for p in paths)
        raise LockfileError(f"no node snapshots (*{lockfile.SUFFIX}) in {named}")
    return out


Loaded = tuple[str, dict[str, str], frozenset[str], tuple[NodeChange, ...]]
# The drift area behind each column: a column is shown as differing from the lock only where
# the node's verdict counts a change in that area (a HEAD moved by the lockfile's commit is not).
_AREA = {
    "torch": "torch", "cuda": "cuda", "cudnn": "cuda", "nccl": "cuda", "driver": "gpu",
    "gpus": "gpu", "head": "code", "patch": "code", "cache": "caches",
}  # fmt: skip
_LOCK: list[tuple[Snapshot, Config]] = []  # (lock, the project's policy) in each worker


def _init(lock: Snapshot, cfg: Config) -> None:
    _LOCK[:] = [(lock, cfg)]


def _load(path: Path) -> Loaded | str:
    """(hostname, facts, fails, changes) of one node, or why the file cannot be used."""
    try:
        snap = lockfile.read(path, remember=False)  # a thousand nodes, read once each
    except LockfileError as exc:
        return str(exc)
    lock, cfg = _LOCK[0]
    snap = snapshot.stored_against(lock, snap)
    report = cfg.judged(drift.compare(lock, snap))
    # the verdict is the threshold's; what the node holds is every change, as diff --json has
    areas = frozenset(c.area for c in report.changes if c.counts_at(cfg.fail_on))
    return snap.host.hostname, facts(snap), areas, tuple(map(_node_change, report.changes))


def _node_change(c: drift.Change) -> NodeChange:
    return NodeChange(
        severity=c.severity, area=c.area, subject=c.subject, old=c.old, new=c.new, why=c.why,
        members=c.members, unit=c.unit,
    )  # fmt: skip


def _load_all(paths: Sequence[Path], lock: Snapshot, cfg: Config) -> list[Loaded | str]:
    """In worker processes past a few hundred files: parsing TOML is CPU-bound."""
    workers = min(os.cpu_count() or 1, 32)
    if len(paths) < _PARALLEL_FROM or workers < 2:
        _init(lock, cfg)
        return [_load(p) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, initializer=_init, initargs=(lock, cfg)) as pool:
        return list(pool.map(_load, paths, chunksize=max(1, len(paths) // (workers * 4))))


def compare(lock: Snapshot, paths: Sequence[Path], cfg: Config | None = None) -> FleetReport:
    """``cfg``: the project's policy (fail-on, areas, ignored variables and paths), as diff
    applies it; the defaults without one."""
    cfg = cfg or Config(root=Path.cwd())
    want = facts(lock)
    nodes: list[Node] = []
    problems: list[str] = []
    notes: list[str] = []
    seen: dict[str, str] = {}
    for path, loaded in zip(paths, _load_all(paths, lock, cfg), strict=True):
        if isinstance(loaded, str):
            problems.append(loaded)
            continue
        host, have, areas, changes = loaded
        if host in seen:
            # two ranks of one node, or a node snapshotted twice: both files are usable
            notes.append(f"{path}: host {host} also in {seen[host]}; both are shown")
        seen.setdefault(host, str(path))
        differs = tuple(
            FactChange(name=k, old=want[k], new=have[k])
            for k in COLUMNS
            if _AREA[k] in areas and _drifts(k, want[k], have[k])
        )
        nodes.append(
            Node(
                file=str(path),
                host=host,
                facts=have,
                differs=differs,
                fails=bool(areas),
                changes=changes,
            )
        )
    nodes.sort(key=lambda n: (not n.fails, not n.differs, n.host, n.file))
    return FleetReport(
        lock=want,
        nodes=tuple(nodes),
        groups=_groups(want, nodes),
        problems=tuple(problems),
        notes=tuple(notes),
    )


def _drifts(column: str, want: str, have: str) -> bool:
    if column == "cache":
        return have == "cold" and want != "cold"
    return want != have


def _groups(want: dict[str, str], nodes: Sequence[Node]) -> tuple[Group, ...]:
    by_key: dict[tuple[str, ...], list[Node]] = {}
    for node in nodes:
        by_key.setdefault(tuple(node.facts[k] for k in _GROUPED), []).append(node)
    groups = []
    for key, members in by_key.items():
        shared = dict(zip(_GROUPED, key, strict=True))
        flagged = {d.name for n in members for d in n.differs}
        differs = tuple(
            FactChange(name=k, old=want[k], new=v) for k, v in shared.items() if k in flagged
        )
        groups.append(
            Group(
                facts=shared,
                hosts=tuple(n.host for n in members),
                matches_lock=not differs,
                differs=differs,
            )
        )
    groups.sort(key=lambda g: (g.matches_lock, len(g.hosts)))
    return tuple(groups)
