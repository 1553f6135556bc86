"""The one text layout of envguard's screens, in the idiom of ruff, cargo and git.

A line per item: its severity (or a label) and subject, then ``old → new``; its reason and
cause on indented lines below, wrapped at word boundaries. A value (a version, a path, a
hash) is never broken: when a line cannot hold it, it moves to a line of its own. Every line
fits the width unless a single value is longer than the width itself.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from envguard import _term
from envguard.redact import redact

_NBSP = "\u00a0"
_SIZE = re.compile(r"(\d) (B|kB|MB|GB|TB)\b")
# a measure and its unit of rate (Ktok/s, samples/s, s/step): the benchmark's figures
_RATE = re.compile(r"(\d) ([A-Za-z]{1,16}/[A-Za-z]{1,16})(?![\w/])")
_COUNT = re.compile(r"(?<![\d.])(\d+) ([a-z]+)")
_LINES = re.compile(r"(\+\d+) ([−-]\d+)")
_WHEN = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d)")  # a date and its time of day
INDENT = 10  # "critical  " and "warning   " line up the subjects
ARROW = " → "


@dataclass(frozen=True)
class Painter:
    """Colours text, or not, for one screen's width."""

    width: int
    color: bool

    def paint(self, text: str, style: str) -> str:
        return _term.paint(text, style, self.color)


def wrap(text: str, width: int, indent: int = INDENT, first: str | None = None) -> list[str]:
    """``text`` wrapped at word boundaries (never inside a word: a long path stays whole),
    every line indented by ``indent`` spaces, or the first one starting with ``first``."""
    pad = " " * indent
    # "(journal #3)", "stash@{0}": a reference stays on one line with its number
    text = text.replace(" #", _NBSP + "#")
    text = _SIZE.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)  # "1.3 MB" stays whole
    text = _COUNT.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)  # "8 distributions"
    text = _LINES.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)  # "+1 −0"
    text = _WHEN.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)  # "2026-11-30 21:54:26"
    text = _RATE.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)  # "21.5 Ktok/s"
    lines = textwrap.wrap(
        text,
        width=max(20, width),
        initial_indent=first if first is not None else pad,
        subsequent_indent=pad,
        break_long_words=False,
        break_on_hyphens=False,
    )
    lines = [line.replace(_NBSP, " ") for line in lines]
    return lines or [first.rstrip() if first else ""]


def headline(
    label: str,
    subject: str,
    old: str,
    new: str,
    p: Painter,
    *,
    label_style: str = "",
    subject_width: int = 16,
) -> list[str]:
    """``label  subject  old → new``, with the values moved down, whole, when they do not
    fit beside the subject; a subject longer than its column has them below it, in the
    column, so that no row's values stand out of line."""
    gap = " " * max(1, INDENT - len(label))
    values = _values(old, new)
    column = INDENT + subject_width + 2
    if subject and values and len(subject) > subject_width and column + len(values) <= p.width:
        head = (p.paint(label, label_style) if label_style else label) + gap + subject
        return [head, " " * column + values]
    subj = subject.ljust(subject_width) if subject and values else subject
    plain = label + gap + subj
    head = (p.paint(label, label_style) if label_style else label) + plain[len(label) :]
    if not values:
        return [head.rstrip()]
    if len(plain) + 2 + len(values) <= p.width:
        return [f"{head}  {values}"]
    pad = " " * INDENT
    head = head.rstrip()
    if INDENT + len(values) <= p.width or not (old and new):
        return [head, pad + values]
    return [head, f"{pad}{old}{ARROW.rstrip()}", pad + new]  # each value whole on its own line


def _values(old: str, new: str) -> str:
    if old and new:
        return f"{old}{ARROW}{new}"
    return old or new


def path(value: str | os.PathLike[str]) -> str:
    """A path as people type it back: relative under the working directory, ``~`` under the
    home folder, else whole. Only screens shorten paths; ``--json`` keeps them absolute."""
    full = Path(value)
    if not full.is_absolute():
        return str(full)
    for base, prefix in ((Path.cwd(), None), (Path.home(), Path("~"))):
        if base == Path(base.anchor):
            continue  # everything is under /: no shorter for it
        try:
            rel = full.relative_to(base)
        except ValueError:
            continue
        return str(prefix / rel if prefix else rel)
    return str(full)


def block(lines: Iterable[str]) -> str:
    """A screen as printed: every human screen ends here, so its secrets go here (#23)."""
    return redact("\n".join(lines) + "\n")


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural_word or word + 's'}"


def severities(counts: dict[str, int]) -> list[str]:
    """ "3 critical", "10 warnings", "2 info": how people count changes by severity."""
    return [plural(n, s) if s == "warning" else f"{n} {s}" for s, n in counts.items() if n]


def listing(items: list[str], most: int = 6) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")
