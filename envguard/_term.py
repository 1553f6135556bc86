"""The terminal, for the renderers: its width, and whether to colour.

Width: the terminal's when there is one, else ``COLUMNS`` when set, else 80 (a CI log, a
pipe). Colour: ``--color always|never`` (``ENVGUARD_COLOR``) wins, then ``NO_COLOR`` (off),
``FORCE_COLOR`` / ``CLICOLOR_FORCE`` (on), then whether the stream is a terminal.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TextIO

STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "bold red": "1;31",
    "bold green": "1;32",
}


def width(stream: TextIO | None = None) -> int:
    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    if _isatty(stream):
        size = shutil.get_terminal_size(fallback=(80, 24)).columns
        return max(40, size)
    if columns.isdigit() and int(columns) >= 20:
        return int(columns)
    return 80


def color(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    choice = os.environ.get("ENVGUARD_COLOR", "auto").lower()
    if choice in ("always", "never"):
        return choice == "always"
    if "NO_COLOR" in os.environ and os.environ["NO_COLOR"] != "":
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0") or os.environ.get(
        "CLICOLOR_FORCE", ""
    ) not in ("", "0"):
        return True
    return _isatty(stream)


def paint(text: str, style: str, on: bool) -> str:
    code = STYLES.get(style)
    return f"\x1b[{code}m{text}\x1b[0m" if on and code else text


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
