"""``envguard restore`` as one decision in the core: which steps, in which order, and what
the user is told when a later step fails after an earlier one changed something.

Steps run venv → caches → code. Each finished step is reported (``on_step``) as soon as it is
done, so that a stash of the user's work is always said, even when the next step fails; the
result carries every finished step and the error that stopped the rest, with its exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from envguard.errors import EnvguardError, NotRestored
from envguard.model import Record, Snapshot
from envguard.restore import build, parts
from envguard.restore.plan import Overrides, Plan, plan, target_path

Step = build.Outcome | parts.CacheStep | parts.CodeStep | parts.WorkMoved


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

    @property
    def target(self) -> Path:
        return target_path(self.venv or Path(self.lock.venv.path))


@dataclass(frozen=True, kw_only=True)
class Result(Record):
    lock: str
    dry_run: bool = False
    plan: Plan | None = None
    venv: build.Outcome | None = None
    caches: parts.CacheStep | None = None
    code: parts.CodeStep | None = None
    saved: str | None = None  # the stash of the user's work, said even when code failed
    error: str | None = None  # what stopped the steps after the finished ones
    exit_code: int = 0


def prepare(req: Request) -> tuple[Plan | None, bool]:
    """The plan of the venv step (None without one), and whether it would change nothing."""
    if not req.venv_step:
        return None, False
    _refuse_what_is_not_a_venv(req.target)
    if req.split:
        from envguard import tools

        tools.check_new(req.target, req.split)
    current = _current(req.target)
    the_plan = plan(req.lock, req.target, current, req.overrides)
    if the_plan.skipped and not (req.allow_missing or req.dry_run):
        raise NotRestored(
            f"{len(the_plan.skipped)} of the lock's packages cannot be pinned "
            f"({'; '.join(the_plan.skipped[:3])}): nothing was changed; --allow-missing "
            "builds the venv without them"
        )
    unchanged = not req.rebuild and build.matches(req.lock, current, the_plan)
    if req.split and (unchanged or not the_plan.replaces_existing):
        raise NotRestored(
            f"nothing to split: {req.target} "
            + ("already matches the lock" if unchanged else "does not exist")
        )
    return the_plan, unchanged


def run(
    req: Request,
    the_plan: Plan | None,
    unchanged: bool,
    *,
    on_step: Callable[[Step], None] | None = None,
    progress: build.Progress | None = None,
) -> Result:
    result = Result(lock=str(req.lock_path), dry_run=req.dry_run, plan=the_plan)
    tell = on_step or (lambda step: None)
    try:
        if the_plan is not None and not req.dry_run:
            outcome = (
                build.Outcome(venv=str(req.target), unchanged=True, plan=the_plan)
                if unchanged
                else build.execute(
                    req.lock,
                    the_plan,
                    force=req.force,
                    verify_import=req.verify_import,
                    python=req.python,
                    progress=progress,
                )
            )
            if req.split and outcome.backup:
                outcome = _split(req, outcome)
            result = replace(result, venv=outcome)
            tell(outcome)
        if req.caches_step:
            # --all restores the caches that were saved; with none saved there is nothing to do
            optional = req.venv_step and req.code_step
            step = parts.caches(
                req.lock_path, req.lock, req.target, dry_run=req.dry_run, optional=optional
            )
            result = replace(result, caches=step)
            tell(step)
        if req.code_step:
            where: list[str | None] = [None]

            def moved(stash: str | None) -> None:
                where[0] = stash
                tell(parts.WorkMoved(stash=stash))

            try:
                code = parts.code(
                    req.lock_path, req.lock, req.repo, dry_run=req.dry_run, on_work=moved
                )
            finally:
                result = replace(result, saved=where[0])
            result = replace(result, code=code)
            tell(code)
    except EnvguardError as exc:
        return replace(result, error=str(exc), exit_code=exc.exit_code)
    return result


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
        raise EnvguardError(
            f"{target} is {kind}, not a venv: restore replaces venvs only and will not move "
            "it aside; pass --venv NEW_PATH"
        )


def _current(venv: Path) -> Snapshot | None:
    from envguard import snapshot
    from envguard.errors import VenvError

    if not venv.exists():
        return None
    try:
        return snapshot.take(venv, default_caches=False, with_code=False)
    except VenvError:
        return None
