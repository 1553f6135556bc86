"""``envguard restore``: rebuild the venv from the lock with uv, then its caches and code
(:mod:`envguard.restore.steps`).

In two halves, so that the plan is shown, and the replacing of a venv confirmed, before
anything changes: :func:`prepare` reads the lock and plans the venv step; :func:`restore` does
the parts asked, telling each step as it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from envguard import lockfile, targets
from envguard.config import Config
from envguard.restore import steps as core
from envguard.restore.build import Progress
from envguard.restore.plan import Overrides
from envguard.results.restore import RestoreDone, RestorePlanned


def prepare(
    cfg: Config,
    lock: Path | None,
    *,
    code: bool = False,
    cache: bool = False,
    everything: bool = False,
    cache_dirs: Sequence[Path] = (),
    overrides: Overrides | None = None,
    venv: Path | None = None,
    repo: Path | None = None,
    dry_run: bool = False,
    rebuild: bool = False,
    force: bool = False,
    verify_import: bool = False,
    python: str | None = None,
    allow_missing: bool = False,
    split: str | None = None,
) -> RestorePlanned:
    """``code``, ``cache``: only those parts; ``everything``: the venv, then the caches and
    the code; none of them: the venv. ``cache_dirs``: custom cache folders the lock may name
    and ``--cache`` fill, besides the project's."""
    path = targets.lock_path(lock, venv, cfg)
    locked = lockfile.read(path)
    if venv is None and cfg.venv is not None and not Path(locked.venv.path).exists():
        venv = cfg.venv  # a fresh checkout: the project's venv is built where it names it
    req = core.Request(
        lock_path=path, lock=locked, venv=venv, repo=repo,
        overrides=overrides or Overrides(), venv_step=everything or not (code or cache),
        caches_step=everything or cache, code_step=everything or code, dry_run=dry_run,
        rebuild=rebuild, force=force, verify_import=verify_import, python=python,
        allow_missing=allow_missing, split=split, lockfiles=cfg.lockfiles,
        cache_dirs=(*cache_dirs, *cfg.cache_dirs), cache_store=cfg.cache_store,
    )  # fmt: skip
    the_plan, unchanged = core.prepare(req)
    return RestorePlanned(request=req, plan=the_plan, unchanged=unchanged)


def restore(
    planned: RestorePlanned,
    *,
    on_step: Callable[[core.Step], None] | None = None,
    progress: Progress | None = None,
) -> RestoreDone:
    """The parts asked, each told to ``on_step`` as soon as it is done (a stash of the
    user's work the moment it is made)."""
    result = core.perform(
        planned.request, planned.plan, planned.unchanged, on_step=on_step, progress=progress
    )
    return RestoreDone(result=result)
