"""What one run of the user's command measured: a number, or why it measured nothing.

With ``--metric REGEX`` the number is the regex's first group, from the last line of
stdout that matches (a training log prints its throughput every step; the last is the
steady one), else from stderr's; a run that exits non-zero or prints no match is broken.
Without it the run is judged as ``git bisect run`` judges one: exit 0 good (0.0), 125
"cannot test" (broken), a signal broken, anything else bad (1.0).
"""

from __future__ import annotations

import re
import signal
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

GOOD_EXIT, BAD_EXIT = 0.0, 1.0
SKIP = 125  # git bisect run's "this revision cannot be tested"


@dataclass(frozen=True, kw_only=True)
class Run:
    value: float | None  # None: broken
    why: str = ""  # what broke it, in one line


def compile_metric(text: str) -> re.Pattern[str]:
    """The --metric regex, refused early when it cannot say a number."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"--metric {text!r} is not a regular expression ({exc})") from None
    if pattern.groups < 1:
        raise ValueError(f"--metric {text!r} has no group for the number: 'throughput: ([0-9.]+)'")
    return pattern


def read(pattern: re.Pattern[str] | None, code: int, stdout: str, stderr: str) -> Run:
    """One run's measure from its exit code and output."""
    if code < 0:
        return Run(value=None, why=f"killed by {_signal(-code)}")
    if pattern is None:
        if code == SKIP:
            return Run(value=None, why="exit 125: cannot be tested (as git bisect run)")
        return Run(value=GOOD_EXIT if code == 0 else BAD_EXIT)
    if code != 0:
        return Run(value=None, why=f"exited {code}: {last_line(stderr or stdout)}")
    for stream in (stdout, stderr):
        found = pattern.findall(stream)
        if found:
            text = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
            try:
                return Run(value=float(text))
            except ValueError:
                return Run(value=None, why=f"the metric's group read {text[:40]!r}, not a number")
    return Run(value=None, why=f"printed no match for --metric {pattern.pattern!r}")


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(no output)"


def _signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def number(value: float | None) -> str:
    """A measured value as people read it: 21.5, 4.3, 1234, 0.0123; "-" for none."""
    if value is None:
        return "-"
    if abs(value) >= 10_000:
        return f"{value:.0f}"
    return f"{value:.4g}"


def runs_said(values: Sequence[float]) -> str:
    """How many runs, and their lowest and highest as :func:`number` says them:
    ``5 runs, 21.2-21.9``; ``3 runs`` where they read the same; ``1 run``."""
    low, high = number(min(values)), number(max(values))
    runs = f"{len(values)} run{'' if len(values) == 1 else 's'}"
    return runs + (f", {low}-{high}" if low != high else "")


def said(value: float | None, *, exits: bool) -> str:
    """A measured value as a screen says it: the metric's number, or, where exit statuses
    decide, "exit 0" and "fails" (the median of runs that did both: "mixed")."""
    if not exits or value is None:
        return number(value)
    return {GOOD_EXIT: "exit 0", BAD_EXIT: "fails"}.get(value, "mixed")
