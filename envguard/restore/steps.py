"""``envguard restore`` as one decision in the core: which steps, in which order, and what
the user is told when a later step fails after an earlier one changed something.

Steps run venv → caches → code. Each is done if it can be, whatever another did: a cache
built for another torch does not leave the code dirty, and a venv uv cannot build does not
keep the caches or the code from being put back. Each finished step is reported
(``on_step``) as soon as it is done, so that a stash of the user's work is always said; a
step that could not be done is reported with its reason (:class:`PartFailed`). The exit code
is 0 when every step was done, :data:`PARTLY` when some were and some not, else the failed
step's own (1 not restored, 2 error).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envguard import exits, uv
from envguard.errors import EnvguardError, NotRestored, RestoreError
from envguard.model import Snapshot
from envguard.record import Record
from envguard.restore import build
from envguard.restore import caches as cache_part
from envguard.restore import code as code_part
from envguard.restore.caches import CacheStep
from envguard.restore.code import CodeStep, WorkMoved
from envguard.restore.plan import Overrides, Plan, plan, target_path

if TYPE_CHECKING:
    from envguard.journal import Entry as JournalEntry

PARTLY = exits.PARTLY  # some of the asked parts were restored, some not


@dataclass(frozen=True, kw_only=True)
class PartFailed(Record):
    """A part of the restore that was not done, and why; the others went on."""

    part: str  # "venv", "caches" or "code"
    reason: str
    exit_code: int


Step = build.Outcome | CacheStep | CodeStep | WorkMoved | PartFailed


@dataclass(frozen=True, kw_only=True)
class Request:
    lock_path: Path
    lock: Snapshot
    venv: Path | None = None
    repo: Path | None = None
    overrides: Overrides = field(default_factory=Overrides)
    venv_step: bool = True
    caches_step: bool = False
    code_step: bool = False
    dry_run: bool = False
    rebuild: bool = False
    force: bool = False
    verify_import: bool = False
    python: str | None = None
    allow_missing: bool = False  # build without the packages that cannot be pinned
    split: str | None = None  # the old venv becomes this tool instead of a backup
    lockfiles: Path = Path("lockfiles")  # where a split tool's lock goes
    cache_dirs: tuple[Path, ...] = ()  # custom cache folders the user lets the lock name
    cache_store: Path | None = None  # the project's cache store: the archive may be there

    @property
    def target(self) -> Path:
        return target_path(self.venv or Path(self.lock.venv.path))


@dataclass(frozen=True, kw_only=True)
class Restored(Record):
    lock: str
    dry_run: bool = False
    plan: Plan | None = None
    venv: build.Outcome | None = None
    caches: CacheStep | None = None
    code: CodeStep | None = None
    saved: str | None = None  # the stash of the user's work, said even when code failed
    failed: tuple[PartFailed, ...] = ()  # the parts not done, each with its reason
    error: str | None = None  # what was not restored, in one line
    exit_code: int = 0

    def done_parts(self) -> list[str]:
        """The parts restored, or in a dry run the parts that would be (the plan is the
        venv's)."""
        venv = self.venv if not self.dry_run else self.plan
        return [p for p, step in (("venv", venv), ("caches", self.caches),
                                  ("code", self.code)) if step is not None]  # fmt: skip


def prepare(req: Request) -> tuple[Plan | None, bool]:
    """The plan of the venv step (None without one), and whether it would change nothing."""
    if not req.venv_step:
        return None, False
    _refuse_what_is_not_a_venv(req.target)
    split_to = ""
    if req.split:
        from envguard import tools

        split_to = str(tools.check_new(req.target, req.split))
    current = _current(req.target)
    the_plan = plan(req.lock, req.target, current, req.overrides, _journal(req.lock_path))
    if req.split:
        the_plan = replace(the_plan, split=req.split, split_to=split_to)
    if the_plan.skipped and not (req.allow_missing or req.dry_run):
        from envguard.output.human import skipped_line

        raise NotRestored(
            f"{len(the_plan.skipped)} of the lock's packages cannot be pinned "
            f"({'; '.join(map(skipped_line, the_plan.skipped[:3]))}): nothing was changed; "
            "--allow-missing builds the venv without them"
        )
    unchanged = not req.rebuild and build.matches(req.lock, current, the_plan)
    if req.split and (unchanged or not the_plan.replaces_existing):
        raise NotRestored(
            f"nothing to split: {req.target} "
            + ("already matches the lock" if unchanged else "does not exist")
        )
    if not unchanged:  # the plan names the interpreter the build will run, dry run or not
        interpreter, found_by = uv.interpreter_for(the_plan.python, req.python)
        the_plan = replace(the_plan, interpreter=interpreter, found_by=found_by)
    return the_plan, unchanged


def perform(
    req: Request,
    the_plan: Plan | None,
    unchanged: bool,
    *,
    on_step: Callable[[Step], None] | None = None,
    progress: build.Progress | None = None,
) -> Restored:
    result = Restored(lock=str(req.lock_path), dry_run=req.dry_run, plan=the_plan)
    tell = on_step or (lambda step: None)
    parts_asked: list[tuple[str, Callable[[Restored], Restored]]] = []
    if the_plan is not None and not req.dry_run:
        parts_asked.append(("venv", lambda r: _venv(req, the_plan, unchanged, r, tell, progress)))
    if req.caches_step:
        # a dry run checks the caches against the venv the real run will have restored
        rebuilds = req.dry_run and the_plan is not None and not unchanged
        parts_asked.append(("caches", lambda r: _caches(req, r, tell, rebuilds)))
    saved: list[str | None] = [None]  # the stash of the user's work, said even when code failed
    if req.code_step:
        parts_asked.append(("code", lambda r: _code(req, r, tell, saved)))
    for name, part in parts_asked:
        try:
            result = part(result)
        except EnvguardError as exc:
            failed = PartFailed(part=name, reason=str(exc), exit_code=exc.exit_code)
            result = replace(result, failed=(*result.failed, failed))
            if len(parts_asked) > 1:  # alone, the error line says it
                tell(failed)
    return _verdict(replace(result, saved=saved[0]))


def _verdict(result: Restored) -> Restored:
    if not result.failed:
        return result
    first = result.failed[0]
    if not result.done_parts():
        return replace(result, error=first.reason, exit_code=first.exit_code)
    done = _and(result.done_parts())
    if result.dry_run:  # nothing was restored: say what would be
        why = "; ".join(f"{f.part} would not be: {f.reason}" for f in result.failed)
        error = f"partly restorable: {done} would be restored; {why}"
    else:
        why = "; ".join(f"{f.part} not restored: {f.reason}" for f in result.failed)
        error = f"partly restored: {done} restored; {why}"
    return replace(result, error=error, exit_code=PARTLY)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _venv(
    req: Request,
    the_plan: Plan,
    unchanged: bool,
    result: Restored,
    tell: Callable[[Step], None],
    progress: build.Progress | None,
) -> Restored:
    outcome = (
        build.Outcome(venv=str(req.target), unchanged=True, plan=the_plan)
        if unchanged
        else build.execute(
            req.lock,
            the_plan,
            force=req.force,
            verify_import=req.verify_import,
            progress=progress,
        )
    )
    if req.split and outcome.backup:
        outcome = _split(req, outcome)
    tell(outcome)
    return replace(result, venv=outcome)


def _caches(
    req: Request, result: Restored, tell: Callable[[Step], None], rebuilds: bool
) -> Restored:
    # --all restores the caches that were saved; with none saved there is nothing to do
    optional = req.venv_step and req.code_step
    step = cache_part.put_back(
        req.lock_path, req.lock, req.target, dry_run=req.dry_run, optional=optional,
        allowed=req.cache_dirs, rebuilds_venv=rebuilds, store=req.cache_store,
    )  # fmt: skip
    tell(step)
    return replace(result, caches=step)


def _code(
    req: Request, result: Restored, tell: Callable[[Step], None], saved: list[str | None]
) -> Restored:
    def moved(stash: str | None) -> None:
        saved[0] = stash
        tell(WorkMoved(stash=stash))

    code = code_part.put_back(req.lock_path, req.lock, req.repo, dry_run=req.dry_run, on_work=moved)
    tell(code)
    return replace(result, code=code)


def _split(req: Request, outcome: build.Outcome) -> build.Outcome:
    """The old venv, moved aside by the swap, becomes the tool: nothing is downloaded again
    and the tool keeps what it ran with."""
    from envguard import tools

    assert req.split and outcome.backup
    try:
        tool = tools.adopt(req.target, req.split, Path(outcome.backup), req.lockfiles)
    except (OSError, EnvguardError) as exc:
        raise NotRestored(
            f"the venv is restored, but the old one could not become tool {req.split} ({exc}): "
            f"it is kept at {outcome.backup}"
        ) from exc
    return replace(outcome, backup=None, tool=tool.path)


def _refuse_what_is_not_a_venv(target: Path) -> None:
    """Restore replaces a venv and nothing else: a project folder, a file or a dataset at
    the path stays where it is, whatever a lockfile or a mistyped --venv says."""
    from envguard.errors import VenvError
    from envguard.probes.venv import locate

    if not target.exists() and not target.is_symlink():
        return
    if target.is_dir() and not any(target.iterdir()):
        return  # an empty folder: nothing to lose
    try:
        located = locate(target)
    except VenvError:
        located = None
    if located is None or located.info.kind != "venv":
        what = "a folder" if target.is_dir() else "a file" if target.exists() else "a broken link"
        kind = f"a {located.info.kind}" if located else what
        raise RestoreError(
            f"{target} is {kind}, not a venv: restore replaces venvs only and will not move "
            "it aside; pass --venv NEW_PATH"
        )


def _journal(lock_path: Path) -> list[JournalEntry]:
    """The lock's install journal, for what goes away; a damaged one leaves it to the
    requirement graph (``envguard log`` names the bad line)."""
    from envguard import journal
    from envguard.errors import JournalError

    try:
        return journal.read(journal.path_for(lock_path))
    except (JournalError, OSError):
        return []


def _current(venv: Path) -> Snapshot | None:
    from envguard import snapshot
    from envguard.errors import VenvError

    if not venv.exists():
        return None
    try:
        return snapshot.take(venv, default_caches=False, with_code=False)
    except VenvError:
        return None
