"""The install journal: one JSON line per command run through ``envguard run``.

It sits beside the venv's lockfile (``lockfiles/<name>.envguard-journal.jsonl``); appends are
serialised with a flock and written in one ``write``, so concurrent runs never interleave.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envguard._fs import read_regular
from envguard.drift import Change, Member
from envguard.drift.report import ABSENT
from envguard.errors import JournalError, LockfileError
from envguard.record import Record
from envguard.redact import redact_argv, redact_data

# 2: a change's members are records; 3: so are the packages added, removed and changed (#22).
# Older schemas are still read.
SCHEMA = 3
SUFFIX = ".envguard-journal.jsonl"


@dataclass(frozen=True, kw_only=True)
class Entry(Record):
    schema: int
    command: tuple[str, ...]  # credentials stripped
    user: str
    host: str
    cwd: str
    started: str
    finished: str
    exit_code: int
    # the packages the command added (old: absent), removed (new: absent) and changed
    added: tuple[Member, ...] = ()
    removed: tuple[Member, ...] = ()
    changed: tuple[Member, ...] = ()
    changes: tuple[Change, ...] = ()

    def touched(self) -> set[str]:
        """Names of the packages this command added, removed or changed."""
        return {m.name for m in (*self.added, *self.removed, *self.changed)}

    def validate(self, path: str) -> None:
        # what attribution learns of a record is the version each list left: each list's
        # packages are absent on its own side only
        for key, members, sides, rule in (
            ("added", self.added, (True, False), "old only"),
            ("removed", self.removed, (False, True), "new only"),
            ("changed", self.changed, (False, False), "neither old nor new"),
        ):
            for i, m in enumerate(members):
                if (m.added, m.removed) != sides:
                    raise LockfileError(
                        f"{path}.{key}[{i}]: {m.old!r} → {m.new!r}: a package {key} is "
                        f"{ABSENT!r} in {rule}"
                    )


def path_for(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name.removesuffix(".envguard.toml") + SUFFIX)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def clean_command(argv: Sequence[str]) -> tuple[str, ...]:
    """The command as run, its secrets redacted: ``--token X`` and ``-u user:pass`` as two
    words, ``env DB_PASSWORD=… cmd``, credentials in URLs."""
    return redact_argv(argv)


def who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "unknown")


def append(path: Path, entry: Entry) -> None:
    # the journal is committed: every string of the entry (cwd, changes) is redacted too
    line = (json.dumps(redact_data(entry.to_dict()), ensure_ascii=False) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            if stat.S_ISREG(os.fstat(fd).st_mode):  # fsync means nothing to a device
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # say which file: "No space left on device" alone names none
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def read(path: Path) -> list[Entry]:
    """Every entry, oldest first; a damaged line is an error naming its line number."""
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalError(f"{path}: cannot read the journal ({exc})") from exc
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise JournalError(f"{path}:{number}: not a journal entry (bad JSON)") from exc
        if (
            isinstance(data, dict)
            and isinstance(data.get("schema"), int)
            and (data["schema"] > SCHEMA)
        ):
            raise JournalError(
                f"{path}:{number}: journal schema {data['schema']} is newer "
                "than this envguard reads; upgrade envguard"
            )
        if isinstance(data, dict) and data.get("schema") == 1:
            data = _from_schema_1(data)
        if isinstance(data, dict) and data.get("schema") in (1, 2):
            data = _from_schema_2(data)
        try:
            entries.append(Entry.from_dict(data, path=f"{path.name}:{number}"))
        except LockfileError as exc:  # the record checks, worded for lockfiles too
            raise JournalError(str(exc)) from exc
    return entries


# How schema 1 wrote a member of a change: "+ name 1.0", "- name 1.0", "~ name 1.0 → 2.0", and
# what brought it in brackets.
_MEMBER_LINE = re.compile(r"([+~-]) (\S+) (\S+)(?: → (\S+))?(?: \((.*)\))?")


def _from_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 entry as schema 2 has it: its changes' members, lines for people then, read
    into records here, the one place an old journal is read."""
    changes = data.get("changes")
    if not isinstance(changes, list):
        return data  # the record check names what is wrong
    upgraded = [{**c, "members": [_member(m) for m in c["members"]]}
               if isinstance(c, dict) and isinstance(c.get("members"), list) else c
               for c in changes]  # fmt: skip
    return {**data, "changes": upgraded}


def _member(line: object) -> object:
    m = _MEMBER_LINE.fullmatch(line) if isinstance(line, str) else None
    if m is None:
        return line
    sign, name, first, second, cause = m.groups()
    old, new = {"+": ("absent", first), "-": (first, "absent"), "~": (first, second or "")}[sign]
    return {"name": name, "old": old, "new": new, "cause": cause or ""}


def _from_schema_2(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 or -2 entry's packages as schema 3 has them: they were lines, "name 1.0"
    (added, removed) and "name 1.0 → 2.0" (changed), read into records here."""
    out = dict(data)
    for key, side in (("added", "new"), ("removed", "old"), ("changed", "")):
        lines = data.get(key)
        if isinstance(lines, list):
            out[key] = [_package(line, side) for line in lines]
    return out


def _package(line: object, side: str) -> object:
    """``name 1.0`` as a member on ``side`` ("new": added, "old": removed), or ``name 1.0 →
    2.0`` as one that moved (``side`` ""); what is neither is left for the record check."""
    if not isinstance(line, str):
        return line
    name, space, rest = line.partition(" ")
    old, arrow, new = rest.partition(" → ")
    if not (name and space and rest) or bool(arrow) != (not side):
        return line
    if side == "new":
        return {"name": name, "old": ABSENT, "new": rest, "cause": ""}
    if side == "old":
        return {"name": name, "old": rest, "new": ABSENT, "cause": ""}
    return {"name": name, "old": old, "new": new, "cause": ""}
