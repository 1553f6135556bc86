"""The one-line messages on stderr: errors and warnings, never wrapped, whatever the width."""

from __future__ import annotations

import sys

from envguard import _term
from envguard.redact import strip_url_credentials


def error_line(message: str) -> None:
    """The one line of a failure; installers' output in it may carry index URLs."""
    _line("error:", "bold red", strip_url_credentials(message))


def warning_line(message: str) -> None:
    _line("warning:", "yellow", message)


def _line(label: str, style: str, message: str) -> None:
    text = " ".join(message.split())  # one line, whatever the message carried
    sys.stderr.write(f"{_term.paint(label, style, _term.color(sys.stderr))} {text}\n")
    sys.stderr.flush()
