"""Where an offline restore's pins come from: the user's wheelhouse, or uv's cache.

Offline, uv still reads the index pages it cached on an earlier online run, prefers the
index's wheel to the one in ``--find-links``, and then fails because the cache holds the page
but not the file. When every pin is in the wheelhouse, the wheelhouse alone is asked
(``--no-index``), and the plan says why; otherwise uv's cache serves the rest, and the plan
says how many.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from urllib.request import url2pathname

if TYPE_CHECKING:
    from packaging.tags import Tag

    from envguard.restore.plan import Overrides, Pin


def sources(python: str, overrides: Overrides, pins: Sequence[Pin]) -> tuple[Overrides, str]:
    """The flags uv is given for ``pins``, and why, when envguard changed the user's."""
    if not (overrides.offline and overrides.find_links) or overrides.replaces():
        return overrides, ""
    wanted = [p.requirement for p in pins if _by_name(p.requirement)]
    if not wanted:
        return overrides, ""
    have = _contents(overrides.find_links, python)
    missing = [req for req in wanted if not _served(req, have)]
    folders = ", ".join(overrides.find_links)
    if not missing:
        why = (
            f"every pin is in {folders}: uv reads only that (--no-index), not the index "
            "pages its cache holds from earlier runs"
        )
        return replace(overrides, no_index=True), why
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    why = (
        f"{len(missing)} of {len(wanted)} pins are not in {folders} ({shown}): offline, "
        "uv's cache must hold their files"
    )
    return overrides, why


def _by_name(requirement: str) -> bool:
    """A ``name==version`` pin (not ``name @ url`` or ``-e path``): one an index serves."""
    return "==" in requirement and " @ " not in requirement and not requirement.startswith("-")


def _served(requirement: str, have: set[tuple[str, object]]) -> bool:
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    name, _, version = requirement.partition("==")
    try:
        return (canonicalize_name(name), Version(version)) in have
    except InvalidVersion:
        return False


def _contents(links: Sequence[str], python: str) -> set[tuple[str, object]]:
    """(name, version) of each wheel in the local folders that this Python can install, and
    of each sdist (uv builds those)."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    ok: frozenset[Tag] = _supported(python)
    out: set[tuple[str, object]] = set()
    for folder in filter(None, map(_local, links)):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for file in names:
            try:
                if file.endswith(".whl"):
                    name, version, _, tags = parse_wheel_filename(file)
                    if ok.isdisjoint(tags):
                        continue
                elif file.endswith((".tar.gz", ".zip")):
                    name, version = parse_sdist_filename(file)
                else:
                    continue
            except (InvalidWheelFilename, InvalidSdistFilename):
                continue
            out.add((name, version))
    return out


def _supported(python: str) -> frozenset[Tag]:
    from packaging import tags

    major, minor = (int(x) for x in python.split(".")[:2])
    version = (major, minor)
    return frozenset(
        [*tags.cpython_tags(python_version=version), *tags.compatible_tags(python_version=version)]
    )


def _local(link: str) -> str | None:
    """A find-links entry as a local folder; an URL is not one envguard can list."""
    if link.startswith("file://"):
        return url2pathname(urlsplit(link).path)
    if "://" in link:
        return None
    return str(Path(link).expanduser())
