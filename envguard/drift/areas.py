"""The areas of drift, in one table: each area's name, its default severity and its rule.

An area's rule is the ``changes`` function of the module named after it (``cuda`` is
:func:`envguard.drift.cuda.changes`), with one signature for all of them:
``changes(old, new, context)`` yields that area's changes. This is pre-commit's
``languages/`` and ``all.py``: one module per implementation, one table of them. ``AREAS``,
``FAIL_ON``, the config's and the CLI's area names and their help all come from here. A
snapshot reads the table too but never compares, so the table does not import the rules:
each area's module is loaded the first time a comparison asks for its rule.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envguard.drift.report import SEVERITIES, Change, Member

if TYPE_CHECKING:
    from envguard.drift.packages import Delta
    from envguard.model import Snapshot


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a rule may need besides the two snapshots. ``compare`` works it out once for all
    the rules; a rule called without one (``Context()``) works out what it needs itself."""

    planned: bool = False  # ``new`` is a forecast of an install (preflight)
    moved: Delta | None = None  # the packages that came, moved and went, grouped by install


ALONE = Context()
Rule = Callable[["Snapshot", "Snapshot", Context], Iterable[Change]]


@dataclass(frozen=True)
class Area:
    name: str
    severity: str  # the severity of its changes, unless its rule says otherwise for one
    caused: bool = False  # its changes name who made them (a journal record, an install)
    # the venv determines it: a rebuild from the lock puts it back, a tool venv is judged on it
    venv: bool = False

    def rule(self) -> Rule:
        rule: Rule = importlib.import_module(f"envguard.drift.{self.name}").changes
        return rule

    def change(
        self, *, subject: str, why: str, old: str = "", new: str = "", severity: str = "",
        members: tuple[Member, ...] = (), patch: str = "", unit: str = "",
    ) -> Change:  # fmt: skip
        """A change of this area, of its default severity unless ``severity`` says another."""
        return Change(
            severity=severity or self.severity, area=self.name, subject=subject, old=old,
            new=new, why=why, members=members, patch=patch, unit=unit,
        )  # fmt: skip


# In the order a report lists the changes of one severity.
ALL = (
    # another interpreter ABI: every extension is another build
    Area("python", "critical", venv=True),
    # another build: compiled kernels are not reused
    Area("torch", "critical", caused=True, venv=True),
    Area("cuda", "warning", caused=True, venv=True),  # critical where the CUDA major moved
    Area("gpu", "warning"),
    Area("code", "critical"),  # info for files a run does not read
    Area("caches", "warning"),
    Area("libraries", "warning", caused=True, venv=True),
    Area("packages", "warning", caused=True, venv=True),
    Area("env", "warning"),  # info for settings that do not change a step (WANDB_*)
    Area("host", "info"),  # facts for comparing nodes, never drift of their own
)
AREAS = tuple(a.name for a in ALL)
VENV_AREAS = tuple(a.name for a in ALL if a.venv)  # what a venv rebuilt from a lock puts back
# The least severe change that counts as drift: a severity, or any change (info too).
FAIL_ON = (*SEVERITIES[:-1], "any")
_BY_NAME = {a.name: a for a in ALL}


def named(name: str) -> Area:
    return _BY_NAME[name]
