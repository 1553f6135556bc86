"""``envguard snapshot`` and ``envguard diff`` without click, as scripts, CI and hooks call them.

click costs more to import than the whole snapshot of a 200-distribution venv takes to read.
The hot path parses the plain forms of these two commands' own options and hands everything
else (help, ``-v``, ``--color``, combined short flags, a value that looks like an option or is
not one of a choice's, anything unknown) to click, which gives the one answer and the one
error message for it. What runs after parsing is the function click's commands call too
(:func:`envguard._entry.snapshot`, :func:`envguard._entry.diff`); ``tests/test_fastpath.py``
holds the two to the same keywords, output, files and exit codes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class _Command:
    """One command's options as cli.py declares them: option → (keyword, takes a value,
    repeatable); the positional arguments' keyword and how many may come."""

    options: dict[str, tuple[str, bool, bool]]
    positional: str = ""
    most: int = 0
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)


_COMMON = {
    "--json": ("as_json", False, False),
    "-q": ("quiet", False, True),
    "--quiet": ("quiet", False, True),
}
_COMMANDS = {
    "snapshot": _Command(
        {
            "--venv": ("venv", True, False),
            "--repo": ("repo", True, False),
            "--cache-dir": ("cache_dirs", True, True),
            "-o": ("output", True, False),
            "--output": ("output", True, False),
            "--name": ("name", True, False),
            "--no-default-caches": ("no_default_caches", False, False),
            "--save-cache": ("save_cache", False, False),
            **_COMMON,
        }
    ),
    "diff": _Command(
        {
            "--venv": ("venv", True, False),
            "--repo": ("repo", True, False),
            "--fail-on": ("fail_on", True, False),
            "--only": ("only", True, False),
            "--ignore": ("ignore", True, False),
            "--expand": ("expand", False, False),
            "--show-patch": ("show_patch", False, False),
            **_COMMON,
        },
        positional="locks",
        most=2,
        choices={"fail_on": ("critical", "warning", "any")},
    ),
}
_PATHS = {"venv", "repo", "cache_dirs", "locks"}  # snapshot's output stays a str, as in cli.py


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The command and its keywords for ``argv`` (the arguments after the program), or None
    when click should parse it."""
    spec = _COMMANDS.get(argv[0]) if argv else None
    if spec is None or "_ENVGUARD_COMPLETE" in os.environ:  # shell completion is click's
        return None
    kw: dict[str, Any] = {"quiet": 0}
    multi = {key for key, _, repeatable in spec.options.values() if repeatable and key != "quiet"}
    lists: dict[str, list[Any]] = {key: [] for key in (*multi, spec.positional) if key}
    args = iter(argv[1:])
    for arg in args:
        if not arg.startswith("-"):
            if not spec.positional or len(lists[spec.positional]) == spec.most:
                return None
            lists[spec.positional].append(Path(arg))
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option = spec.options.get(name)
        if option is None:
            return None
        key, valued, _ = option
        if not valued:
            if eq:
                return None
            kw[key] = kw[key] + 1 if key == "quiet" else True
            continue
        value = inline if eq else next(args, None)
        if not value or value.startswith("-") or value not in spec.choices.get(key, (value,)):
            return None  # missing, empty, option-like or not a choice: click says what is wrong
        typed = Path(value) if key in _PATHS else value
        if key in lists:
            lists[key].append(typed)
        else:
            kw[key] = typed
    return argv[0], {**kw, **{key: tuple(values) for key, values in lists.items()}}


def run(command: str, kw: dict[str, Any]) -> None:
    """Run the command as cli.py's does (the same :mod:`envguard._entry` function), and exit."""
    from envguard import _entry

    ui = _entry.UI
    ui.command, ui.verbosity, ui.as_json = command, -kw.pop("quiet"), kw.pop("as_json", False)
    with _entry.errors():
        (_entry.snapshot if command == "snapshot" else _entry.diff)(kw)
