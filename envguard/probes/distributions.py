"""Every distribution in site-packages, read from its metadata headers (never imported)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from envguard import catalog, requirements
from envguard.model import Distribution, PythonInfo
from envguard.redact import strip_url_credentials

_HEADER_CHUNK = 16384


def scan(site_packages: Path) -> tuple[tuple[Distribution, ...], tuple[str, ...]]:
    """All distributions, sorted by name, and a warning for each one recorded incompletely."""
    found: dict[str, list[tuple[str, Distribution]]] = {}
    warnings: list[str] = []
    for meta_dir, mtime in _metadata_dirs(site_packages):
        dist = _read(meta_dir, mtime)
        if dist.problem:
            warnings.append(f"{os.path.basename(meta_dir)}: {dist.problem}")
        found.setdefault(dist.name, []).append((os.path.basename(meta_dir), dist))
    return tuple(_one(found[k]) for k in sorted(found)), tuple(warnings)


def _one(copies: list[tuple[str, Distribution]]) -> Distribution:
    """Two metadata folders for one name is a broken install (an interrupted upgrade, a
    second installer): the newer is taken as the live one and the others are named."""
    if len(copies) == 1:
        return copies[0][1]
    copies.sort(key=lambda c: (c[1].installed_at, c[0]))
    live = copies[-1][1]
    return dataclasses.replace(live, duplicates=tuple(sorted(f for f, _ in copies[:-1])))


def scan_inherited(
    sites: tuple[Path, ...], own: tuple[Distribution, ...]
) -> tuple[tuple[Distribution, ...], dict[str, Path]]:
    """What a --system-site-packages venv imports from its base interpreter: the first copy
    of each name along ``sites``, leaving out the names the venv has itself; and the site
    folder each one lives in."""
    mine = {d.name for d in own}
    found: dict[str, Distribution] = {}
    where: dict[str, Path] = {}
    for site in sites:
        for dist in scan(site)[0]:
            if dist.name not in mine and dist.name not in found:
                found[dist.name] = dist
                where[dist.name] = site
    return tuple(found[k] for k in sorted(found)), where


def in_effect(
    dists: tuple[Distribution, ...], inherited: tuple[Distribution, ...], python: PythonInfo
) -> tuple[tuple[Distribution, ...], tuple[Distribution, ...]]:
    """Both sets, each distribution's requirements cut to the lines in effect in this venv
    (:func:`envguard.requirements.in_effect`): the venv's own and what it inherits are one
    environment, whose extras any of them may ask for."""
    env = requirements.marker_environment(python.version, python.implementation)
    kept = requirements.in_effect({d.name: d.requires for d in (*inherited, *dists)}, env)

    def cut(group: tuple[Distribution, ...]) -> tuple[Distribution, ...]:
        # replace() costs 10 µs a record: only where a line went (5,000 plain dists, none)
        return tuple(
            d if kept.get(d.name, d.requires) == d.requires
            else dataclasses.replace(d, requires=kept[d.name])
            for d in group
        )  # fmt: skip

    return cut(dists), cut(inherited)


def key_libraries(dists: tuple[Distribution, ...]) -> dict[str, str]:
    versions = {d.name: d.version for d in dists}
    return {name: versions[name] for name in catalog.KEY_LIBRARIES if name in versions}


# This loop runs for every distribution of every snapshot, so it works on str paths and
# scandir's stat rather than pathlib objects: a third of the scan's time on 200 packages.
def _metadata_dirs(site: Path) -> Iterator[tuple[str, float]]:
    try:
        entries = list(os.scandir(site))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if name.endswith((".dist-info", ".egg-info")):
            yield entry.path, _mtime(entry.path)
        elif name.endswith(".egg-link"):
            target = _egg_link_target(Path(entry.path))
            if target is not None:
                yield str(target), _mtime(str(target))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _egg_link_target(link: Path) -> Path | None:
    """`setup.py develop` leaves a file naming the project folder that holds *.egg-info."""
    try:
        first = link.read_text(encoding="utf-8").splitlines()[0].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return next(iter(sorted(Path(first).glob("*.egg-info"))), None)


def _read(meta_dir: str, mtime: float) -> Distribution:
    base = meta_dir.rpartition("/")[2]
    is_dist_info = base.endswith(".dist-info")
    try:
        # One listdir instead of a failed open or stat per optional file: 200 dists add up.
        present = set(os.listdir(meta_dir))
        meta_file = f"{meta_dir}/METADATA" if is_dist_info else f"{meta_dir}/PKG-INFO"
    except NotADirectoryError:  # an old-style *.egg-info file that is itself PKG-INFO
        present, meta_file = set(), meta_dir
    except OSError:
        present, meta_file = set(), f"{meta_dir}/METADATA"
    stem_name, _, stem_version = base.rsplit(".", 1)[0].partition("-")
    headers, problem = _headers(meta_file)
    direct_url, editable = (
        _direct_url(Path(meta_dir, "direct_url.json"))
        if "direct_url.json" in present
        else (None, False)
    )
    return Distribution(
        name=catalog.canonical(headers.name or stem_name),
        version=headers.version or stem_version.split("-")[0] or "0",
        installer=_first_line(f"{meta_dir}/INSTALLER") if "INSTALLER" in present else "",
        requested="REQUESTED" in present,
        editable=editable,
        format="dist-info" if is_dist_info else "egg-info",
        installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(mtime))) if mtime else "",
        direct_url=direct_url,
        requires=tuple(headers.requires),  # every line: in_effect() keeps what holds
        problem=problem,
    )


class _Headers:
    """The core-metadata headers envguard needs: the first Name and Version, every
    Requires-Dist.

    Header lines are ``Key: value``; indented lines continue the previous header, and only
    License and Description use them, so they are skipped (the pattern anchors the key at the
    line's start). One regex pass over the block: the stdlib email parser reads it 4x slower
    and a loop over its lines 2x, and a snapshot reads 200 of them.
    """

    _WANTED = re.compile(rb"^(name|version|requires-dist)[ \t\r\f\v]*:(.*)$", re.I | re.M)

    def __init__(self, raw: bytes) -> None:
        self.name = self.version = ""
        self.requires: list[str] = []
        for key, value in self._WANTED.findall(raw):
            text = value.strip().decode("utf-8", "replace")
            kind = key.lower()
            if kind == b"requires-dist":
                self.requires.append(text)
            elif kind == b"name":
                self.name = self.name or text
            else:
                self.version = self.version or text


def _headers(path: str) -> tuple[_Headers, str | None]:
    """Read only the header block: descriptions can be megabytes and say nothing we need."""
    try:
        raw = _read_head(path)
    except FileNotFoundError:
        return _Headers(b""), (
            f"no {os.path.basename(path)}: half-installed? version taken from the folder name"
        )
    except OSError as exc:
        return _Headers(b""), (
            f"{os.path.basename(path)} unreadable ({exc.strerror}); version from folder name"
        )
    blank = _BLANK_LINE.search(raw)  # \n\n, or \r\n\r\n in a file written on Windows
    parsed = _Headers(raw[: blank.start()] if blank else raw)
    if not parsed.name or not parsed.version:
        return parsed, (
            f"{os.path.basename(path)} has no Name/Version header; taken from the folder name"
        )
    return parsed, None


_BLANK_LINE = re.compile(rb"\r?\n\r?\n")


# os.read rather than open(): a buffered file object costs more than the read itself on the
# small files a snapshot opens twice per distribution.
def _read_head(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        raw = os.read(fd, _HEADER_CHUNK)
        while not _BLANK_LINE.search(raw) and len(raw) % _HEADER_CHUNK == 0:
            more = os.read(fd, _HEADER_CHUNK)
            if not more:
                break
            raw += more
    finally:
        os.close(fd)
    return raw


def _direct_url(path: Path) -> tuple[str | None, bool]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, False
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None, False
    dir_info = data.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return strip_url_credentials(data["url"]), editable


def _first_line(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return ""
    return raw.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
