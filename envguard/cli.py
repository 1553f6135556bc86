"""The command line: parse, call the core (:mod:`envguard.commands`), render, exit.

Every command takes ``-q``/``-v`` and ``--color``, and ``--json`` where it has a result: one
versioned document on stdout, also for an error. Exit codes: 0 clean, 1 drift (or "not
restored"), 2 error. Errors are one line on stderr, never a traceback (``ENVGUARD_DEBUG=1``
shows it too).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from envguard import __version__, _fs, exits
from envguard._entry import UI as _UI
from envguard._entry import config as _config
from envguard._entry import emit as _emit
from envguard._entry import errors
from envguard._entry import fail as _fail
from envguard.drift.areas import AREAS, FAIL_ON

if TYPE_CHECKING:
    from envguard.restore.plan import Overrides

_PATH = click.Path(path_type=Path)
_AREAS = ", ".join(AREAS)
F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """Whatever a command changes of the process is put back when it returns, for callers in
    the same process (click's test runner, a notebook, a script calling :func:`cli`): the
    environment (--color and -vv travel as ENVGUARD_COLOR / ENVGUARD_DEBUG, so that the
    processes envguard starts honour them too), the working directory, the umask and the
    SIGINT/SIGTERM handlers (restore and bisect turn SIGTERM into an interrupt)."""
    environ = dict(os.environ)
    cwd = _cwd()
    mask = _fs.umask()
    handlers = _signal_handlers()
    _terminated.clear()
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in environ]:
            del os.environ[key]
        for key, value in environ.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        if cwd is not None and _cwd() != cwd:
            with contextlib.suppress(OSError):
                os.chdir(cwd)
        os.umask(mask)
        _put_back_signal_handlers(handlers)
        if _terminated and not _OWN_PROCESS:
            _pass_on_sigterm()


# Set by main(), envguard's own process: there a SIGTERM ends the command with exit 130, as
# docs/exit-codes.md says. A caller in the same process gets the signal itself instead.
_OWN_PROCESS = False
_terminated: list[int] = []  # the SIGTERM that restore or bisect turned into an interrupt


def _pass_on_sigterm() -> None:
    """The SIGTERM a command caught, once it has put back what it was doing, delivered again
    to the caller's own handler: under ``timeout -s TERM`` a test suite (or a script) that
    called restore in-process ends, as it would have had envguard not been running."""
    import signal

    _terminated.clear()
    signal.raise_signal(signal.SIGTERM)


def _cwd() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # removed under us: nothing to go back to
        return None


def _signal_handlers() -> dict[int, Any]:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set them, so a command elsewhere sets none
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def _put_back_signal_handlers(handlers: dict[int, Any]) -> None:
    import signal

    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


def _common(command: F) -> F:
    """-q/-v and --color on every command (uv's and ruff's conventions)."""

    @click.option("-q", "--quiet", count=True, help="Say less: the verdict only.")
    @click.option("-v", "--verbose", count=True, help="Say more: info rows, tracebacks.")
    @click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default=None,
        help="Colour the output (default: auto; NO_COLOR, FORCE_COLOR honoured).",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, quiet: int, verbose: int, color: str | None, **kwargs: Any) -> Any:
        _UI.command = click.get_current_context().info_name or ""
        _UI.verbosity = verbose - quiet
        _UI.as_json = bool(kwargs.get("as_json"))
        if color:
            os.environ["ENVGUARD_COLOR"] = color
        if verbose > 1:
            os.environ["ENVGUARD_DEBUG"] = "1"
        return command(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print a JSON envelope.")(command)


def _index_options(command: F) -> F:
    """--index-url, --extra-index-url, --find-links, --offline, --no-index."""
    for option in reversed(
        (
            click.option("--index-url", help="Replace the inferred indexes with this one."),
            click.option("--extra-index-url", multiple=True, help="Another index (repeatable)."),
            click.option("--find-links", multiple=True, help="A wheelhouse to add (repeatable)."),
            click.option(
                "--offline", is_flag=True, help="No network: uv's cache and --find-links."
            ),
            click.option("--no-index", is_flag=True, help="Ask no index: --find-links only."),
        )
    ):
        command = option(command)
    return command


_INDEX_NAMES = ("index_url", "extra_index_url", "find_links", "offline", "no_index")


def _overrides(kw: dict[str, Any]) -> Overrides:
    from envguard.restore.plan import Overrides

    return Overrides(
        index_url=kw.pop("index_url"),
        extra_index_urls=kw.pop("extra_index_url"),
        find_links=kw.pop("find_links"),
        offline=kw.pop("offline"),
        no_index=kw.pop("no_index"),
    )


def _errors() -> AbstractContextManager[None]:
    """The error boundary (:func:`envguard._entry.errors`), letting click's own exits by."""
    return errors((click.exceptions.Exit, click.ClickException, click.exceptions.Abort))


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they are defined: the workflow's

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> NoReturn:
        """The error boundary, here so that the entry point and click's test runner share it:
        usage errors, like library errors, are one line and exit 2 (an envelope too under
        --json)."""
        argv = list(sys.argv[1:] if args is None else args)
        extra["standalone_mode"] = False
        _UI.command, _UI.verbosity, _UI.as_json = "", 0, False  # none of the last run's
        try:
            with _process_state_kept():
                code = super().main(argv, prog_name or "envguard", **extra)
        except click.exceptions.Abort:
            _fail("aborted", code=1)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            sub = f" {ctx.info_name}" if ctx is not None and ctx.parent is not None else ""
            hint = f" (envguard{sub} -h)" if ctx is not None else ""
            _UI.as_json = _UI.as_json or "--json" in argv
            _UI.command = _UI.command or (ctx.info_name if ctx is not None and ctx.parent else "")
            _fail(exc.format_message() + hint, code=exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(
    cls=_Group,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "-V", "--version", prog_name="envguard")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Snapshot a known-good training environment, explain drift, put it back.

    \b
    Start with:
      envguard demo        the incident and its cure, in a temporary folder
      envguard snapshot    record the training venv in lockfiles/
      envguard diff        what changed since, and why it matters

    \b
    {exits}
    Shell completion (bash; zsh_source, fish_source for the others):
      eval "$(_ENVGUARD_COMPLETE=bash_source envguard)"
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


# the one table's lines, at the docstring's indent
cli.help = (cli.help or "").replace("{exits}", exits.summary().replace("\n", "\n    "))


@cli.command(short_help="The incident and its cure, offline, in seconds.")
@click.option("--keep", type=_PATH, help="Build in this folder, and keep it.")
@click.option("--bisect", "with_bisect", is_flag=True,
              help="Bisect the project's benchmark too, before the cure.")  # fmt: skip
@_common
def demo(keep: Path | None, with_bisect: bool) -> None:
    """The incident and its cure, on this machine: offline, no GPU, in seconds.

    Builds a small training project in a temporary folder (a venv with a torch built for
    CUDA 12.8, a git repo, a compile cache), snapshots it, replays an inference server's
    install into it, and runs the real diff, restore --all and diff again. With --bisect,
    a bisect of the project's benchmark between the diff and the cure.

    \b
    Exit codes: 0 every step behaved as it should, 1 one did not, 2 error.
    """
    from envguard.demo.acts import play

    with _errors():
        code = play(keep, bisect=with_bisect)
    sys.exit(code)


class _OptionsThenCommand(click.Command):
    """``[OPTIONS] [-- COMMAND...]``: everything before ``--`` is envguard's; the command
    after it, if any, goes to ``ctx.meta["envguard.command"]``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        at = args.index("--") if "--" in args else len(args)
        ctx.meta["envguard.command"] = tuple(args[at + 1 :])
        return click.Command.parse_args(self, ctx, args[:at])

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- COMMAND...]"]


@cli.command(cls=_OptionsThenCommand)
@click.option(
    "--venv",
    type=_PATH,
    help="The venv to record (default: [tool.envguard] venv, the active venv, ./.venv).",
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
    type=click.Path(),  # a str: "DIR/" keeps its slash, and means a folder
    help="Lockfile path, or a folder (DIR/); %h is the hostname, %j $SLURM_JOB_ID, %r the "
    "rank (default: lockfiles/NAME.envguard.toml at the project's root).",
)
@click.option("--name", help="Snapshot name (default: the venv's prompt or folder name).")
@click.option("--save-cache", is_flag=True, help="Also archive the compile caches beside it.")
@click.option("--bench", is_flag=True, help="Also run the benchmark after -- in the venv "
              "and record its known-good speed in the lock.")  # fmt: skip
@click.option("--metric", metavar="REGEX", help="With --bench: the number, the first group of "
              "REGEX in its output (default: exit status 0 is good).")  # fmt: skip
@click.option("--higher-is-better/--lower-is-better", "higher", default=None,
              help="With --bench --metric: which way is better.")  # fmt: skip
@click.option("--unit", default="", help="With --bench: how the number reads (Ktok/s).")
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help="With --bench: how many runs to record (default: 5).")  # fmt: skip
@_json_option
@_common
def snapshot(as_json: bool, **kw: Any) -> None:
    """Record the environment in a lockfile.

    \b
    Examples:
      envguard snapshot                        the training venv, into lockfiles/
      envguard snapshot --venv .venv --save-cache
      envguard snapshot --bench --metric 'tok/s ([0-9.]+)' -- python b.py

    \b
    Exit codes: 0 recorded, 2 error.
    """
    from envguard import _entry

    kw["bench"] = _bench_request(kw)
    with _errors():
        _entry.snapshot(kw)


def _bench_request(kw: dict[str, Any]) -> Any:
    """snapshot's --bench options as a benchmark request (None without --bench); each
    option that means nothing without it is a usage error, not ignored."""
    from envguard.benchmark import RUNS, Request

    command = click.get_current_context().meta.get("envguard.command", ())
    bench, higher = kw.pop("bench"), kw.pop("higher")
    asked = {"--metric": kw.pop("metric"), "--unit": kw.pop("unit"), "--runs": kw.pop("runs"),
             "--higher-is-better": higher is not None, "-- COMMAND": command}  # fmt: skip
    if not bench:
        given = next((name for name, value in asked.items() if value), None)
        if given:
            raise click.UsageError(f"{given} goes with --bench: snapshot --bench -- COMMAND")
        return None
    return Request(  # the rules of what it may hold are Request.checked()'s
        command=command, metric=asked["--metric"] or "", unit=asked["--unit"],
        direction="" if higher is None else "higher" if higher else "lower",
        runs=asked["--runs"] or RUNS,
    )  # fmt: skip


def _judging(command: F) -> F:
    """--fail-on, --only, --ignore: what counts as drift, for diff and fleet."""
    for option in reversed(
        (
            click.option(
                "--fail-on",
                type=click.Choice(FAIL_ON),
                default=None,
                help="The least severe change that counts as drift (default: warning).",
            ),
            click.option(
                "--only", metavar="AREA[,AREA]", help=f"Judge only these areas: {_AREAS}."
            ),
            click.option("--ignore", metavar="AREA[,AREA]", help="Do not judge these areas."),
        )
    ):
        command = option(command)
    return command


@cli.command()
@click.argument("locks", nargs=-1, type=_PATH)
@click.option("--venv", type=_PATH, help="The live environment to compare (default: the lock's).")
@click.option("--repo", type=_PATH, help="The live git repo (default: here, else the lock's).")
@_judging
@click.option("--expand", is_flag=True, help="List the packages of each install group.")
@click.option("--show-patch", is_flag=True, help="Print each code change that differs.")
@click.option(
    "--code/--no-code",
    default=None,
    help="Judge the code (default), or leave it to git (the pre-commit hook's default).",
)
@_json_option
@_common
def diff(
    locks: tuple[Path, ...],
    venv: Path | None,
    repo: Path | None,
    fail_on: str | None,
    only: str | None,
    ignore: str | None,
    expand: bool,
    show_patch: bool,
    code: bool | None,
    as_json: bool,
) -> None:
    """Compare LOCK with the live environment, or LOCK_A with LOCK_B.

    \b
    Examples:
      envguard diff                            the project's lock against its venv
      envguard diff --only torch,cuda --fail-on critical
      envguard diff lockfiles/a.envguard.toml lockfiles/b.envguard.toml

    \b
    Exit codes: 0 no drift, 1 drift (at --fail-on), 2 error.
    """
    from envguard import _entry

    if len(locks) > 2:
        raise click.UsageError("give at most two lockfiles: LOCK, or LOCK_A LOCK_B")
    with _errors():
        _entry.diff(
            {"locks": locks, "venv": venv, "repo": repo, "fail_on": fail_on, "only": only,
             "ignore": ignore, "expand": expand, "show_patch": show_patch, "code": code}
        )  # fmt: skip


@cli.command(short_help="Rebuild the venv from the lock with uv; keep the old one.")
@click.argument("lock", type=_PATH, required=False)
@click.option("--venv", type=_PATH, help="The venv to rebuild (default: the lock's).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before replacing the venv.")
@_index_options
@click.option("--python", "python", help="The interpreter to build with (a path or a version).")
@click.option("--rebuild", is_flag=True, help="Rebuild even if the venv already matches.")
@click.option("--allow-missing", is_flag=True, help="Build without packages that cannot be pinned.")
@click.option("--force", is_flag=True, help="Restore even while processes use the venv.")
@click.option("--verify-import", is_flag=True, help="Also import torch in the new venv.")
@click.option("--code", is_flag=True, help="Only the repo: the snapshot's HEAD and patch.")
@click.option("--repo", type=_PATH, help="The repo for --code (default: the lock's).")
@click.option("--cache", is_flag=True, help="Only the saved compile caches, if they fit.")
@click.option(
    "--cache-dir",
    "cache_dirs",
    type=_PATH,
    multiple=True,
    help="A custom cache folder the lock names that --cache may fill (repeatable; also "
    "cache-dirs in [tool.envguard]).",
)
@click.option("--all", "everything", is_flag=True, help="The venv, then the caches and code.")
@click.option(
    "--split",
    metavar="NAME",
    help="The old venv becomes tool NAME (envguard tool) instead of a backup.",
)
@_json_option
@_common
def restore(lock: Path | None, as_json: bool, yes: bool, **kw: Any) -> None:
    """Rebuild the venv of LOCK (default: the project's) with uv: exact pins, verified, the
    old venv kept.

    \b
    Examples:
      envguard restore lockfiles/train.envguard.toml --dry-run
      envguard restore lockfiles/train.envguard.toml --all --yes
      envguard restore LOCK --find-links /wheels --offline     (air-gapped)
      envguard restore --split datagen    (the polluted venv becomes tool datagen)

    \b
    Exit codes: 0 restored (or already matching), 1 not restored (the old venv is
    untouched), 2 error, 3 partly restored (--all: some parts restored, the others
    not, each said with its reason).
    """
    from envguard.commands import restore as command

    _interrupt_on_sigterm()
    with _errors():
        overrides = _overrides(kw)
        planned = command.prepare(_config(), lock, overrides=overrides, **kw)
        human = _UI.human()
        if not as_json:
            _show(human.restore_plan(planned))
        if planned.replaces and not yes:
            _confirm(planned.replaces)
        with _UI.progress() as step:
            tell = None if as_json else lambda s: step.echo(human.restore_step(s))
            done = command.restore(planned, on_step=tell, progress=step)
        _emit(done, failure=done.failure)


def _show(plan: str) -> None:
    from envguard import _term

    # color=True: its only codes are envguard's, as --color decided; click would strip them
    # off a terminal, --color always included
    click.echo(_term.visible(plan), nl=False, color=True)


def _confirm(venv: str) -> None:
    """Replacing a venv is asked first (the prompt is the screen's); a script, with no one
    to ask, passes --yes."""
    from envguard import _term

    if not sys.stdin.isatty():
        raise click.UsageError("restore replaces the venv: pass --yes to confirm")
    click.confirm(_term.visible(f"Replace {venv} (the old venv is kept)?"), abort=True)


def _interrupt_on_sigterm() -> None:
    """A terminated restore rolls back like an interrupted one (the old venv and the user's
    work put back), instead of stopping between two steps. The handler lasts as long as the
    command: :func:`_process_state_kept` puts the caller's back. Only the main thread may set
    one; a command run in another thread leaves SIGTERM as it is."""
    import signal
    import threading

    def stop(signum: int, frame: object) -> None:
        _terminated.append(signum)
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


@cli.command()
@click.option("--venv", type=_PATH, help="Whose backups (default: the project lock's).")
@click.option("--prune", is_flag=True, help="Remove all but the newest --keep backups.")
@click.option(
    "--keep", type=click.IntRange(min=0), help="With --prune: how many to keep (default: 1)."
)
@_json_option
@_common
def backups(venv: Path | None, prune: bool, keep: int | None, as_json: bool) -> None:
    """List (and prune) the old venvs restore kept beside a venv.

    \b
    Examples:
      envguard backups
      envguard backups --prune --keep 2

    \b
    Exit codes: 0, 2 error.
    """
    from envguard.commands import backups as command

    if keep is not None and not prune:
        raise click.UsageError("--keep only means something with --prune")
    with _errors():
        _emit(command.backups(_config(), venv=venv, prune=prune, keep=1 if keep is None else keep))


@cli.group(cls=_Group, short_help="Tool venvs (SGLang, vLLM) beside the training venv.")
def tool() -> None:
    """Tool venvs beside the training venv: SGLang, vLLM and the like, never inside it.

    Each tool gets a venv of its own, built by uv with its own resolution (it gets the torch
    build it wants) at TRAIN.tools/NAME, and a lockfile at lockfiles/tools/NAME.envguard.toml.
    The training venv is never touched.

    \b
    Examples:
      envguard tool add datagen sglang==0.5.23
      envguard tool run datagen -- python -m sglang.launch_server --model-path M
      $(envguard tool path datagen)/bin/python gen.py

    \b
    Exit codes: 0, 2 error (tool run: the command's own).
    """


def _tool_venv_option(command: F) -> F:
    return click.option(
        "--venv", type=_PATH, help="The training venv (default: the project lock's)."
    )(command)


def _indexes(kw: dict[str, Any]) -> Any:
    from envguard.uv import Indexes

    return Indexes(
        index_url=kw.pop("index_url"),
        extra_index_urls=tuple(kw.pop("extra_index_url")),
        find_links=tuple(kw.pop("find_links")),
        offline=kw.pop("offline"),
        no_index=kw.pop("no_index"),
    )


@tool.command(name="add")
@click.argument("name")
@click.argument("requirements", nargs=-1, required=True)
@_tool_venv_option
@click.option("--python", "python", help="The tool's interpreter (default: the training venv's).")
@_index_options
@_json_option
@_common
def tool_add(name: str, requirements: tuple[str, ...], venv: Path | None, python: str | None,
             as_json: bool, **kw: Any) -> None:  # fmt: skip
    """Build tool NAME from REQUIREMENTS in a venv of its own, and lock it.

    \b
    Example:
      envguard tool add datagen sglang==0.5.23
    """
    from envguard.commands import tools as command

    with _errors():
        _emit(command.add(_config(), name, requirements, _indexes(kw), venv=venv, python=python))


@tool.command(name="sync")
@_tool_venv_option
@_index_options
@_json_option
@_common
def tool_sync(venv: Path | None, as_json: bool, **kw: Any) -> None:
    """Build every tool [tool.envguard.tools] declares that does not exist yet."""
    from envguard.commands import tools as command

    with _errors():
        _emit(command.sync(_config(), _indexes(kw), venv=venv))


@tool.command(name="list")
@_tool_venv_option
@_json_option
@_common
def tool_list(venv: Path | None, as_json: bool) -> None:
    """Each tool: path, requirements, torch build, size on disk, whether it matches its lock."""
    from envguard.commands import tools as command

    with _errors():
        _emit(command.listing(_config(), venv=venv))


@tool.command(name="path")
@click.argument("name")
@_tool_venv_option
@_common
def tool_path(name: str, venv: Path | None) -> None:
    """Print tool NAME's venv path, for scripts: $(envguard tool path NAME)/bin/python."""
    from envguard import _term
    from envguard.commands import tools as command

    with _errors():
        click.echo(_term.visible(str(command.path(_config(), name, venv=venv))))


class _CommandAfter(click.Command):
    """``NAME [OPTIONS] [--] COMMAND...``, as ``uv run`` reads it: the options before the
    command are envguard's (``--venv`` after NAME too), the command's start at its first
    word or after ``--``, and an unknown one before it is an error, not the command's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, theirs = self._split(args)
        return super().parse_args(ctx, [*ours, "--", *theirs])

    def _split(self, args: list[str]) -> tuple[list[str], list[str]]:
        valued = {
            opt for p in self.params if isinstance(p, click.Option) and not (p.is_flag or p.count)
            for opt in p.opts
        }  # fmt: skip
        i, positional = 0, 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                return args[:i], args[i + 1 :]
            if arg.startswith("-") and arg != "-":
                i += 2 if arg in valued else 1  # --venv X; --venv=X and -q are one word
                continue
            if positional == 1:  # NAME is the one positional before the command
                return args[:i], args[i:]
            positional, i = positional + 1, i + 1
        return args, []


@tool.command(name="run", cls=_CommandAfter)
@click.argument("name")
@_tool_venv_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@_common
def tool_run(name: str, venv: Path | None, command: tuple[str, ...]) -> None:
    """Run COMMAND as in the activated venv of tool NAME; exit with its code.

    Options before COMMAND (or before --) are envguard's, as with uv run.

    \b
    Examples:
      envguard tool run datagen -- python -m sglang.launch_server --model-path M
      envguard tool run datagen --venv ../train/.venv -- python gen.py
    """
    from envguard.commands import tools as command_mod

    with _errors():
        code = command_mod.run(_config(), name, command, venv=venv)
    sys.exit(code)


@tool.command(name="remove")
@click.argument("name")
@_tool_venv_option
@click.option("--force", is_flag=True, help="Remove even while processes use it.")
@_json_option
@_common
def tool_remove(name: str, venv: Path | None, force: bool, as_json: bool) -> None:
    """Remove tool NAME's venv and its lock (refused while a process uses it)."""
    from envguard.commands import tools as command

    with _errors():
        _emit(command.remove(_config(), name, venv=venv, force=force))


@cli.command(short_help="Write the locked packages as a PEP 751 pylock.toml.")
@click.argument("lock", type=_PATH, required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["pylock"]),
    default="pylock",
    show_default=True,
    help="The file format: PEP 751.",
)
@click.option(
    "-o",
    "--output",
    type=_PATH,
    default=Path("pylock.toml"),
    show_default=True,
    help="Where to write it (PEP 751 names: pylock.toml, pylock.NAME.toml).",
)
@click.option("--resolve", is_flag=True, help="Ask the inferred indexes for wheels and hashes.")
@_index_options
@_json_option
@_common
def export(
    lock: Path | None, fmt: str, output: Path, resolve: bool, as_json: bool, **kw: Any
) -> None:
    """Write the packages of LOCK (default: the project's) as a PEP 751 pylock.toml that
    `uv pip sync` installs.

    A pylock names each wheel with its hash, which only an index knows: pass --resolve (the
    indexes the lock inferred), --find-links DIR or --index-url URL.

    \b
    Examples:
      envguard export lockfiles/train.envguard.toml --resolve
      envguard export LOCK --find-links /wheels --offline -o pylock.train.toml

    \b
    Exit codes: 0 written, 2 error.
    """
    from envguard.commands import export as command

    with _errors():
        _emit(command.export(_config(), lock, output, _overrides(kw), resolve=resolve))


def _pricing_options(command: F) -> F:
    """How ``preflight --bench`` and ``run --max-cost`` price an install."""
    for option in reversed(
        (
            click.option("--lock", type=_PATH, help="Whose benchmark (default: the venv's lock)."),
            click.option(
                "--runs",
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Pricing: runs of each side at the least (3 to 6 with a metric, "
                "until their runs tell them apart).",
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=3600.0,
                show_default=True,
                help="Seconds a benchmark run may take.",
            ),
        )
    ):
        command = option(command)
    command = _index_options(command)
    return click.option("--python", "python",
                        help="Pricing: the interpreter to build copies with.")(command)  # fmt: skip


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--venv", type=_PATH, help="The venv the command installs into (default: the active one)."
)
@click.option("--max-cost", type=click.FloatRange(0, 100), metavar="PCT",
              help="Price the install on the lock's benchmark first (as preflight --bench), "
                   "and refuse it when it costs more than PCT percent.")  # fmt: skip
@_pricing_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@_json_option
@_common
def run(
    venv: Path | None, max_cost: float | None, as_json: bool, command: tuple[str, ...], **kw: Any
) -> None:
    """Run COMMAND in the venv and journal the drift it caused.

    With --max-cost, an install is first priced in copies of the venv, and not run
    when it costs the lock's benchmark more than PCT percent, breaks it, or costs
    what its noise cannot tell from less.

    \b
    Examples:
      envguard run -- uv pip install sglang
      envguard run -- pip install -U transformers
      envguard run --max-cost 5 -- uv pip install vllm

    \b
    Exit codes: the command's own; 1 refused by --max-cost.
    """
    from envguard import _term
    from envguard.commands import journal
    from envguard.commands import preflight as preflight_mod

    with _errors():
        lock, options = kw.pop("lock"), _price_options(kw)
        limit = None
        if max_cost is None:
            _no_bench_options("--max-cost")
        else:
            _interrupt_on_sigterm()
            status = _UI.human(sys.stderr)
            limit = journal.MaxCost(share=max_cost / 100, bench=preflight_mod.Bench(
                lock=lock, options=options,
                on_event=lambda e: step(status.price_status(e), e.run, e.runs),
            ))  # fmt: skip
        with _UI.progress() as step:
            result = journal.run(_config(), command, venv=venv, max_cost=limit)
    if as_json:
        _emit(result)
    # on stderr: the command's own output keeps stdout
    sys.stderr.write(_term.visible(_UI.human(sys.stderr, expand=False).format(result)))
    sys.exit(result.exit_code)


@cli.command()
@click.option("--venv", type=_PATH, help="Whose journal (default: the project lock's).")
@_json_option
@_common
def log(venv: Path | None, as_json: bool) -> None:
    """List the install journal of a venv.

    \b
    Example:
      envguard log

    \b
    Exit codes: 0, 2 error (a damaged journal names its line).
    """
    from envguard.commands import journal

    with _errors():
        _emit(journal.log(_config(), venv=venv))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--venv", type=_PATH, help="The venv to check (default: where the installer would install)."
)
@click.option("--expand", is_flag=True, help="List the packages the install would bring.")
@click.option("--only", metavar="AREA[,AREA]", help=f"Judge only these areas: {_AREAS}.")
@click.option("--ignore", metavar="AREA[,AREA]", help="Do not judge these areas.")
@click.option("--bench", is_flag=True, help="Also measure what the install would cost the "
              "lock's benchmark (snapshot --bench), in copies of the venv.")  # fmt: skip
@_pricing_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@_json_option
@_common
def preflight(
    venv: Path | None,
    expand: bool,
    only: str | None,
    ignore: str | None,
    bench: bool,
    as_json: bool,
    command: tuple[str, ...],
    **kw: Any,
) -> None:
    """What an install would change, before it runs; installs nothing in the venv.

    With --bench, the lock's benchmark runs in a rebuild of the venv as it is and in
    one with the install, in turn, and the price is said: the cost, no cost measured,
    or cannot tell. The index options say where the rebuild's pins come from.

    \b
    Examples:
      envguard preflight -- uv pip install sglang==0.5.23
      envguard preflight -- pip install vllm
      envguard preflight --bench -- uv pip install vllm

    \b
    Exit codes: 0 safe, 1 it would change something critical (or cost the
    benchmark, break it, or cost what the noise cannot tell), 2 error.
    """
    from envguard.commands import preflight as command_mod

    with _errors():
        cfg = _config(only=only, ignore=ignore)
        lock = kw.pop("lock")
        options = _price_options(kw)
        if not bench:
            _no_bench_options("--bench")
            _emit(command_mod.check(cfg, command, venv=venv), expand=expand)
            return
        _interrupt_on_sigterm()  # its copies are cleaned as a bisect's trials are
        status = _UI.human(sys.stderr)
        with _UI.progress() as step:
            priced = command_mod.Bench(
                lock=lock, options=options,
                on_event=lambda e: step(status.price_status(e), e.run, e.runs),
            )  # fmt: skip
            result = command_mod.check(cfg, command, venv=venv, bench=priced)
        _emit(result, expand=expand)


def _price_options(kw: dict[str, Any]) -> Any:
    from envguard.price import Options

    return Options(runs=kw.pop("runs"), timeout=kw.pop("timeout"), overrides=_overrides(kw),
                   python=kw.pop("python"))  # fmt: skip


def _no_bench_options(needs: str) -> None:
    """--lock, --runs and the index options say how to price an install: without ``needs``
    (--bench, --max-cost), they would say nothing, and are refused rather than ignored."""
    from envguard.errors import ArgumentError

    ctx = click.get_current_context()
    named = ("lock", "runs", "timeout", "python", *_INDEX_NAMES)
    typed = click.core.ParameterSource.COMMANDLINE
    given = [p.opts[0] for p in ctx.command.params
             if p.name in named and ctx.get_parameter_source(p.name) == typed]  # fmt: skip
    if given:
        raise ArgumentError(f"{', '.join(given)} price an install: they need {needs}")


@cli.command(name="protect", short_help="Pin torch, its CUDA wheels and triton against installs.")
@click.argument("lock", type=_PATH, required=False)
@click.option("--venv", type=_PATH, help="The venv to protect (default: the lock's).")
@click.option("--package", "packages", multiple=True, help="Also pin this package (repeatable).")
@_json_option
@_common
def protect_cmd(
    lock: Path | None, venv: Path | None, packages: tuple[str, ...], as_json: bool
) -> None:
    """Make installs into the venv unable to replace torch, its CUDA wheels, triton, ...

    \b
    Example:
      envguard protect lockfiles/train.envguard.toml

    \b
    Exit codes: 0, 2 error.
    """
    from envguard.commands import protect as command

    with _errors():
        _emit(command.protect(_config(), lock, venv=venv, extra=packages))


@cli.command(name="unprotect")
@click.option("--venv", type=_PATH, help="The venv (default: the project lock's).")
@_json_option
@_common
def unprotect_cmd(venv: Path | None, as_json: bool) -> None:
    """Lift envguard protect.

    \b
    Exit codes: 0, 2 error.
    """
    from envguard.commands import protect as command

    with _errors():
        _emit(command.unprotect(_config(), venv=venv))


@cli.command(short_help="Compare many nodes with the lock and with each other.")
@click.argument("lock", type=_PATH)
@click.argument("snapshots", nargs=-1, required=True, type=_PATH)
@click.option("--all", "show_all", is_flag=True, help="A line for every node, agreeing ones too.")
@_judging
@_json_option
@_common
def fleet(
    lock: Path,
    snapshots: tuple[Path, ...],
    show_all: bool,
    fail_on: str | None,
    only: str | None,
    ignore: str | None,
    as_json: bool,
) -> None:
    """Compare node SNAPSHOTS (files or folders) with LOCK and with each other.

    \b
    Example:
      envguard fleet lockfiles/train.envguard.toml /shared/envguard/fleet/

    \b
    Exit codes: 0 all match, 1 a node drifts, 2 unusable files (or error).
    """
    from envguard.commands import fleet as command

    with _errors():
        cfg = _config(fail_on=fail_on, only=only, ignore=ignore)
        _emit(command.compare(cfg, lock, snapshots), show_all=show_all)


class _LockThenCommand(_CommandAfter):
    """``[LOCK] [OPTIONS] [-- COMMAND...]``: LOCK may be left out, so the command's first
    word cannot say where it starts; ``--`` does. Without it, the lock's own benchmark
    (``snapshot --bench``) runs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, theirs = self._split(args)
        if len(ours) < len(args) and (args[len(ours)] != "--" or not theirs):
            raise click.UsageError("the benchmark goes after --: bisect [LOCK] -- COMMAND", ctx)
        ctx.meta["envguard.command"] = tuple(theirs)
        return click.Command.parse_args(self, ctx, ours)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- COMMAND...]"]


@cli.command(cls=_LockThenCommand, short_help="Which drifted fact costs the throughput.")
@click.argument("lock", type=_PATH, required=False)
@click.option("--venv", type=_PATH, help="The live venv, BAD (default: the lock's).")
@click.option("--repo", type=_PATH, help="The live git repo (default: here, else the lock's).")
@click.option(
    "--metric", metavar="REGEX", help="The number to compare: the first group of REGEX in the "
    "command's output (default: exit status 0 is good).",
)  # fmt: skip
@click.option("--higher-is-better/--lower-is-better", "higher", default=None,
              help="Which way BAD must differ to be a regression (default: either).")  # fmt: skip
@click.option("--unit", default="", help="How the number reads: Ktok/s, s/step.")
@click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each trial; their median counts. GOOD and BAD run at least "
                   "3 times with --metric, on to 6 until their runs tell them apart.")  # fmt: skip
@click.option(
    "--tolerance", type=click.FloatRange(0, 0.5, min_open=True), default=0.25,
    show_default=True, help="A trial within this share of the gap from BAD is bad.",
)  # fmt: skip
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=3600.0,
    show_default=True, help="Seconds a run may take before it counts as broken.",
)  # fmt: skip
@click.option(
    "--good-within", type=click.FloatRange(0, 100, min_open=True), metavar="PCT",
    help="How far GOOD may measure worse than the lock's recorded benchmark, in percent "
    "of it (default: the record's own noise, or 3%).",
)  # fmt: skip
@click.option("--max-trials", type=click.IntRange(min=2), default=64, show_default=True,
              help="Stop after this many trials.")  # fmt: skip
@click.option("--keep", type=_PATH, metavar="DIR", help="Build the trials in DIR and keep them.")
@click.option(
    "--cache-dir",
    "cache_dirs",
    type=_PATH,
    multiple=True,
    help="A custom cache folder the lock names that no variable does: each run sets it "
    "aside and puts the trial's copy in its place (repeatable; also cache-dirs in "
    "[tool.envguard]).",
)
@click.option(
    "--trust-lock-env", "trust_env", is_flag=True, help="Let trials set the lock's variables "
    "that load code (LD_PRELOAD, PYTHONPATH, a path or program): shown, unset without it.",
)  # fmt: skip
@_index_options
@click.option("--python", "python", help="The interpreter to build trials with.")
@_json_option
@_common
def bisect(lock: Path | None, as_json: bool, **kw: Any) -> None:
    """Find which fact that drifted since LOCK (default: the project's) costs COMMAND's
    throughput: GOOD is what LOCK recorded, BAD the live venv, code, caches and variables.
    Without COMMAND, the lock's own benchmark runs (snapshot --bench), and GOOD must
    measure what it recorded.

    Each trial builds GOOD with some of the drifted facts applied (a venv by uv, a git
    worktree, private caches, the variables) and runs COMMAND in it; nothing of yours is
    touched. Halves first, as git bisect does, then the smallest set that costs the gap.

    \b
    Examples:
      envguard bisect --metric 'tok/s ([0-9.]+)' --higher-is-better -- python b.py
      envguard bisect LOCK --find-links /wheels --offline -- torchrun train.py

    \b
    Exit codes: 0 culprits found, 1 none found (--max-trials reached, trials
    that would tell were broken, GOOD and BAD inside their noise, GOOD worse than
    BAD or than the lock recorded), 2 error (no regression: BAD no worse).
    """
    from envguard.commands import bisect as command

    _interrupt_on_sigterm()  # a terminated bisect cleans its trials as an interrupted one
    higher = kw.pop("higher")
    within = kw.pop("good_within")
    with _errors():
        options = command.Options(
            command=click.get_current_context().meta["envguard.command"],
            metric=kw.pop("metric") or "", unit=kw.pop("unit"),
            direction="" if higher is None else "higher" if higher else "lower",
            runs=kw.pop("runs"), tolerance=kw.pop("tolerance"), timeout=kw.pop("timeout"),
            max_trials=kw.pop("max_trials"), keep=kw.pop("keep"), python=kw.pop("python"),
            overrides=_overrides(kw), trust_env=kw.pop("trust_env"),
            good_within=None if within is None else within / 100,
            cache_dirs=tuple(kw.pop("cache_dirs")),
        )  # fmt: skip
        status = _UI.human(sys.stderr)
        with _UI.progress() as step:
            result = command.bisect(
                _config(), lock, venv=kw.pop("venv"), repo=kw.pop("repo"), options=options,
                on_event=lambda e: step(status.bisect_status(e), e.run, e.runs),
            )  # fmt: skip
        if result.error:
            _fail(result.error, code=result.exit_code)
        _emit(result)


def main() -> None:
    global _OWN_PROCESS
    _OWN_PROCESS = True
    cli.main(prog_name="envguard")
