"""Rebuild a venv from a lockfile with uv: build beside the old one, verify, swap.

Nothing here replaces the venv before the new one is verified; a venv that already matches
the lock is left alone (no rebuild, no backup) unless asked.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envguard import drift, protect
from envguard import uv as uv_backend
from envguard._run import run
from envguard.errors import CommandError, InterpreterError, NotRestored
from envguard.model import Snapshot
from envguard.record import Record
from envguard.restore import transaction
from envguard.restore.plan import Plan, indexes_for, requirements_text

Progress = Callable[[str, int, int], None]
REQUIREMENTS = "envguard-requirements.txt"  # inside the new venv while it is built


@dataclass(frozen=True, kw_only=True)
class Outcome(Record):
    venv: str
    unchanged: bool = False  # the venv matched the lock: nothing was rebuilt
    backup: str | None = None
    recovered: tuple[str, ...] = ()
    import_check: str | None = None
    protection: str = ""  # "carried over" when the old venv was protected
    tool: str = ""  # restore --split: the tool venv the old venv became (instead of a backup)
    python: str = ""  # the interpreter the venv was built with
    plan: Plan = field(default_factory=lambda: Plan(venv="", python="", pins=(), indexes=""))


def verify(lock: Snapshot, built: Snapshot) -> list[drift.Change]:
    """What differs between the lock and a venv in the areas a venv determines: the packages,
    torch and the CUDA stack."""
    report = drift.compare(lock, built)
    # info-level rows (system libraries outside the venv, another host) do not make it wrong
    return [c for c in report.changes if c.area in drift.VENV_AREAS and c.severity != "info"]


def matches(lock: Snapshot, current: Snapshot | None, the_plan: Plan) -> bool:
    """The current venv already is what the lock says: a restore would change nothing."""
    if current is None or current.venv.problem:
        return False
    return not [c for c in verify(lock, current) if not _skipped(c, the_plan)]


def import_check(python: Path) -> str:
    code = (
        "import torch; print(torch.__version__, 'cuda available' if "
        "torch.cuda.is_available() else 'cuda not available')"
    )
    try:
        return run([str(python), "-c", code], timeout=600).stdout.strip()
    except CommandError as exc:
        raise NotRestored(f"the new venv cannot import torch: {exc}") from exc


def execute(
    lock: Snapshot,
    the_plan: Plan,
    *,
    force: bool = False,
    verify_import: bool = False,
    progress: Progress | None = None,
) -> Outcome:
    """Build, verify and swap in the planned venv with the interpreter the plan names; the
    old one is never lost."""
    from envguard import snapshot
    from envguard.restore import processes

    step = progress or (lambda phase, done, total: None)
    paths = transaction.Paths.for_venv(Path(the_plan.venv), transaction.stamp())
    with transaction.locked(paths):
        recovered = transaction.recover(paths)
        if paths.venv.exists() and not force:
            users = processes.using(paths.venv)
            if users:
                listed = "; ".join(f"pid {u.pid}: {u.command}" for u in users[:5])
                raise NotRestored(f"{paths.venv} is in use ({listed}); stop them or pass --force")
        step("create venv", 0, 1)
        # the plan's, found on this machine; a plan made without one finds it the same way
        interpreter = the_plan.interpreter or uv_backend.interpreter_for(the_plan.python)[0]
        transaction.record(paths, "building")
        try:
            _create(paths.new, interpreter, the_plan, lock.venv.prompt)
            step("install", 0, len(the_plan.pins))
            reqs = paths.new / REQUIREMENTS
            reqs.write_text(requirements_text(the_plan), encoding="utf-8")
            uv_backend.sync(
                paths.new / "bin" / "python", reqs, indexes_for(lock, the_plan.overrides)
            )
            reqs.unlink()
            step("verify", 0, 1)
            transaction.record(paths, "verifying")
            built = snapshot.take(paths.new, default_caches=False, with_code=False, name=lock.name)
            mismatches = [c for c in verify(lock, built) if not _skipped(c, the_plan)]
            if mismatches:
                shown = "; ".join(f"{c.subject}: {c.old} → {c.new}" for c in mismatches[:5])
                raise NotRestored(f"the new venv does not match the lock ({shown})")
            checked = import_check(paths.new / "bin" / "python") if verify_import else None
            carried = _carry_settings(paths.venv, paths.new)
        except BaseException as exc:
            transaction.discard(paths)
            if isinstance(exc, uv_backend.UvError):
                raise NotRestored(str(exc)) from exc
            raise
        step("swap", 0, 1)
        backup = transaction.swap_in(paths)
        transaction.finish(paths)
    return Outcome(
        venv=str(paths.venv),
        backup=str(backup) if backup else None,
        recovered=tuple(recovered),
        import_check=checked,
        protection=carried,
        python=interpreter,
        plan=the_plan,
    )


def _create(path: Path, python: str, the_plan: Plan, prompt: str | None) -> None:
    """A venv of exactly the locked version, with the lock's system-site-packages setting."""
    from envguard.probes.venv import locate

    uv_backend.create_venv(path, python, prompt, system_site_packages=the_plan.system_site_packages)
    got = locate(path).python.version
    if got != the_plan.python:
        shutil.rmtree(path, ignore_errors=True)
        raise InterpreterError(
            f"{python} is Python {got}, and the lock needs {the_plan.python} exactly; "
            "pass --python with an interpreter of that version"
        )


def _carry_settings(old: Path, new: Path) -> str:
    """What the old venv had beside its packages goes to the new one: its pip.conf, and
    envguard protect's pins (their paths name the venv's final place, which stays)."""
    if not old.is_dir():
        return ""
    conf = old / "pip.conf"
    if conf.is_file():
        shutil.copy2(conf, new / "pip.conf")
    pins = old / protect.CONSTRAINTS
    if not pins.is_file():
        return ""
    protect.carry(pins.read_bytes(), new, final=old)
    return "carried over"


def _skipped(change: drift.Change, the_plan: Plan) -> bool:
    """Packages the plan could not pin are reported there, not as a verify failure."""
    names = {s.name for s in the_plan.skipped}
    return change.subject in names or (
        bool(change.members) and all(m.name in names for m in change.members)
    )
