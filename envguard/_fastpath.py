"""``envguard snapshot`` without click, for the way scripts, CI and ``guard`` hooks call it.

click costs more to import than the whole snapshot of a 200-distribution venv takes to read.
The hot path parses the plain forms of ``snapshot``'s own options and hands everything else
(help, ``-v``, ``--color``, combined short flags, a value that looks like an option, anything
unknown) to click, which gives the one answer and the one error message for it. What runs
after parsing is the same code click's ``snapshot`` calls (:mod:`envguard._entry`,
:mod:`envguard.commands.snapshot`); ``tests/test_fastpath.py`` holds the two to the same
output, files and exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# option → (keyword, takes a value, repeatable); the names are cli.py's `snapshot` options
_OPTIONS: dict[str, tuple[str, bool, bool]] = {
    "--venv": ("venv", True, False),
    "--repo": ("repo", True, False),
    "--cache-dir": ("cache_dirs", True, True),
    "-o": ("output", True, False),
    "--output": ("output", True, False),
    "--name": ("name", True, False),
    "--no-default-caches": ("no_default_caches", False, False),
    "--save-cache": ("save_cache", False, False),
    "--json": ("as_json", False, False),
    "-q": ("quiet", False, True),
    "--quiet": ("quiet", False, True),
}
_PATHS = {"venv", "repo", "cache_dirs", "output"}


def parse(argv: list[str]) -> dict[str, Any] | None:
    """``snapshot``'s keywords for ``argv`` (the arguments after the program), or None when
    click should parse it."""
    if not argv or argv[0] != "snapshot":
        return None
    kw: dict[str, Any] = {"cache_dirs": [], "quiet": 0}
    args = iter(argv[1:])
    for arg in args:
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        spec = _OPTIONS.get(name)
        if spec is None:
            return None
        key, valued, repeatable = spec
        if not valued:
            if eq:
                return None
            kw[key] = kw[key] + 1 if key == "quiet" else True
            continue
        value = inline if eq else next(args, None)
        if not value or value.startswith("-"):
            return None  # missing, empty or option-like: click says what is wrong
        typed: Any = Path(value) if key in _PATHS else value
        if repeatable:
            kw[key].append(typed)
        else:
            kw[key] = typed
    kw["cache_dirs"] = tuple(kw["cache_dirs"])
    return kw


def snapshot(kw: dict[str, Any]) -> None:
    """Run ``snapshot`` as cli.py's command does, and exit."""
    from envguard import _entry

    ui = _entry.UI
    ui.command, ui.verbosity, ui.as_json = "snapshot", -kw.pop("quiet"), kw.pop("as_json", False)
    with _entry.errors():
        from envguard.commands import snapshot as command

        cfg = _entry.config()
        with ui.progress() as step:
            result = command.run(
                cfg,
                progress=step,
                default_caches=not kw.pop("no_default_caches", False),
                **kw,
            )
        _entry.emit(result)
