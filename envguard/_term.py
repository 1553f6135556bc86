"""The terminal, for the renderers: its width, whether to colour, and what may reach it.

Width: the terminal's when there is one, else ``COLUMNS`` when set, else 80 (a CI log, a
pipe). Colour: ``--color always|never`` (``ENVGUARD_COLOR``) wins, then ``NO_COLOR`` (off),
``FORCE_COLOR`` / ``CLICOLOR_FORCE`` (on), then whether the stream is a terminal.

A screen shows strings of a lockfile, a journal or a path, all untrusted (#23): every writer
passes its text through :func:`visible`, which shows each control character as an escape
(``\\x1b``) and turns :func:`paint`'s marks, and only those, into colour codes.
"""

from __future__ import annotations

import os
import re
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
    """``text`` marked to be coloured by :func:`visible`: a colour code written here would be
    indistinguishable, there, from one a lockfile carried in."""
    code = STYLES.get(style)
    return f"{_MARK[code]}{text}{_MARK['0']}" if on and code else text


def visible(text: str) -> str:
    """``text`` as the terminal should show it: every control character but the newline
    (C0, DEL, C1), the bidi overrides and lone surrogates as visible escapes, a tab as
    spaces; :func:`paint`'s marks become its colour codes."""
    parts = _MARKS.split(text)  # odd items: marks, whole
    return "".join(_SGR[p] if i % 2 else _escaped(p) for i, p in enumerate(parts))


def _escaped(text: str) -> str:
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text.expandtabs(8))


# A mark is as long as the code it becomes, so text wrapped with marks in it wraps as it did
# with the codes. Its characters are private-use ones drawn anew by each process: a lockfile
# written before this run cannot carry a mark, and a stray mark character is escaped.
_CODES = ("0", *dict.fromkeys(STYLES.values()))
_NONCE = "".join(chr(0xF0000 + b % 0xFFFE) for b in memoryview(os.urandom(16)).cast("H"))
_MARK = {code: _NONCE[: len(code) + 2] + chr(0xE000 + i) for i, code in enumerate(_CODES)}
_SGR = {mark: f"\x1b[{code}m" for code, mark in _MARK.items()}
_MARKS = re.compile(f"({'|'.join(map(re.escape, _SGR))})")
_UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ue000-\ue0ff]"
)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
