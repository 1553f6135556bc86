"""A trial: GOOD's environment with some moves applied, built in a work folder, and the user's
command run in it. The I/O of ``envguard bisect``; nothing here decides what to try.

A trial has its own of everything, so that nothing of the user's is touched:

- a venv built by uv from exact pins (``uv venv`` and ``uv pip sync``, with the lock's
  indexes and the user's ``--find-links``/``--offline``, as restore builds one; uv's cache
  and hard links make it seconds);
- the code in a clone of the repository of its own (``git clone --shared``: its own refs,
  stash, index and config, the user's objects read, nothing written there) at GOOD's commit
  (or HEAD's, with the commits applied), with GOOD's uncommitted patch (or the live one)
  applied and the untracked files copied in; the command runs from there, and what it does
  with git stays there;
- each compile cache torch and Triton find through a variable, copied afresh for every run
  (a cold cache stays cold for the second run): GOOD's from the lock's saved archive, or
  the live one, or empty, with ``TORCHINDUCTOR_CACHE_DIR`` and Triton's folder pointed at
  the copy;
- the environment: the live one (variables envguard does not record pass through), with
  GOOD's value of each recorded variable whose move is not applied, activated as in the
  trial's venv (``VIRTUAL_ENV``, ``PATH`` without the live venv's ``bin``);
- the command's words that name the live venv's interpreter or scripts pointed at the
  trial's (:mod:`envguard.bisect.command`).

The work folder is envguard's cache folder's ``bisect/`` (or ``--keep DIR``); each trial's
copy of the code and venv go when the trial ends, and everything when the bisect ends, however it
ends (a second ^C waits for the cleaning).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType

from envguard import _fs, _git, _run, catalog, variables
from envguard import uv as uv_backend
from envguard._confine import Root
from envguard.bisect import command as commands
from envguard.bisect import metric, standin
from envguard.bisect.moves import (
    CACHE_VARS,
    HEAD,
    PATCH,
    Move,
    cache_key,
    cache_namers,
    in_place,
    trial_packages,
)
from envguard.bisect.search import REFERENCE_RUNS, Measured
from envguard.errors import ArgumentError, BisectError, CommandError, ConfinementError
from envguard.model import CodeState, GpuState, Snapshot
from envguard.probes.caches import default_paths
from envguard.redact import redact
from envguard.restore.plan import Overrides, Pin, indexes_for, requirements_text
from envguard.restore.plan import plan as plan_for

# as probes/code reads the patch, so that it applies byte for byte
_DIFF = (
    "diff", "HEAD", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
    "--no-renames", "--submodule=short", "--ignore-submodules=none",
)  # fmt: skip
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")  # the user's hooks are not the trial's


class Unbuildable(Exception):
    """This set of moves cannot be built (uv refuses the pins, a patch does not apply)."""


@dataclass(frozen=True, kw_only=True)
class Sides:
    """GOOD (the lock) and BAD (the live environment, as snapshotted and as it runs)."""

    lock_path: Path
    good: Snapshot
    bad: Snapshot
    environ: Mapping[str, str]  # the live environment, values whole (the snapshot's redacted)
    cwd: Path  # where the user runs bisect: the command runs from the same place in the copy
    cache_store: Path | None = None  # the project's cache store: GOOD's archive may be there


@dataclass(frozen=True, kw_only=True)
class Settings:
    command: tuple[str, ...]
    metric: re.Pattern[str] | None = None
    runs: int = 1
    timeout: float = 3600.0
    overrides: Overrides = dataclasses.field(default_factory=Overrides)
    python: str | None = None  # the interpreter to build with (restore's --python)
    cache_dirs: tuple[Path, ...] = ()  # custom cache folders a trial's copy may stand in


@dataclass(frozen=True, kw_only=True)
class Event:
    """Progress: trial ``trial`` is at run ``run`` of ``runs`` (0: still building)."""

    trial: int
    applied: tuple[Move, ...]
    run: int
    runs: int
    values: tuple[float, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Timing:
    index: int  # 1 is GOOD, 2 is BAD
    seconds: float = 0.0  # the whole trial
    build_seconds: float = 0.0  # its venv and code, before the first run
    run_seconds: float = 0.0  # the command's runs themselves: the rest is envguard's


@dataclass(kw_only=True)
class _Trial:
    """A trial while it is open: its folder, then its code and venv, then its runs."""

    index: int
    applied: frozenset[Move]
    ordered: tuple[Move, ...]
    folder: Path
    tree: Path | None = None
    venv: Path | None = None
    values: list[float] = dataclasses.field(default_factory=list)
    measured: Measured | None = None  # set when it said nothing (broken, unbuildable)
    built: float = 0.0  # seconds building its code and venv
    spent: float = 0.0  # seconds of its runs, with their cache copies
    ran: float = 0.0  # seconds of the command itself


# --- the work folder --------------------------------------------------------------------------


class Workspace:
    """The folder trials live in, and the trials' copies of the user's repository: all gone
    on exit, on success, failure, ^C or SIGTERM (as KeyboardInterrupt)."""

    def __init__(self, keep: Path | None = None) -> None:
        self.keep = keep
        self.root = Path()
        self._copies: list[Path] = []  # the trials' clones of the repository
        self._trash: queue.Queue[Path | None] = queue.Queue()
        self._sweeper: threading.Thread | None = None

    def __enter__(self) -> Workspace:
        base = _base()
        base.mkdir(parents=True, exist_ok=True)
        standin.collect(base, _alive)  # a killed bisect's set-aside folders, put back first
        if self.keep is not None:
            if self.keep.exists() and (not self.keep.is_dir() or any(self.keep.iterdir())):
                raise ArgumentError(f"--keep {self.keep}: not an empty folder")
            self.keep.mkdir(parents=True, exist_ok=True)
            self.root = self.keep.absolute()
        else:
            _collect(base)
            self.root = Path(tempfile.mkdtemp(prefix="run-", dir=base))
            (self.root / _OWNER).write_text(owner() + "\n")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with _run.held_interrupts():
            for tree in reversed(self._copies):
                self._remove(tree)
            if self._sweeper is not None:
                self._trash.put(None)
                self._sweeper.join()
            if self.keep is None:
                shutil.rmtree(self.root, ignore_errors=True)

    def scrub(self, *files: Path) -> None:
        """Under --keep, what envguard wrote for a trial (its requirements, its patch, a
        run's output) stays, with each secret's value redacted as on the screen: a kept
        folder is shared and pasted. The trial's copy of the code and its venv are left as
        they ran. Without --keep everything goes at the end, unread."""
        if self.keep is None:
            return
        for file in files:
            with contextlib.suppress(OSError, ValueError):
                data = _fs.read_regular(file)
                text = data.decode("utf-8", "surrogateescape")
                clean = redact(text)
                if clean != text:
                    _fs.atomic_write(file, clean.encode("utf-8", "surrogateescape"))

    def discard(self, folder: Path) -> None:
        """A finished trial's folder (its venv: thousands of files) goes on a thread of its
        own, while the next trial builds (never while it runs: :meth:`quiet`); under --keep
        it stays."""
        if self.keep is not None:
            return
        aside = self.root / ".discarded" / folder.name
        aside.parent.mkdir(exist_ok=True)
        folder.rename(aside)  # at once: the trial's folder is gone whatever the thread does
        if self._sweeper is None:
            self._sweeper = threading.Thread(target=self._sweep, daemon=True)
            self._sweeper.start()
        self._trash.put(aside)

    def _sweep(self) -> None:
        while (folder := self._trash.get()) is not None:
            try:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                self._trash.task_done()

    def quiet(self) -> None:
        """Every folder handed to :meth:`discard` gone: called before a trial's command runs,
        so that nothing of envguard's takes a core from what is measured (#40)."""
        if self._sweeper is not None:
            self._trash.join()

    def clone(self, repo: Path, commit: str, tree: Path) -> None:
        """``tree``: a clone of ``repo`` of its own, at ``commit``, detached. Its refs, stash,
        config and index are its own, so what a benchmark does with git in a trial (a
        branch, a tag, a stash, a commit) lands in the trial's copy and never in the user's
        repository, as a worktree's would (a worktree shares them); its objects are read
        from the user's (``--shared``), nothing copied, nothing written there. It has no
        remote: a benchmark's push goes nowhere."""
        if not self._copies:
            # an earlier envguard's bisect, killed (-9), left worktrees registered here; their
            # folders went with its work folder (_collect), and prune forgets what has none
            _git_run(repo, "worktree", "prune", check=False)
        self._copies.append(tree)  # known before git makes it: an interrupted clone goes too
        _git_run(tree.parent, *_NO_HOOKS, "clone", "--quiet", "--shared", "--no-checkout",
                 str(repo), str(tree))  # fmt: skip
        _git_run(tree, "remote", "remove", "origin", check=False)
        # checked out as the blobs are: the recorded patch was diffed with autocrlf off (a
        # user's core.autocrlf=true made every line CRLF on checkout, and it did not apply)
        _git_run(tree, *_NO_HOOKS, "-c", "core.autocrlf=false", "checkout", "--quiet",
                 "--detach", commit)  # fmt: skip

    def done(self, tree: Path) -> None:
        """The trial of ``tree`` ended: its copy goes (under --keep, as a plain copy)."""
        if tree in self._copies:
            self._remove(tree)
            self._copies.remove(tree)

    def _remove(self, tree: Path) -> None:
        if self.keep is not None and tree.is_dir():
            shutil.copytree(tree, tree.with_name(tree.name + "-kept"), symlinks=True,
                            ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)  # fmt: skip
        shutil.rmtree(tree, ignore_errors=True)


_OWNER = "owner"  # a work folder's bisect: its pid and start time


def _started(pid: int) -> str:
    import psutil

    try:
        return f"{psutil.Process(pid).create_time():.0f}"
    except psutil.Error:
        return ""


def _collect(base: Path) -> None:
    """The work folders of bisects that are no longer running (killed by -9, the machine
    gone down): removed, as their own exit would have. One whose owner runs (its pid alive,
    started when it says) is another bisect's, and stays."""
    for folder in base.glob("run-*"):
        try:
            alive = _alive((folder / _OWNER).read_text())
        except (OSError, ValueError):  # being made (a second ago), or gone meanwhile
            try:
                alive = time.time() - folder.stat().st_mtime < 60
            except OSError:
                continue
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)


def _base() -> Path:
    """Where every bisect's work folders and stand-in journals are, unless --keep."""
    return _fs.user_cache_dir() / "bisect"


def owner() -> str:
    """This bisect, as its work folder and journal name it: its pid and start time."""
    return f"{os.getpid()} {_started(os.getpid())}"


def _alive(said: str) -> bool:
    """Whether the bisect an :func:`owner` line names still runs (its pid alive, started
    when it says); ValueError: not such a line."""
    pid, _, started = said.partition(" ")
    return _started(int(pid)) == started.strip() != ""


def _git_run(repo: Path, *args: str, check: bool = True) -> _run.Completed:
    try:
        return _run.run(["git", "-C", str(repo), *args], check=check, timeout=600)
    except CommandError as exc:
        raise Unbuildable(str(exc)) from None


# --- trials -------------------------------------------------------------------------------------


class Trials:
    """``measure(applied)`` for :func:`envguard.bisect.search.bisect`: one trial per set."""

    def __init__(
        self,
        sides: Sides,
        moves: Iterable[Move],
        settings: Settings,
        work: Workspace,
        *,
        warm: Mapping[str, Path] | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.sides, self.settings, self.work = sides, settings, work
        self.moves = tuple(moves)
        self.warm = dict(warm or {})  # cache key → GOOD's copy, unpacked from the archive
        self.namers = cache_namers(sides.good, sides.environ)  # custom cache → its variables
        self.placed = in_place(sides.good, sides.environ, settings.cache_dirs)  # stood in
        self.stand_ins = standin.StandIns(standin.journal_for(_base()), owner(), str(os.getpid()))
        self.tell = on_event or (lambda event: None)
        self.timings: dict[frozenset[Move], Timing] = {}
        self._opened = 0  # trials opened so far: the next one's index is one more
        self.notes: list[str] = []
        version = sides.good.python.version
        self.interpreter = uv_backend.interpreter_for(version, settings.python)[0]
        self.overrides, why = _sources(sides, settings.overrides)
        if why and not self.overrides.no_index:  # some pins must come from uv's cache
            self.notes.append(why)
        self.code = _Code(sides, self.moves, self.notes) if _has_code(sides) else None
        self.live = commands.Live.of((sides.good.venv.path, sides.bad.venv.path), sides.cwd)
        wrapper = commands.opaque(settings.command, self.live)
        if wrapper:
            self.notes.append(_opaque_note(wrapper))
        self.untouched = Untouched(self._copies(), spared=self._spared())

    def _copies(self) -> dict[Path, list[Path]]:
        """Each cache folder of the user's (GOOD's and BAD's) → what the trials copy of it:
        GOOD's from the lock's archive, unpacked; BAD's from the folder itself (the live
        environment's own, not a lock's)."""
        from envguard.drift.caches import key

        copies: dict[Path, list[Path]] = {}
        for c in self.sides.good.caches:
            # the lock names GOOD's folders: one that no cache may be in is never swept
            if key(c) in self.warm and _fs.is_cache_place(_fs.normal(Path(c.path))):
                copies.setdefault(Path(c.path), []).append(self.warm[key(c)])
        for c in self.sides.bad.caches:
            copies.setdefault(Path(c.path), []).append(Path(c.path))
        return copies

    def _spared(self) -> list[Path]:
        roots = [self.work.root, Path.home(), _fs.user_cache_dir()]
        return roots + ([self.code.root] if self.code is not None else [])

    def __call__(self, applied: frozenset[Move]) -> Measured:
        """One trial: built, then run ``--runs`` times."""
        runs = self.settings.runs
        return self._measure((applied,), least=runs, most=runs)[0]

    def until(self, applied: frozenset[Move], clear: Callable[[Sequence[float]], bool]) -> Measured:
        """One trial, run ``--runs`` times and on, up to ``REFERENCE_RUNS[0]``, while
        ``clear`` says its verdict could still turn (a metric's; exit statuses are what they
        are)."""
        least = self.settings.runs
        if self.settings.metric is None:
            return self._measure((applied,), least=least, most=least)[0]
        most = max(least, REFERENCE_RUNS[0])
        return self._measure((applied,), least=least, most=most, enough=lambda v: clear(v[0]))[0]

    def references(
        self,
        good: frozenset[Move],
        bad: frozenset[Move],
        told: Callable[[Sequence[float], Sequence[float]], bool],
    ) -> tuple[Measured, Measured]:
        """GOOD and BAD, both built before either runs, then run in turn (GOOD, BAD, GOOD…)
        so that whatever the machine does meanwhile falls on both alike: at least
        ``REFERENCE_RUNS[0]`` times each where a metric decides, and on up to
        ``REFERENCE_RUNS[1]`` until ``told`` says their runs answer."""
        least = most = self.settings.runs
        if self.settings.metric is not None:
            least, most = max(least, REFERENCE_RUNS[0]), max(least, REFERENCE_RUNS[1])
        measured = self._measure(
            (good, bad), least=least, most=most, enough=lambda v: told(v[0], v[1])
        )
        return measured[0], measured[1]

    def _measure(
        self,
        sets: tuple[frozenset[Move], ...],
        *,
        least: int,
        most: int,
        enough: Callable[[list[tuple[float, ...]]], bool] | None = None,
    ) -> list[Measured]:
        """Every set built first, then run in turn, ``least`` times each and on up to
        ``most`` until ``enough`` says their runs tell what is asked; a trial that breaks
        ends the runs of all (the others' would be compared with nothing)."""
        opened = [self._open(applied) for applied in sets]
        try:
            for t in opened:
                self._build(t)
            for i in range(1, most + 1):
                if any(t.measured is not None for t in opened):
                    break
                if i > least and (enough is None or enough([tuple(t.values) for t in opened])):
                    break
                for t in opened:
                    self._run(t, i, runs=max(least, i))
        finally:
            for t in opened:
                self._close(t)
        return [t.measured or Measured(values=tuple(t.values)) for t in opened]

    def _open(self, applied: frozenset[Move]) -> _Trial:
        self._opened += 1
        folder = self.work.root / f"trial-{self._opened:02d}"
        folder.mkdir()
        ordered = tuple(m for m in self.moves if m in applied)
        seen = self.timings.get(applied)  # measured again: the same trial, its number kept
        index = seen.index if seen is not None else self._opened
        return _Trial(index=index, applied=applied, ordered=ordered, folder=folder)

    def _build(self, t: _Trial) -> None:
        started = time.monotonic()
        self.tell(Event(trial=t.index, applied=t.ordered, run=0, runs=self.settings.runs))
        try:  # the code first: a project installed editable is installed from it
            t.tree = self.code.build(t.applied, t.folder / "code", self.work) if self.code else None
            t.venv = self._venv(t.applied, t.folder / "venv", t.tree)
        except Unbuildable as exc:
            t.measured = Measured(failure=str(exc), unbuildable=True)
        finally:
            t.built = time.monotonic() - started

    def _close(self, t: _Trial) -> None:
        if t.tree is not None:
            self.work.done(t.tree)
        self.work.discard(t.folder)
        # a set measured again (a second look beside GOOD) is still one trial: its first
        # index, its time summed
        was = self.timings.get(t.applied, Timing(index=t.index))
        self.timings[t.applied] = Timing(
            index=was.index, seconds=was.seconds + t.built + t.spent,
            build_seconds=was.build_seconds + t.built, run_seconds=was.run_seconds + t.ran,
        )  # fmt: skip

    # -- the venv --

    def _venv(self, applied: frozenset[Move], where: Path, tree: Path | None) -> Path:
        good = self.sides.good
        lock = trial_packages(good, self.sides.bad, applied)
        planned = plan_for(lock, where, None, self.overrides)
        if planned.skipped:
            from envguard.output.human import skipped_line

            raise Unbuildable(f"cannot pin {'; '.join(map(skipped_line, planned.skipped[:3]))}")
        pins = (_exact(p) for p in planned.pins)
        if tree is not None and self.code is not None:
            pins = (_editable_in(p, self.code.root, tree) for p in pins)
        planned = dataclasses.replace(planned, pins=tuple(pins))
        reqs = where.with_name("requirements.txt")
        reqs.write_text(requirements_text(planned), encoding="utf-8")
        try:
            uv_backend.create_venv(where, self.interpreter, None,
                                   system_site_packages=good.venv.system_site_packages)  # fmt: skip
            uv_backend.sync(where / "bin" / "python", reqs, indexes_for(lock, planned.overrides))
        except uv_backend.UvError as exc:
            raise Unbuildable(f"uv refuses these pins: {exc}") from None
        finally:
            self.work.scrub(reqs)
        _check_built(lock, where)
        return where

    # -- the runs --

    def _run(self, t: _Trial, i: int, *, runs: int) -> None:
        """The command's ``i``-th run in trial ``t``: its caches copied, then nothing of
        envguard's going on while it runs."""
        assert t.venv is not None
        started = time.monotonic()
        self.tell(Event(trial=t.index, applied=t.ordered, run=i, runs=runs,
                        values=tuple(t.values)))  # fmt: skip
        place = t.folder / f"run-{i}"
        env = self._environ(t.applied, t.venv, t.tree, place)
        self.work.quiet()  # the last trial's venv went while this one was built
        done = self._run_once(t, env, self._cwd(t.tree), place)
        if done.value is None:
            t.measured = Measured(values=tuple(t.values), failure=done.why)
        else:
            t.values.append(done.value)
        t.spent += time.monotonic() - started

    def _run_once(self, t: _Trial, env: dict[str, str], cwd: Path, place: Path) -> metric.Run:
        assert t.venv is not None
        command = self.command_in(t.venv)
        if t.tree is not None and self.code is not None:
            command = _command_in(command, self.code.root, t.tree)
        place.mkdir(parents=True, exist_ok=True)
        try:
            with self.stand_ins.standing(self._places(t.applied)):
                started = time.monotonic()
                try:
                    done = _run.run_group(command, timeout=self.settings.timeout,
                                          env=env, cwd=cwd, output=place / "output")  # fmt: skip
                finally:
                    t.ran += time.monotonic() - started
        except CommandError as exc:  # not found, or past --timeout
            return metric.Run(value=None, why=str(exc))
        finally:
            self.untouched.sweep()
        output = place / "output"
        self.work.scrub(output.with_suffix(".stdout"), output.with_suffix(".stderr"))
        return metric.read(self.settings.metric, done.returncode, done.stdout, done.stderr)

    def command_in(self, venv: Path) -> tuple[str, ...]:
        """The command as it runs in the trial's ``venv``: its words that name the live
        venv's interpreter or scripts pointed at the trial's."""
        return commands.in_copy(self.settings.command, self.live, venv)

    def reaching(self) -> list[str]:
        """What of the runs still reaches the live venv, as they ran: the likeliest cause of a
        GOOD that measures as BAD."""
        return commands.reaching(self.settings.command, (self.sides.environ,
                                 self.sides.good.environ), self.live)  # fmt: skip

    def _cwd(self, tree: Path | None) -> Path:
        """The command runs where the user is, in the trial's copy of the repository."""
        if tree is None or self.code is None:
            return self.sides.cwd
        try:
            inside = tree / self.sides.cwd.resolve().relative_to(self.code.root.resolve())
        except ValueError:
            return tree
        return inside if inside.is_dir() else tree

    # -- the environment and caches of one run --

    def _environ(
        self, applied: frozenset[Move], venv: Path, tree: Path | None, place: Path
    ) -> dict[str, str]:
        """The run's environment: the live one, GOOD's variables where their moves are not
        applied (a location of the lock's rebased into ``place``), the run's caches."""
        env = dict(self.sides.environ)
        room = Root(place, what="a variable's folder")
        for move in self.moves:
            if move.kind == "env" and move not in applied:
                _set(env, move.subject, _good_value(move.subject, self.sides.good, room))
        for name in CACHE_VARS:  # the run's own copies, whatever the user's say
            env.pop(name, None)
        env.update(self._caches(applied, room))
        env.update(self._customs(applied, room))
        if tree is not None and self.code is not None and env.get("PYTHONPATH"):
            env["PYTHONPATH"] = _rebased(env["PYTHONPATH"], self.code.root, tree)
        env["PATH"] = commands.off_path(env.get("PATH", ""), self.live)
        return _run.activated(env, venv)

    def _caches(self, applied: frozenset[Move], room: Root) -> dict[str, str]:
        """The variables that point torch and Triton at this run's copies, each cache copied
        from where this trial has it (GOOD's archive, the live folder) or made empty. Every
        folder is the run's own: a lock's paths choose none of them, and only how Triton's
        folder sits in Inductor's is taken from the side the Triton cache comes from."""
        inductor = room.folder("inductor")
        out = {"TORCHINDUCTOR_CACHE_DIR": str(inductor),
               # unset, Triton alone uses TRITON_HOME's; set, nothing of it is the user's
               "TRITON_HOME": str(room.folder("triton-home"))}  # fmt: skip
        side = self._side("triton", applied)
        theirs = side.get("TRITON_CACHE_DIR")
        within = _nested(theirs, side.get("TORCHINDUCTOR_CACHE_DIR")) if theirs else None
        if within is not None:  # inside their Inductor cache: inside the run's copy of it
            out["TRITON_CACHE_DIR"] = str(room.folder(PurePosixPath("inductor", *within)))
        elif theirs:
            out["TRITON_CACHE_DIR"] = str(room.folder("triton"))
        for kind, dest in default_paths(out).items():
            parts = room.inside(dest)
            if parts is None:  # by construction never: the backstop of the rule above
                raise ConfinementError(
                    f"refusing a {kind} cache copy at {dest}: outside {room.path}"
                )
            source = self._source(kind, applied)
            if source is not None and source.is_dir():
                _, left = room.copy_tree(PurePosixPath(*parts), source)
                if left:
                    self._note_links(source, left)
            else:
                room.folder(PurePosixPath(*parts))
        return out

    def _note_links(self, source: Path, left: int) -> None:
        note = (f"{left} symbolic link(s) in {source} lead outside it: not in the trials' "
                "copies, which are never a way into your folders")  # fmt: skip
        if note not in self.notes:
            self.notes.append(note)

    def _customs(self, applied: frozenset[Move], room: Root) -> dict[str, str]:
        """The variables that name a custom cache's folder, each pointed at the run's own
        copy of it: GOOD's or the live one, as this trial has it. Only a cache that moved:
        one that did not is the same in every trial, the user's own folder."""
        out: dict[str, str] = {}
        for i, m in enumerate(m for m in self.moves if m.kind == "caches"):
            key = cache_key(m, self.sides.good)
            if key not in self.namers:
                continue
            source = self._source(key, applied)
            dest = room.folder(f"custom-{i}")
            if source is not None and source.is_dir():
                _, left = room.copy_tree(PurePosixPath(f"custom-{i}"), source)
                if left:
                    self._note_links(source, left)
            out.update(dict.fromkeys(self.namers[key], str(dest)))
        return out

    def _places(self, applied: frozenset[Move]) -> list[standin.Place]:
        """The custom caches a trial's copy stands in for while it runs (``--cache-dir``):
        only one that moved, as :meth:`_customs`."""
        keys = (cache_key(m, self.sides.good) for m in self.moves if m.kind == "caches")
        return [
            standin.Place(folder=Path(key.removeprefix("custom:")),
                          source=self._source(key, applied))
            for key in keys if key in self.placed
        ]  # fmt: skip

    def _move(self, key: str) -> Move | None:
        return next(
            (m for m in self.moves
             if m.kind == "caches" and cache_key(m, self.sides.good) == key), None,
        )  # fmt: skip

    def _side(self, kind: str, applied: frozenset[Move]) -> Mapping[str, str]:
        """The environment the cache of ``kind`` comes from: GOOD's when its move is not
        applied, else the live one."""
        move = self._move(kind)
        if move is not None and move not in applied:
            return self.sides.good.environ
        return self.sides.environ

    def _source(self, kind: str, applied: frozenset[Move]) -> Path | None:
        move = self._move(kind)
        if move is not None and move not in applied:
            return self.warm.get(kind)
        from envguard.drift.caches import key

        live = next((c for c in self.sides.bad.caches if key(c) == kind and c.exists), None)
        return Path(live.path) if live is not None else None


class Untouched:
    """The user's cache folders, kept as they were before the first trial.

    A cache copied for a trial still names the folder it was built in: Inductor's compiled
    code records its kernels' paths, and torch writes each kernel's autotuning result
    (``.best_config``) beside that path, so a trial's torch writes into the user's cache,
    recreating it where it was deleted (seen on the H200: 17 files in the GOOD trial). After
    every run, an autotuning result new in a user's cache folder, in a folder that a copy the
    trials were given holds (``xq/<hash>.best_config`` beside ``xq/cxq3dj….py``), is removed,
    and the folders made for it; anything else new there is another writer's (a job sharing
    ``/tmp/torchinductor_$USER``, the user) and stays, said. A changed file is said, since
    nothing can put it back. A folder that holds the repository, the work folder or the home
    folder is never swept: a lock can name any path as its cache.
    """

    def __init__(self, copies: Mapping[Path, Iterable[Path]], spared: Iterable[Path]) -> None:
        """``copies``: each cache folder of the user's → the folders the trials copy it from
        (GOOD's unpacked archive, or the folder itself); ``spared``: what no sweep may touch."""
        kept = list(spared)
        sources: dict[Path, list[Path]] = {}
        for folder, copied in copies.items():
            root = _fs.normal(folder)
            if not any(_fs.is_inside(p, root) for p in kept):
                sources.setdefault(root, []).extend(_fs.normal(c) for c in copied)
        self.before = {root: _listing(root) for root in sorted(sources)}
        # the folders the trials' copies hold, where their kernels lie (a live cache copied
        # is its own listing, read once)
        self.named: dict[Path, set[str]] = {}
        for root, copied in sources.items():
            listings = (self.before[root] if c == root else _listing(c) for c in copied)
            self.named[root] = {_folder(rel) for listed in listings if listed for rel in listed[0]}
        # the folders above a cache that is gone, up to the first that is there: torch makes
        # them when it writes the cache back (a deleted /x/cache with its /x/cache/inductor)
        self.made = {root: _fs.missing_parents(root) for root in self.before}
        self.removed = dict.fromkeys(self.before, 0)  # files removed, all runs together
        self.others = dict.fromkeys(self.before, 0)  # new files left (the most after a run)
        self.changed = dict.fromkeys(self.before, 0)  # files changed (the most in one run)

    def sweep(self) -> None:
        """After a run: the folders as they were, but for what another wrote or it changed."""
        for root, before in self.before.items():
            removed, others, changed = self._sweep(root, before)
            self.removed[root] += removed
            self.others[root] = max(self.others[root], others)
            self.changed[root] = max(self.changed[root], changed)

    def notes(self) -> list[str]:
        return [_touched_note(root, self.removed[root], self.others[root], self.changed[root])
                for root in self.before
                if self.removed[root] or self.others[root] or self.changed[root]]  # fmt: skip

    def _sweep(self, root: Path, before: _Listing | None) -> tuple[int, int, int]:
        now = _listing(root)
        if now is None:
            return 0, 0, 0
        files, dirs = before if before is not None else ({}, set())
        new = [rel for rel in now[0] if rel not in files]
        ours = [rel for rel in new
                if rel.endswith(_BESIDE_KERNEL) and _folder(rel) in self.named[root]]  # fmt: skip
        changed = sum(1 for rel, seen in now[0].items() if rel in files and files[rel] != seen)
        for rel in ours:
            with contextlib.suppress(OSError):
                (root / rel).unlink()
        for rel in sorted(now[1] - dirs, key=len, reverse=True):  # the deepest first
            with contextlib.suppress(OSError):  # one that holds anything else stays
                (root / rel).rmdir()
        if before is None:
            for folder in (root, *self.made[root]):
                with contextlib.suppress(OSError):
                    folder.rmdir()
        return len(ours), len(new) - len(ours), changed


# what torch writes beside a kernel it loads from a cache, at the path the cache names
_BESIDE_KERNEL = ".best_config"


def _folder(rel: str) -> str:
    return rel.rpartition("/")[0]


# a folder's files (relative path → size and mtime) and its folders, or None: not there
_Listing = tuple[dict[str, tuple[int, int]], set[str]]


def _listing(root: Path) -> _Listing | None:
    if not root.is_dir():
        return None
    files: dict[str, tuple[int, int]] = {}
    dirs: set[str] = set()
    for path in root.rglob("*"):  # symlinked folders are not followed
        with contextlib.suppress(OSError):
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISDIR(st.st_mode):
                dirs.add(rel)
            else:
                files[rel] = (st.st_size, st.st_mtime_ns)
    return files, dirs


def _touched_note(root: Path, removed: int, others: int, changed: int) -> str:
    said = []
    if removed:
        said.append(f"{removed} file(s) the trials' command wrote into your cache {root} were "
                    "removed")  # fmt: skip
    if changed:
        said.append(f"{changed} file(s) it changed in your cache {root} could not be put back")
    why = " (a cache copied elsewhere still names the folder it was built in)" if said else ""
    if others:
        said.append(f"{others} other new file(s) in your cache {root} were left: none is a "
                    "trial's autotuning result, so another job may have written them")  # fmt: skip
    return "; ".join(said) + why


def _sources(sides: Sides, overrides: Overrides) -> tuple[Overrides, str]:
    """Where every trial's pins come from, decided once for GOOD's and BAD's pins together
    (as restore decides it for one lock: offline, a wheelhouse holding every pin is asked
    alone), so that no trial lists the wheelhouse again; and why, when envguard decided."""
    from envguard.restore import wheelhouse

    where = Path(sides.good.venv.path)
    pins = [p for snap in (sides.good, sides.bad)
            for p in plan_for(snap, where, None, overrides).pins]  # fmt: skip
    return wheelhouse.sources(sides.good.python.version, overrides, pins)


def _exact(pin: Pin) -> Pin:
    """PyPI's torch says 2.11.0 in its METADATA, and ``torch==2.11.0`` admits 2.11.0+cu128
    too, which uv prefers when a wheelhouse holds both: a trial's pin of an unlabelled
    torch-family build is the exact string (``===``)."""
    name, sep, version = pin.requirement.partition("==")
    if sep and name in catalog.BUILDS and "+" not in version and not version.startswith("="):
        return dataclasses.replace(pin, requirement=f"{name}==={version}")
    return pin


def _editable_in(pin: Pin, root: Path, tree: Path) -> Pin:
    """A project installed editable from the user's repository (``uv pip install -e .``, the
    usual layout) is installed from the trial's copy: else every trial imports the working
    tree, BAD's patch included, and the code's moves change nothing."""
    editable, sep, path = pin.requirement.partition("-e ")
    if editable or not sep:
        return pin
    rebased = _in_tree(path, root, tree)
    return pin if rebased == path else dataclasses.replace(pin, requirement=f"-e {rebased}")


def built_versions(venv: Path) -> dict[str, str]:
    """Every distribution's version in ``venv``, torch-family ones as their version.py says
    (2.11.0+cu130). Its distributions only, as snapshot reads them: a whole snapshot probes
    the GPU for every trial."""
    from envguard.probes import distributions, torch
    from envguard.probes.venv import locate

    site = locate(venv).site_packages
    return {
        d.name: torch.probe(site, d).version if d.name in catalog.BUILDS else d.version
        for d in distributions.scan(site)[0]
    }


def _check_built(lock: Snapshot, venv: Path) -> None:
    """The venv holds the trial's versions (torch's as its version.py says): a trial is the
    environment it is said to be, or it says nothing."""
    from envguard.versions import same

    built = built_versions(venv)
    wrong = [f"{n} {built.get(n, 'absent')} for {v}" for n, v in lock.versions().items()
             if not same(built.get(n, ""), v)]  # fmt: skip
    if wrong:
        raise Unbuildable(f"uv installed {', '.join(wrong[:3])}")


def _set(env: dict[str, str], name: str, value: str | None) -> None:
    if value is None:
        env.pop(name, None)
    else:
        env[name] = value


def _good_value(name: str, good: Snapshot, room: Root) -> str | None:
    """GOOD's value of ``name`` for a run: a folder or file the lock names is the run's own
    (``room``'s), since a lock never chooses where anything is written."""
    value = good.environ.get(name)
    if value is None:
        return None
    role = variables.role(name, value)
    if role == "folder":
        return str(room.folder(PurePosixPath("locations", name)))
    if role == "file":  # its own name kept: NCCL fills in nccl.%h.%p, the log reader looks
        base = PurePosixPath(value).name
        ok = base not in ("", ".", "..") and "\0" not in base
        return str(room.folder(PurePosixPath("locations", name)) / (base if ok else "file"))
    return value


def _nested(triton: str, inductor: str | None) -> tuple[str, ...] | None:
    """Where Triton's folder sits in Inductor's, as parts (``..`` folded by name, as the
    lock's machine would read it), or None when it is not inside."""
    if not inductor:
        return None
    try:
        return _fs.normal(Path(triton)).relative_to(_fs.normal(Path(inductor))).parts
    except ValueError:
        return None


def _rebased(value: str, root: Path, tree: Path) -> str:
    """PYTHONPATH's entries inside the user's repository, pointed at the trial's copy: the
    trial imports its own code, not the working tree's."""
    return os.pathsep.join(_in_tree(entry, root, tree) for entry in value.split(os.pathsep))


def _in_tree(path: str, root: Path, tree: Path) -> str:
    """A path inside the user's repository as the trial's copy has it; one the copy lacks (a
    data folder git ignores) stays the working tree's, which is the only one there is."""
    try:
        rel = Path(path).absolute().relative_to(root)
    except ValueError:
        return path
    return str(tree / rel) if (tree / rel).exists() else path


def _command_in(argv: tuple[str, ...], root: Path, tree: Path) -> tuple[str, ...]:
    """The command's absolute paths inside the user's repository (``torchrun $PWD/train.py``,
    ``--config=/repo/conf.yaml``), pointed at the trial's copy, as PYTHONPATH's are: else
    every trial runs the working tree's script, and the code's moves change nothing."""
    out = []
    for arg in argv:
        flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if value.startswith("/"):
            arg = flag + eq + _in_tree(value, root, tree)
        out.append(arg)
    return tuple(out)


def _opaque_note(wrapper: str) -> str:
    return (
        f"`{wrapper}` runs as it is: envguard cannot read into it to tell whether it runs each "
        "trial's venv or reaches the live one (name the interpreter in the command, "
        "`python bench.py`, and envguard points it at each trial's)"
    )


def _has_code(sides: Sides) -> bool:
    return sides.good.code is not None and sides.bad.code is not None


# --- the code -------------------------------------------------------------------------------


class _Code:
    """GOOD's and BAD's code: their commits, their patches (BAD's read from git whole: the
    snapshot's may be redacted) and their untracked files."""

    def __init__(self, sides: Sides, moves: tuple[Move, ...], notes: list[str]) -> None:
        good, bad = sides.good.code, sides.bad.code
        assert good is not None and bad is not None
        self.good, self.bad = good, bad
        self.root = Path(bad.root)
        self.moves = {m.subject: m for m in moves if m.kind == "code"}
        repo = _git.open_repo(self.root, required=True)
        if HEAD in self.moves and not _git.commit_exists(repo, good.head):
            raise BisectError(
                f"the lock's commit {good.head[:12]} is not in {self.root}: GOOD's code cannot "
                "be checked out (git fetch it, or pass --repo)"
            )
        self.live_patch = _git.output(repo, *_git.PATCH_CONFIG, *_DIFF)
        if PATCH in self.moves and good.redacted:
            raise BisectError(
                f"the lock's uncommitted patch had {good.redacted} secret line(s) redacted, so "
                "GOOD's code cannot be rebuilt byte for byte"
            )
        self.good_files = self._good_untracked(notes)
        if PATCH in self.moves:
            _links_said(good, notes)
        ignored = _ignored(repo, Path(sides.bad.venv.path), self.root)
        if ignored:
            more = f" and {len(ignored) - 3} more" if ignored[3:] else ""
            notes.append(f"{', '.join(ignored[:3])}{more}: ignored by git, so not in the "
                         "trials' copies of the repository (a command that reads them finds "
                         "them by absolute path)")  # fmt: skip

    def build(self, applied: frozenset[Move], tree: Path, work: Workspace) -> Path:
        # without a HEAD move, what lies between the two commits is envguard's own files
        head = self.good.head if self._left(HEAD, applied) else self.bad.head
        live = not self._left(PATCH, applied)
        work.clone(self.root, head, tree)
        patch = self.live_patch if live else self.good.patch_bytes()
        if patch:
            self._apply(tree, patch, head)
            work.scrub(tree.with_name(tree.name + ".patch"))
        files = self._live_untracked() if live else self.good_files
        room = Root(tree, what="an untracked file")
        for rel, source in files:
            if source.is_symlink() or source.is_file():
                room.copy(rel, source)
        return tree

    def _left(self, subject: str, applied: frozenset[Move]) -> bool:
        """The code's move ``subject`` exists and this trial leaves it as GOOD has it."""
        return subject in self.moves and self.moves[subject] not in applied

    def _apply(self, tree: Path, patch: bytes, head: str) -> None:
        file = tree.with_name(tree.name + ".patch")
        file.write_bytes(patch)
        try:
            _run.run(["git", "-C", str(tree), *_git.PATCH_CONFIG, "apply", "--binary",
                      "--whitespace=nowarn", str(file)], timeout=600)  # fmt: skip
        except CommandError as exc:
            raise Unbuildable(
                f"the uncommitted patch does not apply on {head[:12]}: {exc}"
            ) from None

    def _live_untracked(self) -> list[tuple[str, Path]]:
        return [(u.path, self.root / u.path) for u in self.bad.untracked
                if not self.bad.is_own(u.path)]  # fmt: skip

    def _good_untracked(self, notes: list[str]) -> list[tuple[str, Path]]:
        """GOOD's untracked files: the live file where it is the same (by blob id); any other
        is missing from GOOD, said (a lock records no untracked file's content)."""
        live = {u.path: u.blob for u in self.bad.untracked}
        out: list[tuple[str, Path]] = []
        for u in self.good.untracked:
            if self.good.is_own(u.path):
                continue
            if u.blob and live.get(u.path) == u.blob:
                out.append((u.path, self.root / u.path))
            elif PATCH in self.moves:
                notes.append(f"{u.path}: untracked in the lock, its content not recorded: GOOD's "
                             "trials run without it")  # fmt: skip
        return out


def _links_said(good: CodeState, notes: list[str]) -> None:
    """The symbolic links the lock's patch makes, said; an untracked file of the lock's
    under one of them is refused before any trial (the patch's link would lead its content
    wherever the link points: ``lnk → ~/.ssh`` and ``lnk/authorized_keys``)."""
    links = good.links()
    for u in good.untracked:
        under = next((p for p in links if u.path.startswith(p.rstrip("/") + "/")), None)
        if under is not None:
            raise ConfinementError(
                f"refusing the lock: its untracked file {u.path} lies under {under}, a "
                f"symbolic link its patch makes (to {links[under]}); nothing was written"
            )
    for path, target in links.items():
        notes.append(f"the lock's patch makes {path} a symbolic link to {target}: trials apply "
                     "it as a link and write nothing through it")  # fmt: skip


_TOOL_LITTER = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints")


def _ignored(repo: object, venv: Path, root: Path) -> list[str]:
    """What git ignores in the repository (data/, checkpoints/, .env), folders whole, but the
    venv and the tools' litter: a trial's copy of the code has none of it."""
    listed = _git.output(repo, "ls-files", "--others", "--ignored", "--exclude-standard",
                         "--directory", "-z", check=False)  # fmt: skip
    out = []
    for raw in listed.split(b"\0"):
        path = raw.decode("utf-8", "replace").rstrip("/")
        name = path.rpartition("/")[2]
        if not path or name in _TOOL_LITTER or name.endswith((".pyc", ".egg-info")):
            continue
        if catalog.is_own_file(path):
            continue  # a compile-cache archive kept out of git: envguard's, not the code's data
        if _fs.is_inside(root / path, venv):
            continue  # a uv venv ignores itself from within (its .gitignore: *), file by file
        out.append(path + "/" if raw.endswith(b"/") else path)
    return out


# --- GOOD's caches --------------------------------------------------------------------------


def unpack_warm(
    lock_path: Path,
    good: Snapshot,
    into: Path,
    environ: Mapping[str, str],
    cache_dirs: Iterable[Path] = (),
    store: Path | None = None,
) -> dict[str, Path]:
    """The lock's saved caches, unpacked once into the work folder, as the archive holds
    them (by :func:`envguard.drift.caches.key`): every trial gets a copy. restore --cache
    checks that a cache fits the venv it goes to; a trial's cache is what the venv finds,
    fitting or not, so nothing here asks."""
    from envguard.restore import cache_archive

    blind = dataclasses.replace(good, torch=None, torch_family=(), packages=(), gpu=GpuState())
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(into / "inductor"),
        "TRITON_CACHE_DIR": str(into / "triton"),
    }
    # a custom cache is unpacked only where a variable names its folder or the user lets a
    # copy stand in it: no trial can have GOOD's copy of any other
    from envguard.drift.caches import key

    movable = {*cache_namers(good, environ), *in_place(good, environ, cache_dirs)}
    customs = [c for c in good.caches if c.kind == "custom" and key(c) in movable]
    into_custom = {c.path: into / f"custom-{i}" for i, c in enumerate(customs)}
    unpacked = cache_archive.restore(
        lock_path, good, blind, env, custom_into=into_custom, store=store
    )
    keys = {str(_fs.normal(into_custom[c.path])): key(c) for c in customs}
    return {keys.get(u.path, u.kind): Path(u.path) for u in unpacked}
