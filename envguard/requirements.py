"""Requires-Dist lines, read fast: a diff after a 600-package install reads thousands.

Only the name is needed for most lines (who requires whom), so it is cut out with one regex;
the specifier is parsed by packaging only when a version must be tested against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from packaging.markers import Marker

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?")
_CANON = re.compile(r"[-_.]+")


class Req(NamedTuple):
    name: str  # canonical (PEP 503)
    spec: str  # "==2.11.0", ">=0.22" or "" (no version constraint); "@ url" for direct refs
    text: str  # "torch==2.11.0": the requirement as people read it, marker dropped


@lru_cache(maxsize=65536)
def parse(line: str) -> Req | None:
    m = _NAME.match(line)
    if m is None:
        return None
    head = line.split(";", 1)[0]
    spec = head[m.end() :].strip().strip("()").strip()
    name = _CANON.sub("-", m.group(1)).lower()
    return Req(name=name, spec=spec, text=f"{m.group(1)}{spec}" if spec else m.group(1))


@lru_cache(maxsize=4096)
def excludes(spec: str, version: str) -> bool:
    """Whether ``spec`` (a PEP 440 specifier set) rules ``version`` out."""
    if not spec or spec.startswith("@"):
        return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return not SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


# --- which lines are in effect in one environment ---------------------------------------------

# `extra == "standard"` alone: most marker lines of a large venv (transformers has hundreds),
# answered without packaging's parser
_ONLY_EXTRA = re.compile(r"""^\s*\(?\s*extra\s*==\s*(['"])([^'"]+)\1\s*\)?\s*$""")


def normal_extra(extra: str) -> str:
    """An extra's name as PEP 685 compares them."""
    return _CANON.sub("-", extra.strip()).lower()


def marker_environment(python_version: str, implementation: str) -> dict[str, str]:
    """PEP 508's marker variables for a venv of this machine: its interpreter's version and
    implementation (read from the venv, not envguard's own), this machine's platform."""
    from packaging.markers import default_environment

    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    if python_version:
        parts = python_version.split(".")
        env["python_full_version"] = python_version
        env["python_version"] = ".".join(parts[:2])
    if implementation:
        env["implementation_name"] = implementation
        env["platform_python_implementation"] = {"cpython": "CPython", "pypy": "PyPy"}.get(
            implementation, implementation
        )
    return env


def in_effect(
    requires: dict[str, tuple[str, ...]], env: dict[str, str], *, asked: Iterable[str] = ()
) -> dict[str, tuple[str, ...]]:
    """Each distribution's Requires-Dist lines that hold in this environment: their markers
    true, the lines of an extra kept when a line in effect asks for that extra (``fastapi
    [standard]`` makes fastapi's ``extra == "standard"`` lines count), to a fixed point. An
    extra asked for on a command line is known to no distribution, and its lines stay out,
    unless ``asked`` has it (``vllm[audio]``: what an installer's report says was asked for).
    A marker that does not parse is kept: it is no evidence against the line."""
    frozen = tuple(sorted(env.items()))
    index = {name: _Lines(lines) for name, lines in requires.items()}
    wanted: dict[str, set[str]] = {name: set() for name in requires}
    todo: list[tuple[str, str]] = [(name, "") for name in requires]
    kept: dict[str, dict[str, None]] = {name: {} for name in requires}

    def ask(line: str) -> None:  # the extras a line in effect asks of a distribution here
        for dep, extras in _asks(line):
            for e in extras - wanted.get(dep, extras):
                wanted[dep].add(e)
                todo.append((dep, e))

    for line in asked:
        ask(line)
    while todo:
        name, extra = todo.pop()
        for line in index[name].holding(extra, frozen):
            if line not in kept[name]:
                kept[name][line] = None
                ask(line)
    # in the order the METADATA has them, whichever pass kept them
    return {name: tuple(ln for ln in requires[name] if ln in kept[name]) for name in requires}


class _Lines:
    """One distribution's lines, sorted once by what their marker needs: none, one extra
    alone (most of a large venv's), or packaging's evaluation."""

    def __init__(self, lines: tuple[str, ...]) -> None:
        self.plain: list[str] = []
        self.by_extra: dict[str, list[str]] = {}
        self.other: list[tuple[str, str]] = []
        for line in lines:
            _, sep, marker = line.partition(";")
            if not sep or not marker.strip():
                self.plain.append(line)
            elif only := _ONLY_EXTRA.match(marker):
                self.by_extra.setdefault(normal_extra(only.group(2)), []).append(line)
            else:
                self.other.append((line, marker.strip()))

    def holding(self, extra: str, env: tuple[tuple[str, str], ...]) -> list[str]:
        """The lines in effect for ``extra`` ("" for the distribution's own)."""
        mine = self.by_extra.get(extra, []) if extra else self.plain
        more = [
            ln for ln, m in self.other if (not extra or "extra" in m) and _evaluate(m, extra, env)
        ]
        return [*mine, *more]


def _asks(line: str) -> list[tuple[str, set[str]]]:
    """``fastapi[standard]>=0.1`` asks fastapi for its extra ``standard``."""
    m = _NAME.match(line)
    if m is None or not m.group(2):
        return []
    extras = {normal_extra(e) for e in m.group(2)[1:-1].split(",") if e.strip()}
    return [(_CANON.sub("-", m.group(1)).lower(), extras)] if extras else []


@lru_cache(maxsize=16384)
def _evaluate(marker: str, extra: str, env: tuple[tuple[str, str], ...]) -> bool:
    from packaging.markers import UndefinedComparison

    parsed = _parsed(marker)
    if parsed is None:
        return extra == ""  # once, with the distribution's own lines
    if extra and "extra" not in marker:
        return False  # a line of no extra is taken with the distribution's own
    try:
        return bool(parsed.evaluate({**dict(env), "extra": extra}))
    except (UndefinedComparison, ValueError, TypeError):
        return extra == ""


@lru_cache(maxsize=4096)
def _parsed(marker: str) -> Marker | None:
    """packaging's parse, once per distinct marker: a venv repeats a few dozen of them
    (``python_version < "3.11"``, ``sys_platform == "win32"``) hundreds of times."""
    from packaging.markers import InvalidMarker, Marker

    try:
        return Marker(marker)
    except InvalidMarker:
        return None
