"""The one-line messages on stderr: errors and warnings. A log, a pipe or a grep gets one
line, whatever the width; a terminal narrower than the line gets it broken between words,
since a terminal left to fold it would cut a word (``UV_I`` / ``NDEX_URL``)."""

from __future__ import annotations

import sys
from typing import TextIO

from envguard import _term
from envguard.redact import redact


def error_line(message: str) -> None:
    """The one line of a failure; installers' output in it may carry index URLs."""
    _line("error:", "bold red", message)


def warning_line(message: str) -> None:
    _line("warning:", "yellow", message)


def _line(label: str, style: str, message: str) -> None:
    # escaped before it is folded, so that it folds as shown; one line, whatever the
    # message carried (a \r of a path too); no secret
    text = " ".join(_term.visible(redact(message)).split())
    lines = _folded(f"{label} {text}", len(label) + 1, sys.stderr)
    painted = _term.paint(label, style, _term.color(sys.stderr))
    lines[0] = painted + lines[0][len(label) :]
    sys.stderr.write(_term.visible("\n".join(lines) + "\n"))
    sys.stderr.flush()


def _folded(line: str, indent: int, stream: TextIO) -> list[str]:
    """``line`` as the terminal should show it: whole, unless it is a terminal narrower than
    the line; then broken between words, continued under the message."""
    if not _isatty(stream):
        return [line]
    width = _term.width(stream)
    if len(line) <= width:
        return [line]
    from envguard.output.layout import wrap  # the rare long error only: not the hot path

    return wrap(line[indent:], width, indent, first=line[:indent])


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
