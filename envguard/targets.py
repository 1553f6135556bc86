"""Which lock, venv and repo a command works on: decided here, once, for every command.

Flags first, then ``ENVGUARD_*`` and the project's config (:mod:`envguard.config`), then
what the project's lock recorded, then the active venv, then ``./.venv``; a lock named on the
command line brings its venv, recorded, before the configured one. The lock's own venv
comes before whatever venv happens to be active, so that pre-commit's or a tool's venv, or the
venv envguard itself was installed into, is never compared by accident: envguard's own venv
(``sys.prefix``), active, gives way to ``./.venv``, and without one is refused unless
``--venv`` names it.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envguard import _fs, lockfile
from envguard.config import Config
from envguard.errors import EnvguardError, LockfileError, VenvError
from envguard.model import Snapshot
from envguard.probes.venv import locate


@dataclass(frozen=True)
class Chosen:
    """A venv a command works on, and why that one, as the screen says it."""

    path: Path
    why: str  # "--venv", "ENVGUARD_VENV", "the active venv ($VIRTUAL_ENV)", "./.venv", ...


def venv(explicit: Path | None, cfg: Config) -> Path:
    """The venv a command that records one works on (``snapshot``): --venv, the configured
    venv, the active venv, ``.venv`` here or at the project's root."""
    return chosen_venv(explicit, cfg).path


def chosen_venv(explicit: Path | None, cfg: Config) -> Chosen:
    """:func:`venv`, with why it is that one."""
    if explicit is not None:
        return Chosen(explicit, "--venv")
    if cfg.venv is not None:
        named = os.environ.get("ENVGUARD_VENV", "").strip()  # over the file, as config reads it
        return Chosen(cfg.venv, "ENVGUARD_VENV" if named else f"venv in {Path(cfg.source).name}")
    return _active_or_local(cfg)


def venv_for(lock: Snapshot, explicit: Path | None, cfg: Config) -> Path:
    """The live venv to compare with ``lock``: --venv, the venv the lock recorded (when it is
    here), else the configured one, the active one or ``.venv`` (a lock brought from another
    machine)."""
    if explicit is not None:
        return explicit
    recorded = Path(lock.venv.path)
    if recorded.is_dir():
        return recorded
    try:
        return chosen_venv(None, cfg).path
    except VenvError:
        raise VenvError(
            f"the lock's venv {recorded} does not exist here: pass --venv PATH"
        ) from None


def recorded(explicit: Path | None, cfg: Config) -> Path:
    """The venv a command about a recorded venv works on (``log``, ``backups``,
    ``unprotect``): --venv, the configured venv, the venv the project's lock recorded (when it
    is here), then as :func:`venv`."""
    if explicit is not None and not explicit.is_dir():
        raise VenvError(f"{explicit}: no such venv")
    if explicit is None and cfg.venv is None:
        try:
            only = _only_lock(cfg)
        except LockfileError:
            only = None
        if only is not None:
            path = Path(lockfile.read(only).venv.path)
            if path.is_dir():
                return path
    return venv(explicit, cfg)


def _active_or_local(cfg: Config) -> Chosen:
    active = os.environ.get("VIRTUAL_ENV")
    # the venv envguard runs from, activated to run it, is not the one to judge: the
    # project's own is, and without one envguard's is refused unless --venv names it
    own = bool(active) and _is_own(Path(active or "."))
    if active and not own:
        return Chosen(Path(active), "the active venv ($VIRTUAL_ENV)")
    for path, why in ((Path(".venv"), "./.venv"), (cfg.root / ".venv", "the project's .venv")):
        if path.is_dir():
            return Chosen(path, why)
    if active:
        raise VenvError(
            f"the active venv ($VIRTUAL_ENV, {active}) is the one envguard runs from, not a "
            f"training venv: pass --venv PATH to name the training venv (--venv {active} to "
            "take envguard's own anyway)"
        )
    raise VenvError(
        "no venv given: pass --venv PATH, set venv in [tool.envguard], activate one, or run "
        "where ./.venv exists"
    )


def lock_for(
    explicit: Path | None, venv_path: Path | None, cfg: Config
) -> tuple[Path, Snapshot, Path]:
    """(lockfile, its snapshot, the venv to compare it with) for ``diff [LOCK] [--venv]``.

    LOCK named: compared with --venv, else the venv it recorded (a tool's lock with the
    tool's venv, whatever the config names). The configured lock: with --venv, else the
    configured venv, else the one it recorded. No lock named: the venv (--venv, the
    configured one) with the lock that recorded it or the project's only lock; nothing given,
    the project's only lock with the venv it recorded, else the active venv or ``./.venv``
    with its lock."""
    path, venv_path = _pick(explicit, venv_path, cfg)
    locked = lockfile.read(path)
    return path, locked, venv_path or venv_for(locked, None, cfg)


def lock_path(explicit: Path | None, venv_path: Path | None, cfg: Config) -> Path:
    """The lock a command works on, as :func:`lock_for` picks it."""
    return _pick(explicit, venv_path, cfg)[0]


def _pick(explicit: Path | None, venv_path: Path | None, cfg: Config) -> tuple[Path, Path | None]:
    """(the lock, the venv when the rung that picked the lock decides it too: None for the
    venv the lock recorded)."""
    if explicit is not None:
        return (_from_run(str(explicit)) if _is_run_uri(explicit) else explicit), venv_path
    if cfg.lock is not None:  # the config names the pair: its venv before the recorded one
        return cfg.lock, venv_path or cfg.venv
    if venv_path is not None or cfg.venv is not None:
        given = chosen_venv(venv_path, cfg).path
        return _recording(given, cfg), given
    return _here(cfg)


def _recording(venv_path: Path, cfg: Config) -> Path:
    """The lock that recorded ``venv_path``, else the project's only lock."""
    try:
        return _lock_of(venv_path, cfg)
    except LockfileError as none:
        only = _only_lock(cfg, venv_path)  # several: an error naming them
        if only is None:
            raise none from None
        return only


def _here(cfg: Config) -> tuple[Path, Path | None]:
    """Nothing named: the project's only lock, with the venv it recorded; among several, the
    active venv's or ./.venv's."""
    try:
        only = _only_lock(cfg)
    except LockfileError as several:
        try:
            here = _active_or_local(cfg).path
            return _lock_of(here, cfg), here
        except (VenvError, LockfileError):
            raise several from None
    if only is not None:
        return only, None
    here = _active_or_local(cfg).path
    return _lock_of(here, cfg), here


@dataclass(frozen=True)
class Resnapshot:
    """The ``envguard snapshot`` that records a venv again into a lock, with only the flags a
    bare one needs to take that venv and write that file: the way to accept drift that was
    meant."""

    lock: Path
    venv: Path | None = None  # --venv: a bare snapshot would take another venv
    repo: Path | None = None  # --repo, as the diff was given it
    name: str = ""  # --name: the venv's own name is not the lock's, or is not known here
    output: bool = False  # -o LOCK: a bare snapshot would write another file
    commit: bool = False  # the lock is in the repository here: git add it and commit

    def command(self, shown: Callable[[str], str] = str) -> str:
        """The command line, each path as ``shown`` writes it (a screen: relative)."""
        args = ["envguard", "snapshot"]
        for flag, path in (("--venv", self.venv), ("--repo", self.repo)):
            if path is not None:
                args += [flag, _quoted(shown(str(path)))]
        if self.name:
            args += ["--name", _quoted(self.name)]
        if self.output:
            args += ["-o", _quoted(shown(str(self.lock)))]
        return " ".join(args)


def resnapshot(
    lock_path: Path, lock: Snapshot, venv_path: Path, cfg: Config, repo: Path | None = None
) -> Resnapshot | None:
    """How to record ``venv_path`` into ``lock_path`` again; None for a lock that is no file of
    the project's (a tracked run's, downloaded into envguard's cache)."""
    if _fs.is_inside(lock_path.absolute(), _fs.user_cache_dir() / "runs"):
        return None
    try:
        bare: Path | None = chosen_venv(None, cfg).path
    except VenvError:
        bare = None
    try:
        own = locate(venv_path).name
    except EnvguardError:  # not here (a fleet's node): the lock's name, said
        own = ""
    name = "" if own == lock.name else lock.name
    here = _work_tree(Path.cwd())
    return Resnapshot(
        lock=lock_path,
        venv=None if bare is not None and _same(bare, venv_path) else venv_path,
        repo=repo,
        name=name,
        output=not _same(lockfile.default_path(lock.name, cfg.lockfiles), lock_path),
        commit=here is not None and _work_tree(lock_path.absolute().parent) == here,
    )


def _quoted(arg: str) -> str:
    """Quoted for a shell where it must be, a leading ``~/`` left for the shell to expand."""
    if arg.startswith("~/"):
        return "~/" + shlex.quote(arg[2:])
    return shlex.quote(arg)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _work_tree(path: Path) -> Path | None:
    """The git work tree holding ``path`` (the nearest ``.git`` up), without git's import."""
    full = path.resolve()
    return next((p for p in (full, *full.parents) if (p / ".git").exists()), None)


def _is_run_uri(path: Path) -> bool:
    from envguard import tracking

    return tracking.is_uri(str(path))


def _from_run(uri: str) -> Path:
    """A tracked run's lock (``runs:/ID/envguard/NAME.envguard.toml``), downloaded into
    envguard's cache folder, one folder per URI."""
    import hashlib

    from envguard import _fs, tracking

    dest = _fs.user_cache_dir() / "runs" / hashlib.sha256(uri.encode()).hexdigest()[:16]
    dest.mkdir(parents=True, exist_ok=True)
    return tracking.fetch(uri, dest)


def _is_own(path: Path) -> bool:
    try:
        return path.resolve() == Path(sys.prefix).resolve()
    except OSError:
        return False


def _lock_of(venv_path: Path, cfg: Config) -> Path:
    if not venv_path.exists():  # a fresh checkout: no venv yet, so none recorded it
        raise LockfileError(f"{venv_path}: no venv here, and so no lock of its own")
    env = locate(venv_path)
    return lockfile.find_for_venv(env.name, env.info.path, cfg.lockfiles)


def _only_lock(cfg: Config, venv_path: Path | None = None) -> Path | None:
    """The project's lock when it has exactly one; None when it has none. ``venv_path``: the
    venv none of several recorded, for the message."""
    found = sorted(cfg.lockfiles.glob(f"*{lockfile.SUFFIX}")) if cfg.lockfiles.is_dir() else []
    if len(found) > 1:
        names = ", ".join(p.name for p in found[:5]) + (", ..." if len(found) > 5 else "")
        theirs = f", none of them {venv_path}'s" if venv_path is not None else ""
        raise LockfileError(
            f"{len(found)} lockfiles in {cfg.lockfiles} ({names}){theirs}: pass one, or set "
            "lock in [tool.envguard]"
        )
    return found[0] if found else None


def lock_of_venv(venv_path: Path, cfg: Config) -> tuple[Path, Snapshot | None]:
    """A venv's lockfile (where its journal sits beside it) and its snapshot, if any."""
    env = locate(venv_path)
    try:
        path = lockfile.find_for_venv(env.name, env.info.path, cfg.lockfiles)
    except LockfileError:
        return lockfile.default_path(env.name, cfg.lockfiles), None
    return path, lockfile.read(path)


def code_repo(lock_path: Path, lock: Snapshot) -> Path:
    """The repository ``restore --code`` puts back: the one holding the lockfile when it has
    the lock's commit (the usual layout: lockfiles/ committed in the repo), else the one
    here when it has it, else the one the lock recorded."""
    from envguard import _git

    assert lock.code is not None
    for place in (lock_path.absolute().parent, Path.cwd()):
        repo = _git.open_repo(place, required=False)
        if repo is not None and _git.commit_exists(repo, lock.code.head):
            return Path(repo.working_tree_dir)
    return Path(lock.code.root)


def repo_for(lock: Snapshot) -> Path | None:
    """The repository to compare with ``lock``'s code: the one here when it holds the lock's
    commit (a worktree, a second clone, the same checkout), else the one the lock recorded,
    else whichever is here (None: the working directory's)."""
    from envguard import _git

    here = Path.cwd()
    recorded = Path(lock.code.root) if lock.code else None
    if not _git.has_repo(here):
        return recorded if recorded is not None and recorded.is_dir() else None
    if recorded is None or not recorded.is_dir() or _fs.is_inside(here, recorded):
        return None
    repo = _git.open_repo(here, required=False)
    if repo is not None and lock.code and _git.commit_exists(repo, lock.code.head):
        return None
    return recorded
