"""The command line: parse, call the core, render, exit (0 clean, 1 drift, 2 error)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envguard import __version__

if TYPE_CHECKING:
    from envguard import journal
    from envguard import restore as restore_mod
    from envguard.model import Snapshot

_PATH = click.Path(path_type=Path)


def _index_options(command: Callable[..., None]) -> Callable[..., None]:
    """--index-url, --extra-index-url, --find-links, --offline: shared by restore and export."""
    for option in reversed(
        (
            click.option("--index-url", help="Replace the inferred indexes with this one."),
            click.option("--extra-index-url", multiple=True, help="Another index (repeatable)."),
            click.option("--find-links", multiple=True, help="A local wheelhouse (repeatable)."),
            click.option(
                "--offline", is_flag=True, help="No network: uv's cache and --find-links."
            ),
            click.option(
                "--no-index", is_flag=True, help="Ask no index: --find-links and uv's cache."
            ),
        )
    ):
        command = option(command)
    return command


def _overrides(
    index_url: str | None,
    extra_index_url: tuple[str, ...],
    find_links: tuple[str, ...],
    offline: bool,
    no_index: bool,
) -> restore_mod.Overrides:
    from envguard.restore import Overrides

    return Overrides(
        index_url=index_url,
        extra_index_urls=extra_index_url,
        find_links=find_links,
        offline=offline,
        no_index=no_index,
    )


@contextmanager
def _errors() -> Iterator[None]:
    """The one error boundary: every error becomes one line and its exit code (2, or 1 for
    "not restored"), never a traceback; ENVGUARD_DEBUG=1 shows the traceback too."""
    import os

    from envguard.errors import EnvguardError, NotRestored

    debug = os.environ.get("ENVGUARD_DEBUG", "") not in ("", "0")
    try:
        yield
    except (SystemExit, click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        raise
    except KeyboardInterrupt:
        _fail("interrupted", code=130)
    except Exception as exc:
        if debug:
            import traceback

            traceback.print_exc()
        if isinstance(exc, NotRestored):
            _fail(f"not restored: {exc}", code=exc.exit_code)
        elif isinstance(exc, EnvguardError):
            _fail(str(exc), code=exc.exit_code)
        elif isinstance(exc, OSError):
            _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        else:
            hint = "" if debug else "; ENVGUARD_DEBUG=1 shows where"
            _fail(f"internal error: {type(exc).__name__}: {exc} (a bug in envguard{hint})")


def _fail(message: str, code: int = 2) -> None:
    from envguard import render

    render.error_line(message)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="envguard")
def cli() -> None:
    """Snapshot a known-good training environment, explain drift, put it back."""


@cli.command()
@click.option(
    "--venv", type=_PATH, help="The environment to read (default: $VIRTUAL_ENV, ./.venv)."
)
@click.option("--repo", type=_PATH, help="The training code's git repo (default: the one here).")
@click.option(
    "--cache-dir",
    "cache_dirs",
    type=_PATH,
    multiple=True,
    help="Another compile cache to fingerprint (repeatable).",
)
@click.option("--no-default-caches", is_flag=True, help="Skip the Inductor and Triton caches.")
@click.option(
    "-o",
    "--output",
    type=_PATH,
    help="Lockfile path; %h is the hostname, %j $SLURM_JOB_ID, %r the rank "
    "(default: lockfiles/NAME.envguard.toml).",
)
@click.option("--name", help="Snapshot name (default: the venv's prompt or folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as a JSON envelope.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the lockfile's path.")
@click.option("--save-cache", is_flag=True, help="Also archive the compile caches beside it.")
def snapshot(
    venv: Path | None,
    repo: Path | None,
    cache_dirs: tuple[Path, ...],
    no_default_caches: bool,
    output: Path | None,
    name: str | None,
    as_json: bool,
    quiet: bool,
    save_cache: bool,
) -> None:
    """Record the environment in a lockfile."""
    from envguard import lockfile, render
    from envguard import snapshot as snap_mod
    from envguard.probes.venv import default_venv_path

    with _errors():
        with render.progress(enabled=not as_json and sys.stderr.isatty()) as step:
            snap = snap_mod.take(
                default_venv_path(venv),
                repo=repo,
                repo_required=repo is not None,
                cache_dirs=cache_dirs,
                default_caches=not no_default_caches,
                name=name,
                progress=step,
            )
        path = lockfile.expand_output(output, snap) if output else lockfile.default_path(snap.name)
        lockfile.write(path, snap)
        if save_cache:
            from envguard._units import human_bytes
            from envguard.restore import cache_archive

            archive, size = cache_archive.save(snap, path)
            click.echo(f"saved the compile caches to {archive} ({human_bytes(size)})", err=True)
        if as_json:
            click.echo(render.envelope("snapshot", {"lockfile": str(path), **snap.to_dict()}, 0))
        elif quiet:
            click.echo(str(path))
            for note in snap.warnings:
                click.echo(f"warning: {note}", err=True)
        else:
            render.snapshot_summary(snap, str(path))


@cli.command()
@click.argument("locks", nargs=-1, type=_PATH)
@click.option("--venv", type=_PATH, help="The live environment to compare (default: as snapshot).")
@click.option("--repo", type=_PATH, help="The live git repo (default: here, else the lock's).")
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning", "any"]),
    default="warning",
    show_default=True,
    help="The least severe change that counts as drift (exit 1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as a JSON envelope.")
@click.option("--expand", is_flag=True, help="List the packages of each install group.")
@click.option("--show-patch", is_flag=True, help="Print uncommitted changes not in the snapshot.")
def diff(
    locks: tuple[Path, ...],
    venv: Path | None,
    repo: Path | None,
    fail_on: str,
    as_json: bool,
    expand: bool,
    show_patch: bool,
) -> None:
    """Compare LOCK with the live environment, or LOCK_A with LOCK_B."""
    from envguard import drift, lockfile, render

    if len(locks) > 2:
        raise click.UsageError("give at most two lockfiles: LOCK, or LOCK_A LOCK_B")
    with _errors():
        if len(locks) == 2:
            from envguard import snapshot

            old, path = lockfile.read(locks[0]), locks[0]
            new = snapshot.stored_against(old, lockfile.read(locks[1]))
        else:
            old, new, path = _lock_and_live(locks[0] if locks else None, venv, repo, not as_json)
        report = drift.compare(old, new, _journal_for(path))
        fails = report.fails(fail_on)
        code = 1 if fails else 0
        if as_json:
            click.echo(render.envelope("diff", report.to_dict(), code))
        else:
            render.diff_report(report, expand=expand, show_patch=show_patch, fails=fails)
    sys.exit(code)


def _lock_and_live(
    lock: Path | None, venv: Path | None, repo: Path | None, show: bool
) -> tuple[Snapshot, Snapshot, Path]:
    from envguard import render, snapshot, targets

    path, old, venv_path = targets.lock_for(lock, venv)
    with render.progress(enabled=show and sys.stderr.isatty()) as step:
        new = snapshot.live_for(old, venv_path, repo=repo, lock_path=path, progress=step)
    return old, new, path


def _journal_for(lock: Path) -> list[journal.Entry]:
    """The lock's install journal; a damaged one is a warning here (``log`` fails on it)."""
    from envguard import journal as journal_mod
    from envguard import render
    from envguard.errors import LockfileError

    try:
        return journal_mod.read(journal_mod.path_for(lock))
    except LockfileError as exc:
        render.warning_line(f"{exc}; causes are inferred instead")
        return []


@cli.command()
@click.argument("lock", type=_PATH)
@click.option("--venv", type=_PATH, help="The venv to rebuild (default: the lock's).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before replacing the venv.")
@_index_options
@click.option("--python", "python", help="The interpreter to build with (a path or a version).")
@click.option("--rebuild", is_flag=True, help="Rebuild even if the venv already matches.")
@click.option("--force", is_flag=True, help="Restore even while processes use the venv.")
@click.option("--verify-import", is_flag=True, help="Also import torch in the new venv.")
@click.option("--code", is_flag=True, help="Only the repo: the snapshot's HEAD and patch.")
@click.option("--repo", type=_PATH, help="The repo for --code (default: the lock's).")
@click.option("--cache", is_flag=True, help="Only the saved compile caches, if they fit.")
@click.option("--all", "everything", is_flag=True, help="The venv, then the caches and code.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as a JSON envelope.")
def restore(
    lock: Path,
    venv: Path | None,
    dry_run: bool,
    yes: bool,
    index_url: str | None,
    extra_index_url: tuple[str, ...],
    find_links: tuple[str, ...],
    offline: bool,
    no_index: bool,
    python: str | None,
    rebuild: bool,
    force: bool,
    verify_import: bool,
    code: bool,
    repo: Path | None,
    cache: bool,
    everything: bool,
    as_json: bool,
) -> None:
    """Rebuild the venv of LOCK with uv: exact pins, verified, the old venv kept."""
    from envguard import lockfile, render
    from envguard.restore import command

    with _errors():
        req = command.Request(
            lock_path=lock,
            lock=lockfile.read(lock),
            venv=venv,
            repo=repo,
            overrides=_overrides(index_url, extra_index_url, find_links, offline, no_index),
            venv_step=everything or not (code or cache),
            caches_step=everything or cache,
            code_step=everything or code,
            dry_run=dry_run,
            rebuild=rebuild,
            force=force,
            verify_import=verify_import,
            python=python,
        )
        plan, unchanged = command.prepare(req)
        if plan is not None and not as_json:
            render.restore_plan(plan, full=dry_run, unchanged=unchanged)
        if plan is not None and plan.replaces_existing and not (yes or dry_run or unchanged):
            if not sys.stdin.isatty():
                raise click.UsageError("restore replaces the venv: pass --yes to confirm")
            click.confirm(f"Replace {plan.venv} (the old venv is kept)?", abort=True)
        with render.progress(enabled=not as_json and sys.stderr.isatty()) as step:
            result = command.run(
                req,
                plan,
                unchanged,
                on_step=None if as_json else render.restore_step,
                progress=step,
            )
        if as_json:
            click.echo(render.envelope("restore", result.to_dict(), result.exit_code))
        elif result.error:
            if result.saved and not result.code:
                render.restore_saved(result.saved)
            render.error_line(("not restored: " if result.exit_code == 1 else "") + result.error)
    sys.exit(result.exit_code)


@cli.command()
@click.option("--venv", type=_PATH, help="Whose backups (default: as snapshot).")
@click.option("--prune", is_flag=True, help="Remove all but the newest --keep backups.")
@click.option("--keep", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the backups as JSON.")
def backups(venv: Path | None, prune: bool, keep: int, as_json: bool) -> None:
    """List (and prune) the old venvs restore kept beside a venv."""
    from envguard import render
    from envguard.restore import backups as backups_mod
    from envguard.restore.plan import target_path
    from envguard.targets import venv as venv_for

    with _errors():
        target = target_path(venv_for(venv))
        listed = backups_mod.prune(target, keep) if prune else backups_mod.listing(target)
        _emit(as_json, "backups", listed.to_dict(), 0, lambda: render.backups(listed))


def _emit(as_json: bool, kind: str, result: object, code: int, human: Callable[[], None]) -> None:
    from envguard import render

    if as_json:
        click.echo(render.envelope(kind, result, code))
    else:
        human()


@cli.command()
@click.argument("lock", type=_PATH)
@click.option("--format", "fmt", type=click.Choice(["pylock"]), default="pylock", show_default=True)
@click.option("-o", "--output", type=_PATH, default=Path("pylock.toml"), show_default=True)
@click.option("--resolve", is_flag=True, help="Ask the inferred indexes for wheels and hashes.")
@_index_options
def export(
    lock: Path,
    fmt: str,
    output: Path,
    resolve: bool,
    index_url: str | None,
    extra_index_url: tuple[str, ...],
    find_links: tuple[str, ...],
    offline: bool,
    no_index: bool,
) -> None:
    """Write LOCK's packages as a PEP 751 pylock.toml that `uv pip sync` installs."""
    from envguard import export as export_mod
    from envguard import lockfile

    overrides = _overrides(index_url, extra_index_url, find_links, offline, no_index)
    with _errors():
        export_mod.check_name(output)
        data = export_mod.pylock(lockfile.read(lock), overrides, resolve=resolve)
        export_mod.write(output, data)
        click.echo(f"wrote {output} ({fmt}, PEP 751)")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--venv", type=_PATH, help="The venv the command installs into (default: as snapshot)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the journal record as JSON.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(venv: Path | None, as_json: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND in the venv and journal the drift it caused: envguard run -- uv pip install X."""
    from envguard import journal, protect, render, watch
    from envguard.probes.venv import default_venv_path

    with _errors():
        target = default_venv_path(venv)
        lock_path, locked = watch.lock_of(target)
        watched = watch.run(
            target,
            command,
            journal.path_for(lock_path),
            extra_env=protect.constraint_env(target),
            lock=locked,
        )
        if as_json:
            click.echo(render.envelope("run", watched.entry.to_dict(), watched.exit_code))
        else:
            render.run_summary(watched)
    sys.exit(watched.exit_code)


@cli.command()
@click.option("--venv", type=_PATH, help="Whose journal (default: as snapshot).")
@click.option("--json", "as_json", is_flag=True, help="Print the journal as JSON.")
def log(venv: Path | None, as_json: bool) -> None:
    """List the install journal of a venv."""
    from envguard import journal, render, watch
    from envguard.probes.venv import default_venv_path

    with _errors():
        path = watch.journal_path(default_venv_path(venv))
        entries = journal.read(path)
        result = {"journal": str(path), "entries": [e.to_dict() for e in entries]}
        _emit(as_json, "log", result, 0, lambda: render.journal_table(path, entries))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--venv", type=_PATH, help="The venv to check against (default: as snapshot).")
@click.option("--json", "as_json", is_flag=True, help="Print the forecast as JSON.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def preflight(venv: Path | None, as_json: bool, command: tuple[str, ...]) -> None:
    """What an install would change, before it runs: envguard preflight -- pip install X."""
    from envguard import preflight as pre
    from envguard import render, snapshot
    from envguard.probes.venv import default_venv_path

    with _errors():
        cmd = pre.parse(command)
        target = default_venv_path(pre.venv_of(cmd, venv))
        before = snapshot.take(target, default_caches=False, with_code=False)
        forecast = pre.forecast(before, pre.dry_run(cmd, target))
        code = 1 if forecast.critical() else 0
        result = {"reasons": list(forecast.reasons), **forecast.report.to_dict()}
        _emit(as_json, "preflight", result, code, lambda: render.preflight(forecast))
    sys.exit(code)


@cli.command(name="protect")
@click.argument("lock", type=_PATH)
@click.option("--venv", type=_PATH, help="The venv to protect (default: the lock's).")
@click.option("--package", "packages", multiple=True, help="Also pin this package (repeatable).")
def protect_cmd(lock: Path, venv: Path | None, packages: tuple[str, ...]) -> None:
    """Make installs into the venv unable to replace torch, its CUDA wheels, triton, ..."""
    from envguard import lockfile, protect

    with _errors():
        locked = lockfile.read(lock)
        done = protect.protect(locked, venv or Path(locked.venv.path), packages)
        click.echo(f"protected {done.venv}: {len(done.pins)} pins in {done.constraints}")
        click.echo(
            "pip: always (the venv's pip.conf); uv: when the venv is activated or "
            "through envguard run"
        )


@cli.command(name="unprotect")
@click.option("--venv", type=_PATH, help="The venv (default: as snapshot).")
def unprotect_cmd(venv: Path | None) -> None:
    """Lift envguard protect."""
    from envguard import protect
    from envguard.probes.venv import default_venv_path

    with _errors():
        target = default_venv_path(venv)
        lifted = protect.unprotect(target)
        click.echo(f"unprotected {target}" if lifted else f"{target} was not protected")


@cli.command()
@click.argument("lock", type=_PATH)
@click.argument("snapshots", nargs=-1, required=True, type=_PATH)
@click.option("--all", "show_all", is_flag=True, help="A row for every node, agreeing ones too.")
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning", "any"]),
    default="warning",
    show_default=True,
    help="The least severe change that makes a node drift (exit 1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as a JSON envelope.")
def fleet(
    lock: Path, snapshots: tuple[Path, ...], show_all: bool, fail_on: str, as_json: bool
) -> None:
    """Compare node SNAPSHOTS (files or folders) with LOCK and with each other."""
    from envguard import fleet as fleet_mod
    from envguard import lockfile, render

    with _errors():
        report = fleet_mod.compare(lockfile.read(lock), fleet_mod.expand(snapshots), fail_on)
        code = 1 if report.drifted() else 2 if report.problems else 0
        _emit(
            as_json,
            "fleet",
            report.to_dict(),
            code,
            lambda: render.fleet_report(report, show_all=show_all),
        )
    sys.exit(code)


def main() -> None:
    """Usage errors, like library errors, are one red line and exit 2."""
    try:
        code = cli.main(prog_name="envguard", standalone_mode=False)
    except click.exceptions.Abort:
        _fail("aborted", code=1)
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        sub = f" {ctx.info_name}" if ctx is not None and ctx.parent is not None else ""
        hint = f" (envguard{sub} -h)" if ctx is not None else ""
        _fail(exc.format_message() + hint, code=exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
