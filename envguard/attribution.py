"""Who changed a package, by the evidence there is: the install journal, else requirements.

A journal record of ``envguard run`` is a package's cause when it is the newest record to
touch the package before the state compared was taken, and it left the version that state
has: a record made later (``diff A B``, with B older than the record) did not make B, and one
whose version is not there was undone since by a command the journal never saw. Without one,
the cause is the install group the package arrived with (``grouping``: requirement edges,
never install times alone), its root, and the requirement that brought it: "installed with
sglang 0.5.23 (sglang requires torch==2.11.0)". A requirement envguard does not know (uv's
dry run carries none) gives no cause rather than a guessed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from envguard import grouping, requirements
from envguard.drift.report import Member
from envguard.model import Snapshot
from envguard.versions import same


class JournalEntry(Protocol):
    """What attribution needs of a journal record (``envguard.journal.Entry``)."""

    @property
    def command(self) -> tuple[str, ...]: ...
    @property
    def user(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def finished(self) -> str: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def added(self) -> tuple[Member, ...]: ...
    @property
    def removed(self) -> tuple[Member, ...]: ...
    @property
    def changed(self) -> tuple[Member, ...]: ...


@dataclass(frozen=True, kw_only=True)
class Cause:
    """Who or what changed a package: a journal record, or the install it came with."""

    root: str = ""  # "sglang 0.5.23": what the install group was for
    requirement: str = ""  # "sglang requires torch==2.11.0"
    command: str = ""  # "uv pip install sglang", the journal's command in short
    record: int = 0  # its journal record's number
    detail: str = ""  # the journal's full line: command, user@host, time, exit code
    planned: bool = False  # an install that has not happened (preflight's forecast)

    def short(self) -> str:
        """For a change's row: ``by `uv pip install sglang` (journal #3)``, or
        ``installed with sglang 0.5.23 (sglang requires torch==2.11.0)``, or for a forecast
        ``would come with sglang 0.5.23 (…)``."""
        if self.command:
            return f"by `{self.command}` (journal #{self.record})"
        verb = "would come with" if self.planned else "installed with"
        if self.root and self.requirement:
            return f"{verb} {self.root} ({self.requirement})"
        return f"{verb} {self.root}" if self.root else self.requirement

    def member(self) -> str:
        """For a package listed under its install group, whose root is said already."""
        return f"by `{self.command}`" if self.command else self.requirement

    def full(self) -> str:
        return self.detail or self.short()


@dataclass(frozen=True, kw_only=True)
class Install:
    """A journal record made after the snapshot, and the version it left each package at."""

    number: int  # the record's number in the journal, from 1
    entry: JournalEntry
    left: dict[str, str | None]  # None: it removed the package


def causes(
    old: Snapshot,
    new: Snapshot,
    entries: Sequence[JournalEntry] = (),
    groups: Sequence[grouping.InstallGroup] | None = None,
    planned: bool = False,
) -> dict[str, Cause]:
    """Each added or changed package's cause; ``groups``: the install groups, when the
    caller has them already; ``planned``: ``new`` is a forecast, not what happened."""
    a = {d.name: d for d in old.packages}
    b = {d.name: d for d in new.packages}
    added = [d for n, d in b.items() if n not in a]
    changed = [d for n, d in b.items() if n in a and not same(a[n].version, d.version)]
    moved = {d.name for d in (*added, *changed)} | (a.keys() - b.keys())
    out = _from_journal(behind(new, installs_since(old, entries)), moved)
    if groups is None:
        groups = grouping.install_groups(
            added, changed, {d.name: a[d.name].version for d in changed}
        )
    for group in groups:
        needed = [d for d in group.members if d.name not in out]
        if not needed:
            continue
        requirers = _requirers(group)
        for dist in needed:
            old_version = a[dist.name].version if dist.name in a else None
            why = forced_by(dist.name, old_version, requirers.get(dist.name, ()))
            # every top whose requirements reach it: two installs that could each have
            # brought it are both said, never one of them picked
            of_root = " and ".join(f"{t.name} {t.version}" for t in group.brought_by(dist.name))
            if of_root or why:
                out[dist.name] = Cause(root=of_root, requirement=why, planned=planned)
    return out


def installs_since(old: Snapshot, entries: Sequence[JournalEntry]) -> list[Install]:
    """The journal records made after ``old`` was taken, newest first (a record of the
    snapshot's own second counts: the snapshot was taken before the command it let run)."""
    numbered = [
        Install(number=i, entry=e, left=_left(e))
        for i, e in enumerate(entries, start=1)
        if _order(e.finished, old.taken_at) >= 0
    ]
    # appended as each command ends: of two in one second, the later line is the later one
    return sorted(numbered, key=lambda i: (i.entry.finished, i.number), reverse=True)


def behind(new: Snapshot, installs: Sequence[Install]) -> list[tuple[Install, set[str]]]:
    """The records that made ``new`` what it is, each with the names it is the cause of: for
    each name, its newest record made by the time ``new`` was taken, if that record left the
    version ``new`` has. Journaled installs are known installs, never merged with another."""
    now = new.versions()
    seen: set[str] = set()
    out = []
    for install in installs:  # newest first
        if _order(install.entry.finished, new.taken_at) > 0:
            continue  # made after ``new`` was taken: it cannot have made it
        names = install.left.keys() - seen
        seen |= names
        mine = {n for n in names if _same_state(install.left[n], now.get(n))}
        if mine:
            out.append((install, mine))
    return out


def _order(stamp: str, other: str) -> int:
    """-1, 0 or 1 as ``stamp`` is before, in the same second as, or after ``other``; 0 when
    either is no time (a forecast is "planned"): time rules nothing out then."""
    a, b = grouping.seconds(stamp), grouping.seconds(other)
    return 0 if a is None or b is None else (a > b) - (a < b)


def _left(entry: JournalEntry) -> dict[str, str | None]:
    return {m.name: None if m.removed else m.new
            for m in (*entry.removed, *entry.added, *entry.changed)}  # fmt: skip


def _same_state(left: str | None, have: str | None) -> bool:
    if left is None or have is None:
        return left is have
    return same(left, have)


def _from_journal(found: Sequence[tuple[Install, set[str]]], moved: set[str]) -> dict[str, Cause]:
    out: dict[str, Cause] = {}
    for install, names in found:
        entry = install.entry
        cause = Cause(
            command=short_command(entry.command),
            record=install.number,
            detail=f"by `{' '.join(entry.command)}` ({entry.user}@{entry.host}, "
            f"{entry.finished}, exit {entry.exit_code})",
        )
        out.update(dict.fromkeys(names & moved, cause))
    return out


# pip's and uv's options that take a value as the next word: `--reinstall-package torch`
# names no requirement
_VALUED = frozenset(
    [
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "--constraints",
        "-f",
        "--find-links",
        "-i",
        "--index-url",
        "--extra-index-url",
        "--index",
        "--default-index",
        "-p",
        "--python",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--reinstall-package",
        "-P",
        "--upgrade-package",
        "--no-binary",
        "--only-binary",
        "--override",
        "--overrides",
        "--exclude-newer",
        "--index-strategy",
        "--resolution",
        "--prerelease",
        "--python-version",
        "--python-platform",
        "-C",
        "--config-setting",
        "--config-settings",
        "--keyring-provider",
        "--link-mode",
        "--cache-dir",
        "--trusted-host",
        "--platform",
        "--abi",
        "--implementation",
        "--progress-bar",
        "--src",
        "--upgrade-strategy",
        "--report",
        "--log",
        "--proxy",
        "--timeout",
        "--retries",
        "--exists-action",
        "--cert",
        "--client-cert",
        "--group",
        "--extra",
        "--torch-backend",
        "--build-constraint",
        "-b",
        "--no-build-isolation-package",
        "--no-deps-package",
        "--directory",
        "--project",
        "--config-file",
        "--color",
    ]
)


def requirements_in(command: Sequence[str]) -> list[str]:
    """The requirements an install command asks for: ``uv pip install -U sglang==0.5.23
    --find-links DIR`` asks for ``sglang==0.5.23``."""
    words = short_command(command, most=10_000).split(" ")
    verb = next((i for i, w in enumerate(words) if w in ("install", "add", "sync")), None)
    return [] if verb is None else [w for w in words[verb + 1 :] if w and w != "…"]


def tool_hint(command: Sequence[str], *, done: bool) -> str:
    """The command that gives what ``command`` installs a venv of its own, or "" when it
    names no requirement: ``tool add`` before the install, ``restore --split`` after it."""
    from envguard import catalog

    parsed = [r for r in map(requirements.parse, requirements_in(command)) if r is not None]
    # the tool is named after what it is (sglang), not the torch it pins beside it
    named = [r for r in parsed if not catalog.is_protected(r.name)]
    if not parsed:
        return ""
    first = (named or parsed)[0]
    if done:
        return f"envguard restore --split {first.name}"
    return f"envguard tool add {first.name} {' '.join(requirements_in(command))}"


def short_command(command: Sequence[str], most: int = 6) -> str:
    """A command as people name it: the program's name and its words, not its options (nor
    their values), URLs or paths (the journal and --json keep the whole of it)."""
    words: list[str] = []
    skip = False
    for i, word in enumerate(command):
        if skip:
            skip = False
        elif word == "-m" and i + 1 < len(command):  # python -m pip: the module is the tool
            words = [command[i + 1]]
            skip = True
        elif word.startswith("-"):
            skip = word in _VALUED
        elif "://" not in word:
            words.append(word.rsplit("/", 1)[-1] if i == 0 else word)
    words = [w for w in words if "/" not in w]
    return " ".join(words[:most]) + (" …" if len(words) > most else "")


Requirer = tuple[str, requirements.Req]  # ("sglang", the requirement)


def _requirers(group: grouping.InstallGroup) -> dict[str, list[Requirer]]:
    """For each name, the members whose requirement brought it (the group's edges, the
    group's root first): the only requirements that are evidence of its cause."""
    tops = {t.name for t in group.tops()}
    out: dict[str, list[Requirer]] = {}
    for requirer, dep, req in sorted(group.edges, key=lambda e: e[0] not in tops):
        out.setdefault(dep, []).append((requirer, req))
    return out


def forced_by(name: str, old_version: str | None, requirers: Sequence[Requirer]) -> str:
    """The requirement that forced ``name`` off ``old_version`` (or, for a package that was
    not there, pulled it in): "sglang requires torch==2.11.0"; "" when none says.

    ``requirers`` are the packages of the same install only. When none of their requirements
    rules the old version out (``==2.11.0`` admits ``2.11.0+cu128``: the resolver chose the
    other build), the one that names the package is still the fact to show.
    """
    for label, req in requirers:
        if old_version is None or requirements.excludes(req.spec, old_version):
            return f"{label} requires {req.text}"
    return next((f"{label} requires {req.text}" for label, req in requirers), "")
