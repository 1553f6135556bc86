"""A trial's copy of a custom cache standing in the user's folder while one run lasts.

A custom cache that only the code names (``/scratch/aot-cache`` in a config file) is read
where it is, so a trial can have its own copy of it only there. Where the user allows it
(``bisect --cache-dir PATH``, ``cache-dirs`` in ``[tool.envguard]``), each run sets the
user's folder aside beside itself (a rename: nothing copied, nothing lost), puts the trial's
copy in its place, and after the run removes the copy and puts the folder back, as a careful
person does by hand (``mv cache cache.bak; cp -r good cache; run; rm -rf cache; mv
cache.bak cache``).

A journal beside the work folders names each folder set aside before it is: a bisect killed
mid-run (-9, the machine gone down) leaves the user's folder aside and a copy in its place,
and the next bisect puts the folder back (:func:`collect`), as its own exit would have.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard import _fs, _run
from envguard._confine import Root

JOURNALS = "aside-*.json"
_ASIDE = ".envguard-aside-"  # a set-aside folder's name: .<name>.envguard-aside-<pid>
_TRIAL = ".envguard-trial-"  # a trial's copy on its way out


@dataclass(frozen=True, kw_only=True)
class Place:
    """One folder of the user's, and what stands in it while a run lasts."""

    folder: Path  # the user's, as the lock names it
    source: Path | None  # the copy's origin: GOOD's unpacked archive, or the folder itself

    def aside(self, tag: str) -> Path:
        return self.folder.with_name(f".{self.folder.name}{_ASIDE}{tag}")


class StandIns:
    """The stand-ins of one bisect: its journal (``journal``, naming ``owner``: a bisect
    that runs keeps it) and a tag its set-aside folders carry."""

    def __init__(self, journal: Path, owner: str, tag: str) -> None:
        self.journal, self.owner, self.tag = journal, owner, tag

    @contextlib.contextmanager
    def standing(self, places: Sequence[Place]) -> Iterator[None]:
        """Each folder set aside and the trial's copy in its place, for the ``with`` body;
        then every folder as it was, whatever ended the body."""
        if not places:
            yield
            return
        entries = [_Entry(folder=_fs.normal(p.folder), aside=_fs.normal(p.aside(self.tag)),
                          had=p.folder.exists() or p.folder.is_symlink(),
                          made=tuple(map(str, _fs.missing_parents(p.folder))))
                   for p in places]  # fmt: skip
        try:
            with _run.held_interrupts():
                self._write(entries)  # before any folder moves: a crash from here is put right
                for entry, place in zip(entries, places, strict=True):
                    _stand(entry, place.source)
            yield
        finally:
            with _run.held_interrupts():
                for entry in entries:
                    _put_back(entry)
                self.journal.unlink(missing_ok=True)

    def _write(self, entries: list[_Entry]) -> None:
        doc = {"owner": self.owner, "places": [e.to_json() for e in entries]}
        _fs.atomic_write(self.journal, json.dumps(doc).encode())


@dataclass(frozen=True, kw_only=True)
class _Entry:
    folder: Path
    aside: Path
    had: bool  # the user's folder was there: set aside, put back
    made: tuple[str, ...]  # the folders above it that were not there, the nearest first

    def to_json(self) -> dict[str, object]:
        return {"folder": str(self.folder), "aside": str(self.aside), "had": self.had,
                "made": list(self.made)}  # fmt: skip


def _stand(entry: _Entry, source: Path | None) -> None:
    """The user's folder aside, the copy in its place (from the folder set aside, when the
    trial has the user's own)."""
    if entry.had:
        entry.folder.rename(entry.aside)
    if source is not None and _fs.normal(source) == entry.folder:
        source = entry.aside if entry.had else None
    root = Root(entry.folder, what="a cache copy")  # made, with the folders above it
    if source is not None and source.is_dir():
        root.copy_tree("", source)


def _put_back(entry: _Entry) -> None:
    """The copy gone and the user's folder back; where it was not there, the folders made
    for the copy gone too. A folder set aside that is not there (the crash came before it
    was) leaves what is in its place, which is then the user's own."""
    aside_there = entry.aside.is_dir() and not entry.aside.is_symlink()
    if entry.had and not aside_there and not entry.aside.is_symlink():
        return
    _remove(entry.folder, entry.aside)
    if entry.had:
        entry.aside.rename(entry.folder)
        return
    for made in entry.made:
        with contextlib.suppress(OSError):  # one that holds anything else stays
            Path(made).rmdir()


def _remove(folder: Path, aside: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.is_dir():  # out of the user's way at once, then removed
        trial = aside.with_name(aside.name.replace(_ASIDE, _TRIAL))
        folder.rename(trial)
        shutil.rmtree(trial, ignore_errors=True)


def collect(base: Path, alive: Callable[[str], bool]) -> None:
    """The journals of bisects that no longer run: each folder they set aside put back. A
    journal is envguard's own, but read as any file of the disk: an entry whose set-aside
    folder is not the one a stand-in makes beside its folder is left alone."""
    for journal in base.glob(JOURNALS):
        try:
            doc = json.loads(_fs.read_regular(journal))
            if alive(str(doc["owner"])):
                continue
            entries = [_entry(e) for e in doc["places"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for entry in entries:
            if entry is not None:
                with contextlib.suppress(OSError):
                    _put_back(entry)
        journal.unlink(missing_ok=True)


def _entry(raw: dict[str, object]) -> _Entry | None:
    folder, aside = Path(str(raw["folder"])), Path(str(raw["aside"]))
    made = raw.get("made", [])
    if not isinstance(made, list) or not isinstance(raw.get("had"), bool):
        return None
    ours = (aside.parent == folder.parent and aside.name.startswith(f".{folder.name}{_ASIDE}")
            and folder.is_absolute() and _fs.is_cache_place(_fs.normal(folder))
            and all(folder.is_relative_to(m) for m in map(Path, made)))  # fmt: skip
    if not ours:
        return None
    return _Entry(folder=folder, aside=aside, had=bool(raw["had"]), made=tuple(map(str, made)))


def journal_for(base: Path) -> Path:
    return base / f"aside-{os.getpid()}.json"
