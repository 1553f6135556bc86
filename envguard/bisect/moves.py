"""The drift between GOOD (what a lock recorded) and BAD (the live environment), cut into
moves: facts a trial applies to GOOD, or not. Pure: two snapshots in, moves out.

- the torch family is one move: torch, its Triton, its nvidia-* wheels, torchvision and
  torchaudio (they are built for each other), with what they brought;
- every other package that changed, arrived or went is a move of its own, unless it came
  with another one that requires it (an edge of the requirement graph, as diff's install
  groups read it): then it moves with that one, with each one that brought it. Key
  libraries (transformers, sglang...) are always moves of their own, by name;
- the code: the uncommitted patch (untracked files included) is one move, the commits
  since the lock's HEAD another;
- each compile cache torch or Triton finds through a variable, and each custom cache whose
  folder a variable names (``TORCH_EXTENSIONS_DIR=/scratch/ext``): warm (the lock's saved
  archive) or as it is now;
- each training-relevant environment variable that differs.

Moves are named as diff names the changes: ``kind`` is the area, ``subject`` the package,
cache, variable or part of the code.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from envguard import _fs, catalog, grouping, variables
from envguard.drift.report import cache_label
from envguard.model import CodeState, Distribution, Snapshot
from envguard.record import Record
from envguard.redact import REDACTED
from envguard.versions import same

KINDS = ("torch", "libraries", "packages", "code", "caches", "env")
PATCH = "uncommitted patch"
HEAD = "git HEAD"
# The cache a trial points torch and Triton at through these: which folder they name is the
# cache's move, not a variable's.
CACHE_VARS = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME"})
# Installer settings: trials are built by envguard's uv, whatever these say.
_INSTALLER = ("UV_", "PIP_")
_FIX_NAMES = 8  # more packages than this: `envguard restore` says it shorter


@dataclass(frozen=True, kw_only=True, order=True)
class Move(Record):
    """One fact of the drift, applied to GOOD or not."""

    kind: str  # diff's area: torch, libraries, packages, code, caches, env
    subject: str  # the package, cache, variable, or PATCH / HEAD
    old: str  # as GOOD has it
    new: str  # as BAD has it
    members: tuple[str, ...] = ()  # a package move: every package it moves, its own first

    @property
    def label(self) -> str:
        """The move in a list of moves: its subject, and how many packages come with it."""
        more = len(self.members) - 1
        return f"{self.subject} (+{more})" if more > 0 else self.subject


@dataclass(frozen=True, kw_only=True)
class Derived:
    moves: tuple[Move, ...]
    notes: tuple[str, ...] = ()  # facts that differ but cannot be moved, and why


def derive(
    good: Snapshot,
    bad: Snapshot,
    *,
    warm: Iterable[str] = (),
    trust_env: bool = False,
    environ: Mapping[str, str] | None = None,
    cache_dirs: Iterable[Path] = (),
) -> Derived:
    """The moves from ``good`` to ``bad``; ``warm``: the caches the lock's archive holds
    (by :func:`envguard.drift.caches.key`), which a trial can have as GOOD had them;
    ``trust_env``: the lock's loader variables may be set (``--trust-lock-env``);
    ``environ``: the live environment, whose variables may name a custom cache's folder;
    ``cache_dirs``: the custom cache folders a trial's copy may stand in for (``--cache-dir``)."""
    notes: list[str] = []
    moves = [
        *package_moves(good, bad),
        *_code_moves(good.code, bad.code, notes),
        *_cache_moves(good, bad, frozenset(warm), notes, environ or {}, cache_dirs),
        *_env_moves(good, bad, notes, trust=trust_env),
    ]
    notes += _unmovable(good, bad)
    order = {k: i for i, k in enumerate(KINDS)}
    return Derived(moves=tuple(sorted(moves, key=lambda m: (order[m.kind], m.subject))),
                   notes=tuple(notes))  # fmt: skip


# --- packages ---------------------------------------------------------------------------------


def in_family(name: str) -> bool:
    """torch, its extensions, its Triton and its CUDA wheels: one build, one move."""
    return name in catalog.BUILDS or catalog.is_cuda_wheel(name)


def package_moves(good: Snapshot, bad: Snapshot) -> list[Move]:
    was, now = good.versions(), bad.versions()
    a = {d.name: d for d in good.packages}
    b = {d.name: d for d in bad.packages}
    changed = sorted(n for n in a.keys() & b.keys() if not same(was[n], now[n]))
    added, removed = sorted(b.keys() - a.keys()), sorted(a.keys() - b.keys())
    moving = sorted({*added, *changed, *removed})
    if not moving:
        return []
    brought = _brought(a, b, added, changed, removed, was, now)
    family = [n for n in moving if in_family(n)]
    pulled = {dep for deps in brought.values() for dep in deps}
    roots = {
        n for n in moving
        if not in_family(n) and (n in catalog.KEY_LIBRARIES or n not in pulled)
    }  # fmt: skip
    groups: list[tuple[str, set[str]]] = []
    if family:
        head = catalog.TORCH if catalog.TORCH in family else family[0]
        groups.append((head, _reach(family, brought, stop=roots)))
    others = roots | set(family)
    groups += [(r, _reach([r], brought, stop=others - {r})) for r in sorted(roots)]
    seen = set().union(*(g for _, g in groups))
    for name in moving:  # a cycle that nothing outside it brought: its first name leads it
        if name not in seen:
            groups.append((name, _reach([name], brought, stop=others)))
            seen |= groups[-1][1]
    return [_package_move(head, members, was, now) for head, members in groups]


def _brought(
    a: Mapping[str, Distribution],
    b: Mapping[str, Distribution],
    added: list[str],
    changed: list[str],
    removed: list[str],
    was: Mapping[str, str],
    now: Mapping[str, str],
) -> dict[str, set[str]]:
    """requirer → the packages its install brought, as diff's install groups read the
    requirement graph: on BAD's side for what arrived or changed, and, read the other way,
    on GOOD's side for what went (it came with a package that required it then)."""
    out: dict[str, set[str]] = {}
    sides = (
        ([b[n] for n in added], [b[n] for n in changed], {n: was[n] for n in changed}),
        ([a[n] for n in removed], [a[n] for n in changed], {n: now[n] for n in changed}),
    )
    for arrived, moved, before in sides:
        for group in grouping.install_groups(arrived, moved, before):
            for requirer, dep, _ in group.edges:
                out.setdefault(requirer, set()).add(dep)
    return out


def _reach(start: Iterable[str], brought: Mapping[str, set[str]], stop: set[str]) -> set[str]:
    """``start`` and what it brought, transitively; a package that is a move of its own
    (``stop``) is not entered."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(d for d in brought.get(name, ()) if d not in stop)
    return seen


def _package_move(
    head: str, members: set[str], was: Mapping[str, str], now: Mapping[str, str]
) -> Move:
    kind = "packages"
    if in_family(head):
        kind = "torch"
    elif head in catalog.KEY_LIBRARIES:
        kind = "libraries"
    return Move(
        kind=kind,
        subject=head,
        old=was.get(head, "absent"),
        new=now.get(head, "absent"),
        members=(head, *sorted(members - {head})),
    )


def trial_packages(good: Snapshot, bad: Snapshot, applied: Iterable[Move]) -> Snapshot:
    """GOOD with the applied package moves' packages as BAD has them (or gone), and torch's
    builds taken from the side each comes from: the lock a trial's venv is built from."""
    from dataclasses import replace

    names = {n for m in applied if m.kind in ("torch", "libraries", "packages")
             for n in m.members}  # fmt: skip
    side = {d.name: d for d in good.packages if d.name not in names}
    side.update({d.name: d for d in bad.packages if d.name in names})
    builds = {x.name: x for x in (good.torch, *good.torch_family) if x and x.name not in names}
    builds.update({x.name: x for x in (bad.torch, *bad.torch_family) if x and x.name in names})
    return replace(
        good,
        packages=tuple(side[n] for n in sorted(side)),
        torch=builds.get(catalog.TORCH) if catalog.TORCH in side else None,
        torch_family=tuple(builds[n] for n in sorted(builds) if n != catalog.TORCH and n in side),
    )


# --- code ---------------------------------------------------------------------------------------


def _code_moves(good: CodeState | None, bad: CodeState | None, notes: list[str]) -> list[Move]:
    if good is None or bad is None:
        if good is None and bad is not None:
            notes.append("the lock recorded no repository: every trial runs the code as it is")
        return []
    out = []
    if good.head != bad.head and not _only_own_commits(bad):
        out.append(Move(kind="code", subject=HEAD, old=good.head[:12], new=bad.head[:12]))
    if dirty_files(good) != dirty_files(bad):
        out.append(Move(kind="code", subject=PATCH, old=patch_state(good), new=patch_state(bad)))
    return out


def _only_own_commits(bad: CodeState) -> bool:
    """The commits since the lock's HEAD touch envguard's own files alone (the lockfile was
    committed): no code moved, as diff judges it."""
    since = bad.since
    if since is None or not since.found or since.omitted:
        return False
    return all(f.own or bad.is_own(f.path) for f in since.files)


def dirty_files(code: CodeState) -> frozenset[tuple[str, str]]:
    """What the uncommitted patch holds, file by file, by content: (path, blob id) of each
    changed and untracked file that is the training code's, not envguard's."""
    files = {(f.path, f.blob or f.sha256) for f in code.changed}
    files |= {(u.path, u.blob or str(u.size)) for u in code.untracked}
    return frozenset(f for f in files if not code.is_own(f[0]))


def patch_state(code: CodeState) -> str:
    """``clean``, or ``+3 −1 in model.py``, ``+9 −4 in 3 files, 1 untracked``."""
    changed = [f for f in code.changed if not code.is_own(f.path)]
    untracked = [u for u in code.untracked if not code.is_own(u.path)]
    if not changed and not untracked:
        return "clean"
    parts = []
    if changed:
        added = sum(max(f.added, 0) for f in changed)
        removed = sum(max(f.removed, 0) for f in changed)
        where = changed[0].path if len(changed) == 1 else f"{len(changed)} files"
        parts.append(f"+{added} −{removed} in {where}")
    if untracked:
        parts.append(f"{len(untracked)} untracked")
    return ", ".join(parts)


# --- caches -------------------------------------------------------------------------------------


def _cache_moves(
    good: Snapshot,
    bad: Snapshot,
    warm: frozenset[str],
    notes: list[str],
    environ: Mapping[str, str],
    allowed: Iterable[Path],
) -> list[Move]:
    from envguard.drift import caches

    named = cache_namers(good, environ)
    placed = in_place(good, environ, allowed)
    copyable = set(_custom_folders(good).values())
    keys = {cache_label(c.kind, c.path): caches.key(c) for c in good.caches}
    by_subject: dict[str, Move] = {}
    for change in caches.changes(good, bad):
        key = keys[change.subject]
        custom = key.startswith("custom:")
        if custom and key not in copyable:
            notes.append(
                f"{change.subject}: {change.old} → {change.new}; no cache may be in that "
                "folder (the system, a home or its own dot-folders, another's home), so no "
                "trial has a copy of it: every trial reads it as it is"
            )
        elif custom and key not in named and key not in placed:  # its folder is the code's
            folder = shlex.quote(key.removeprefix("custom:"))
            notes.append(
                f"{change.subject}: {change.old} → {change.new}; no variable names that "
                "folder, so every trial reads it as it is: name it by one (as "
                "TORCH_EXTENSIONS_DIR names torch's), or let each trial's copy stand in its "
                f"place while it runs (envguard bisect --cache-dir {folder})"
            )
        elif key not in warm:
            notes.append(
                f"{change.subject}: {change.old} → {change.new}, but the lock saved no copy "
                "(envguard snapshot --save-cache): every trial has it as it is now"
            )
        elif change.subject not in by_subject:  # moved and cold: one cache, one move
            by_subject[change.subject] = Move(
                kind="caches", subject=change.subject, old=change.old, new=change.new
            )
    return list(by_subject.values())


def cache_key(move: Move, good: Snapshot) -> str:
    """The cache a caches move is of, as :func:`envguard.drift.caches.key` names it."""
    from envguard.drift import caches

    return next(caches.key(c) for c in good.caches
                if cache_label(c.kind, c.path) == move.subject)  # fmt: skip


def saved_caches(good: Snapshot) -> frozenset[str]:
    """The caches ``snapshot --save-cache`` archived with this lock, by key: every one that
    existed with files."""
    from envguard.drift import caches

    return frozenset(caches.key(c) for c in good.caches if c.exists and c.files)


# Never a cache's name, whatever their value: where the shell is, and the home folder.
_NOT_NAMERS = frozenset({"PWD", "OLDPWD", "HOME"})


def cache_namers(good: Snapshot, environ: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Each custom cache of the lock's → the variables of ``environ`` (the live one) whose
    value is its folder and that the lock saw so too, or not at all: a trial points them at
    its own copy of the cache, as it points TORCHINDUCTOR_CACHE_DIR at its Inductor cache's.
    A variable that moved is a move of its own, and names no cache."""
    folders = _custom_folders(good)
    out: dict[str, list[str]] = {}
    for name, value in sorted(environ.items()):
        if name in _NOT_NAMERS or name in CACHE_VARS or not value.startswith(("/", "~")):
            continue
        folder = _fs.normal(Path(value).expanduser())
        key = folders.get(folder)
        was = good.environ.get(name, value)
        if key is None or _fs.normal(Path(was).expanduser()) != folder:
            continue
        out.setdefault(key, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def in_place(good: Snapshot, environ: Mapping[str, str], allowed: Iterable[Path]) -> frozenset[str]:
    """The custom caches no variable names whose folder the user lets bisect stand a trial's
    copy in (``--cache-dir``, ``cache-dirs``): while a run lasts, the user's folder is set
    aside and the copy is in its place."""
    named = cache_namers(good, environ)
    allowed_folders = {_fs.normal(a.expanduser()) for a in allowed}
    return frozenset(
        key for folder, key in _custom_folders(good).items()
        if key not in named and folder in allowed_folders
    )  # fmt: skip


def _custom_folders(good: Snapshot) -> dict[Path, str]:
    """The lock's custom caches a trial may have a copy of, by folder (normalised) → key:
    an absolute folder where a cache may be (never ~/.ssh, the system)."""
    from envguard.drift import caches

    customs = (c for c in good.caches if c.kind == "custom" and Path(c.path).is_absolute())
    folders = {_fs.normal(Path(c.path)): caches.key(c) for c in customs}
    return {p: k for p, k in folders.items() if _fs.is_cache_place(p)}


# --- environment --------------------------------------------------------------------------------


def _env_moves(good: Snapshot, bad: Snapshot, notes: list[str], *, trust: bool) -> list[Move]:
    from envguard.drift import env

    out = []
    untrusted: list[str] = []
    located: list[str] = []
    for change in env.changes(good, bad):
        name = change.subject
        if name in CACHE_VARS or name.startswith(_INSTALLER):
            continue
        if REDACTED in change.old:
            notes.append(
                f"{name}: the lock redacted its value, so GOOD cannot have it: every trial "
                "has it as it is now"
            )
            continue
        value = good.environ.get(name)
        role = variables.role(name, value) if value is not None else "value"
        if not trust and role == "loader":
            untrusted.append(name)
            continue
        if role in ("folder", "file"):
            located.append(name)
        out.append(Move(kind="env", subject=name, old=change.old, new=change.new))
    if located:
        notes.append(
            f"{', '.join(located)}: the lock's value names where a program writes, so a trial "
            "that takes it gets a folder of its own in its work folder instead of the lock's path"
        )
    if untrusted:
        notes.append(
            f"{', '.join(untrusted)}: the lock's value names a program, a library or a path "
            "to load, so no trial sets it unless you pass --trust-lock-env; every trial has "
            "it as it is now"
        )
    return out


# --- what cannot move ---------------------------------------------------------------------------


def _unmovable(good: Snapshot, bad: Snapshot) -> Iterator[str]:
    if good.python.version != bad.python.version:
        yield (
            f"Python {good.python.version} → {bad.python.version}: every trial is built with "
            f"the lock's {good.python.version}"
        )
    gpus = [sorted(g.name for g in s.gpu.gpus) for s in (good, bad)]
    if gpus[0] != gpus[1] or good.gpu.driver != bad.gpu.driver:
        yield "the GPUs or their driver differ from the lock's: every trial runs on these"


# --- putting one back ---------------------------------------------------------------------------


def fix(move: Move, good: Snapshot, lock: Path, venv: Path) -> tuple[tuple[str, ...], ...]:
    """The commands that put just ``move`` back as GOOD had it, each as argv (paths whole:
    screens shorten them)."""
    restore = ("envguard", "restore", str(lock))
    if move.kind == "torch":  # a build and its CUDA wheels: restore pins them all
        return (restore,)
    if move.kind in ("libraries", "packages"):
        return _package_fix(move, good, venv) or (restore,)
    if move.kind == "caches":
        key = cache_key(move, good)
        custom = key.removeprefix("custom:")
        return ((*restore, "--cache", *(("--cache-dir", custom) if custom != key else ())),)
    if move.kind == "code":
        clean = good.code is not None and not dirty_files(good.code)
        if move.subject == PATCH and clean:
            return (("git", "stash", "push", "--include-untracked"),)
        return ((*restore, "--code"),)
    value = good.environ.get(move.subject)
    return (("unset", move.subject) if value is None else ("export", f"{move.subject}={value}"),)


def _package_fix(move: Move, good: Snapshot, venv: Path) -> tuple[tuple[str, ...], ...]:
    if len(move.members) > _FIX_NAMES:
        return ()
    versions = good.versions()
    pins = [f"{n}=={versions[n]}" for n in move.members if n in versions]
    gone = [n for n in move.members if n not in versions]
    out: list[tuple[str, ...]] = []
    if pins:
        out.append(("uv", "pip", "install", "--python", str(venv), *pins))
    if gone:
        out.append(("uv", "pip", "uninstall", "--python", str(venv), *gone))
    return tuple(out)


def shell(argv: tuple[str, ...]) -> str:
    """One command as a shell reads it (``export NAME=value`` quoted whole)."""
    return " ".join(shlex.quote(a) for a in argv)
