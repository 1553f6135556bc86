"""Progress on long work: one status line on stderr, on a terminal only.

``phase ━━━━━━━━━━━━━━━━        5/8  0:03``, redrawn in place with a carriage return, as uv
and cargo do. One line and no cursor movement, so that text printed meanwhile (restore's
steps, as each finishes, on stdout) is never written over: :meth:`Bars.echo` clears the line,
prints, and draws it again below. A new phase replaces the finished one; the line is cleared
when the work is over. What it writes passes through :func:`envguard._term.visible`: the
text echoed is a screen of the lockfile's strings.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from envguard import _term

_BAR = 24
_CLEAR = "\r\x1b[2K"
_EVERY = 0.05  # seconds between redraws of one phase: a 10,000-file pass stays cheap


class Bars:
    """``bars(phase, done, total)`` reports progress; ``bars.echo(text)`` prints beside it.
    Without a ``stream`` (not a terminal, ``--json``, ``-q``) it only passes text through."""

    def __init__(self, stream: TextIO | None = None, color: bool = False) -> None:
        self._stream = stream
        self._color = color
        self._phase = ""
        self._line = ""
        self._began = self._drawn = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._stream is None:
            return
        now = time.monotonic()
        if phase != self._phase:
            self._phase, self._began = phase, now
        elif done < total and now - self._drawn < _EVERY:
            return
        self._drawn = now
        total = max(total, 1)
        filled = min(_BAR, _BAR * done // total)
        bar = _term.paint("━" * filled, "green", self._color) + _term.paint(
            "━" * (_BAR - filled), "dim", self._color
        )
        elapsed = int(now - self._began)
        line = f"{phase:<12} {bar} {done}/{total}  {elapsed // 60}:{elapsed % 60:02d}"
        self._draw(line)

    def echo(self, text: str, stream: TextIO | None = None) -> None:
        out = stream or sys.stdout
        line = self._line
        if line:
            self._draw("")
        out.write(_term.visible(text))
        out.flush()
        if line:
            self._draw(line)

    def close(self) -> None:
        if self._line:
            self._draw("")

    def _draw(self, line: str) -> None:
        assert self._stream is not None
        self._stream.write(_CLEAR + _term.visible(line))
        self._stream.flush()
        self._line = line


@contextmanager
def bars(enabled: bool, color: bool) -> Iterator[Bars]:
    progress = Bars(sys.stderr if enabled else None, color)
    try:
        yield progress
    finally:
        progress.close()
