"""The user's command as it runs in a venv envguard built (a bisect trial, a pricing copy):
the words that name the live venv's interpreter or scripts pointed at the copy's.

Users write their benchmark as ``python bench.py``, and as their shell history and CI
scripts have it: ``.venv/bin/python bench.py``, ``/abs/.venv/bin/torchrun …``, ``uv run
python bench.py``. Run as written in a copy, the first is "not found" (the trial's clone of
the repository has no ``.venv``: git ignores it) and the others run the live venv, so that
every trial measures the same venv and bisect or pricing says "no cost". The lock keeps the
words as the user gave them; they are rebased here, when they run, so that older locks and
older envguards read the same command.

A word names the live venv when its folder, resolved against where the user runs the
command, is the venv's ``bin`` (resolved too: a linked venv folder is the venv); the
interpreter itself is never resolved, since ``bin/python`` links to the base interpreter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# uv's options that make ``uv run`` use the active venv (the copy) as it is: without them it
# finds the project's venv (the live one) and syncs it to the project's lock first.
UV_RUN_IN_COPY = ("--active", "--no-sync")
# variables whose entries reach a venv's files from a run in another one
_REACHING = ("PYTHONPATH", "LD_LIBRARY_PATH")


@dataclass(frozen=True, kw_only=True)
class Live:
    """The live venv(s) a copy stands in for (GOOD's recorded folder and BAD's), and where
    the user runs the command: what a relative word is read against."""

    venvs: tuple[Path, ...]
    cwd: Path

    @classmethod
    def of(cls, venvs: Iterable[str | Path], cwd: Path) -> Live:
        seen: list[Path] = []
        for v in venvs:
            real = Path(v).resolve()
            if real not in seen:
                seen.append(real)
        return cls(venvs=tuple(seen), cwd=cwd)

    def script(self, word: str) -> str | None:
        """The name of the live venv's script or interpreter ``word`` names (``python``,
        ``torchrun``), or None when it names none (a shell line is no one path)."""
        if "/" not in word or any(c.isspace() for c in word) or "\0" in word:
            return None
        path = Path(self.cwd, word)
        folder = path.parent.resolve()
        if any(folder == v / "bin" for v in self.venvs) and path.name not in ("", ".", ".."):
            return path.name
        return None

    def inside(self, entry: str) -> bool:
        """Whether the path ``entry`` (a variable's entry, a word) lies in a live venv."""
        if not entry or "\0" in entry:
            return False
        path = Path(self.cwd, entry)  # its folder resolved, never the file: bin/python links out
        real = path.parent.resolve() / path.name
        return any(real == v or v in real.parents for v in self.venvs)

    def scripts(self) -> frozenset[str]:
        """The names in the live venvs' ``bin``: a bare word among them is a venv's script,
        which a copy has too."""
        names: set[str] = set()
        for v in self.venvs:
            try:
                names.update(os.listdir(v / "bin"))
            except OSError:
                continue
        return frozenset(names)


def in_copy(argv: Sequence[str], live: Live, copy: Path) -> tuple[str, ...]:
    """``argv`` with each word that names the live venv's interpreter or one of its scripts
    (``--flag=PATH`` too) pointed at the same name in ``copy``, and ``uv run`` told to run
    in the active venv, the copy, as it is."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        name = live.script(value)
        out.append(flag + eq + str(copy / "bin" / name) if name is not None else arg)
        if arg == "run" and i > 0 and _is_uv(argv[i - 1]):
            out.extend(o for o in UV_RUN_IN_COPY if o not in argv[i + 1 :])
    return tuple(out)


def _is_uv(word: str) -> bool:
    return Path(word).name == "uv"


def opaque(argv: Sequence[str], live: Live) -> str:
    """The program envguard cannot read into (``./bench.sh``, ``make bench``, ``bash -c …``):
    no word of the command runs a Python of a venv's, by its path or by a bare name a venv's
    ``bin`` has; "" when one does."""
    if not argv:
        return ""
    scripts = live.scripts() | {"python", "python3"}
    for arg in argv:
        value = arg.partition("=")[2] if arg.startswith("-") else arg
        if live.script(value) is not None or value in scripts or _is_uv(value):
            return ""
    return argv[0]


def reaching(argv: Sequence[str], environs: Iterable[Mapping[str, str]], live: Live) -> list[str]:
    """What of a run in a copy still reaches a live venv, once :func:`in_copy` has rebased
    the command: a word that names a path in it (inside ``bash -c '…'``, a config file),
    ``PYTHONPATH`` or ``LD_LIBRARY_PATH`` entries in it (the live environment's, or the
    lock's). The likeliest cause of a GOOD that measures as BAD."""
    said: list[str] = []
    rebased = {a for a in argv if live.script(a.partition("=")[2] if a.startswith("-") else a)}
    words = [w for a in argv if a not in rebased for w in a.replace("=", " ").split()]
    named = next((w for w in words if "/" in w and live.inside(w)), None)
    if named is not None:
        said.append(f"the command names {named}, in the live venv")
    wrapper = opaque(argv, live)
    inside = _named_in(Path(live.cwd, wrapper), live) if "/" in wrapper else None
    if inside is not None:
        said.append(f"{wrapper} names {inside}, in the live venv")
    for name in _REACHING:
        entries = [e for env in environs for e in env.get(name, "").split(os.pathsep)]
        inside = next((e for e in entries if e and live.inside(e)), None)
        if inside is not None:
            said.append(f"{name} has {inside}, in the live venv")
    return said


_WORD = re.compile(r"[^\s'\"=;:|&()<>`$]+")
_SCRIPT_MOST = 1 << 20  # a wrapper longer than this is no script to read


def _named_in(script: Path, live: Live) -> str | None:
    """The first path in the text file ``script`` (``./bench.sh``) that lies in a live venv,
    read as the shell splits words, near enough: a wrapper envguard runs as it is."""
    try:
        if not script.is_file() or script.stat().st_size > _SCRIPT_MOST:
            return None
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for word in _WORD.findall(text):
        word = str(word)
        if "/" in word and "\0" not in word and (live.script(word) or live.inside(word)):
            return word
    return None


def off_path(value: str, live: Live) -> str:
    """``PATH`` without the live venvs' ``bin``: a script the copy lacks is not found, never
    the live venv's (as ``deactivate`` leaves PATH)."""
    return os.pathsep.join(
        e for e in value.split(os.pathsep) if not (e and live.script(str(Path(e, "x"))))
    )
