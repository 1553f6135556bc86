"""Requires-Dist lines, read fast: a diff after a 600-package install reads thousands.

Only the name is needed for most lines (who requires whom), so it is cut out with one regex;
the specifier is parsed by packaging only when a version must be tested against it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

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
