"""What every run of the command line shares: the common options' state (:class:`Ui`), the
one error boundary, printing a result with its exit code, and ``snapshot`` and ``diff`` from
their parsed keywords. It imports neither click nor the core: ``cli.py`` stands on it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from envguard.exits import INTERRUPTED

if TYPE_CHECKING:
    from envguard.config import Config
    from envguard.output.human import Human
    from envguard.results import Result


@dataclass
class Ui:
    """What the common options asked for, for the command that runs."""

    command: str = ""
    verbosity: int = 0
    as_json: bool = False

    def human(self, stream: TextIO | None = None, **view: Any) -> Human:
        from envguard import _term
        from envguard.output.human import Human

        stream = stream or sys.stdout
        return Human(
            width=_term.width(stream),
            color=_term.color(stream),
            verbosity=self.verbosity,
            **view,
        )

    def progress(self) -> Any:
        from envguard import _term
        from envguard.output.progress import bars

        on = not self.as_json and self.verbosity >= 0 and sys.stderr.isatty()
        return bars(on, _term.color(sys.stderr))


UI = Ui()


def config(**flags: Any) -> Config:
    from envguard import config as config_module

    return config_module.load().with_flags(**flags)


def snapshot(kw: dict[str, Any]) -> None:
    """``envguard snapshot`` from its parsed keywords, and exit."""
    from envguard.commands import snapshot as command

    cfg = config()
    with UI.progress() as step:
        result = command.take(
            cfg, progress=step, default_caches=not kw.pop("no_default_caches", False), **kw
        )
    emit(result)


def diff(kw: dict[str, Any]) -> None:
    """``envguard diff`` from its parsed keywords, and exit."""
    from envguard.commands import diff as command

    view = {"expand": kw.pop("expand", False), "show_patch": kw.pop("show_patch", False)}
    cfg = config(**{key: kw.pop(key, None) for key in ("fail_on", "only", "ignore", "code")})
    with UI.progress() as step:
        result = command.diff(cfg, kw.pop("locks", ()), progress=step, **kw)
    emit(result, **view)


def emit(result: Result, *, failure: str | None = None, **view: Any) -> None:
    """Print the result as asked, and exit with its code. ``failure``: the error line of a
    result that holds what was done all the same (a restore that left a part undone)."""
    from envguard import _term

    stream = sys.stderr if result.wrote_to_stdout else sys.stdout
    if UI.as_json:
        from envguard.output.json import Json

        stream.write(Json().format(result))  # json.dumps escapes every control character
    else:
        stream.write(_term.visible(UI.human(stream, **view).format(result)))
    stream.flush()
    if failure is not None:
        from envguard.output import lines

        lines.error_line(failure)
    sys.exit(result.exit_code)


@contextmanager
def errors(passthrough: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """The one error boundary: every error becomes one line on stderr and its exit code (2,
    or 1 for "not restored"), and under --json an envelope on stdout too; never a traceback
    unless ENVGUARD_DEBUG=1. ``passthrough``: the parser's own exits (click's), let through."""
    from envguard.errors import EnvguardError, NotRestored

    debug = os.environ.get("ENVGUARD_DEBUG", "") not in ("", "0")
    exits: tuple[type[BaseException], ...] = (SystemExit, *passthrough)
    try:
        yield
    except exits:
        raise
    except KeyboardInterrupt:
        fail("interrupted", code=INTERRUPTED)
    except Exception as exc:
        if debug:
            import traceback

            traceback.print_exc()
        if isinstance(exc, NotRestored):
            fail(f"not restored: {exc}", code=exc.exit_code)
        elif isinstance(exc, EnvguardError):
            fail(str(exc), code=exc.exit_code)
        elif isinstance(exc, OSError):
            fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        else:
            hint = "" if debug else "; ENVGUARD_DEBUG=1 shows where"
            fail(f"internal error: {type(exc).__name__}: {exc} (a bug in envguard{hint})")


def fail(message: str, code: int = 2) -> None:
    from envguard.output import lines

    if UI.as_json:
        from envguard.output.json import Json
        from envguard.redact import strip_url_credentials
        from envguard.results import Failed

        failed = Failed(command=UI.command, message=strip_url_credentials(message), code=code)
        try:
            sys.stdout.write(Json().format(failed))
            sys.stdout.flush()
        except OSError:  # stdout is what failed (a full disk, a closed pipe): stderr says it
            _silence_stdout()
    lines.error_line(message)
    sys.exit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what could not be
    written does not end the run with a traceback of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
