"""Every screen people read, as text that fits its width (:mod:`.layout`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard._units import human_bytes, shown
from envguard.output.layout import (
    INDENT,
    Painter,
    block,
    headline,
    listing,
    plural,
    severities,
    wrap,
)
from envguard.output.layout import path as _p

if TYPE_CHECKING:  # annotations only: the snapshot screen must not import the drift engine
    from envguard.bisect.trials import Event
    from envguard.drift import Change, DriftReport, Member
    from envguard.fleet import Node, NodeChange
    from envguard.model import Benchmark, Snapshot
    from envguard.price import Moved, Price
    from envguard.restore.backups import Backups
    from envguard.restore.build import Outcome
    from envguard.restore.caches import CacheStep
    from envguard.restore.code import CodeStep, WorkMoved
    from envguard.restore.plan import Plan, Skipped
    from envguard.restore.steps import PartFailed, Step
    from envguard.results import Failed, Result
    from envguard.results.backups import BackupsDone
    from envguard.results.bisect import BisectDone, TrialRow
    from envguard.results.diff import DiffDone
    from envguard.results.export import ExportDone
    from envguard.results.fleet import FleetDone
    from envguard.results.journal import LogDone, RunDone, RunRefused
    from envguard.results.preflight import PreflightDone
    from envguard.results.protect import ProtectDone, UnprotectDone
    from envguard.results.restore import RestoreDone, RestorePlanned
    from envguard.results.snapshot import SnapshotDone
    from envguard.results.tools import ToolAdded, ToolRemoved, ToolsListed
    from envguard.targets import Resnapshot

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "dim"}
# The subject column is as wide as its longest subject up to this; a longer one has its
# values on the line below, in their column (flashinfer-python, CUDA_VISIBLE_DEVICES fit)
_SUBJECT_MAX = 22
_NODE_CHANGES = 8  # a node's changes on the fleet screen, unless -v


@dataclass(frozen=True, kw_only=True)
class Human:
    """``verbosity``: -1 quiet (the verdict only), 0 normal, 1 verbose (info rows in full)."""

    width: int = 80
    color: bool = False
    verbosity: int = 0
    expand: bool = False
    show_patch: bool = False
    show_all: bool = False

    @property
    def p(self) -> Painter:
        return Painter(self.width, self.color)

    def format(self, result: Result) -> str:
        lines = list(self.renderers()[result.kind](result))
        # a screen said as it happened (restore's steps) leaves nothing, not an empty line
        return block(lines) if lines else ""

    def renderers(self) -> dict[str, Callable[[Any], Iterator[str]]]:
        """Each result kind's screen, by its ``kind``: a new kind adds its line here, and
        tests/test_renderers.py holds every kind in :mod:`envguard.results` to one."""
        return {
            "diff": self._diff,
            "preflight": self._preflight,
            "run": self._run,
            "run refused": self._run_refused,
            "snapshot": self._snapshot,
            "fleet": self._fleet,
            "log": self._log,
            "export": self._export,
            "protect": self._protect,
            "unprotect": self._unprotect,
            "backups": self._backups,
            "tool add": self._tool_add,
            "tool list": self._tool_list,
            "tool remove": self._tool_remove,
            "restore": self._restore,
            "bisect": self._bisect,
            "error": self._error,
        }

    # --- diff, preflight, run: lists of changes ---------------------------------------------

    def _diff(self, r: DiffDone) -> Iterator[str]:
        report = r.report
        yield from self._verdict(report, r.fail_on)
        live = r.venv or r.other  # the venv, or the second lockfile, read against the first
        if self.verbosity >= 0 and live:
            for line in wrap(f"{_p(live)} against {_p(r.lock)}", self.p.width, 2, first=""):
                yield self.p.paint(line, "dim")
        if self.verbosity < 0:
            return
        yield from self.changes(report.changes, show_info=r.fail_on == "any")
        yield from self._notes(report.notes)
        yield from self._accept(r.accept)

    def _accept(self, accept: Resnapshot | None, where: str = "") -> Iterator[str]:
        """The last line of a drift screen: drift that was meant is recorded into the lock,
        and the lockfile committed, so that the next diff is clean."""
        if accept is None:
            return
        # in backticks, as the screen quotes every command (a cause's install)
        parts = [f"meant it? {where}`{accept.command(_p)}`"]
        if accept.commit:
            parts.append(f"then `git add {_p(accept.lock)} && git commit`")
        if len(", ".join(parts)) <= self.p.width:
            yield ", ".join(parts)
            return
        # too long for one line: the commit on a line of its own, not cut after "git"
        for i, part in enumerate(parts):
            yield from wrap(part + ("," if i < len(parts) - 1 else ""), self.p.width, 2,
                            first="" if i == 0 else "  ")  # fmt: skip

    def _verdict(self, report: DriftReport, fail_on: str) -> Iterator[str]:
        """The verdict first, its word coloured; wrapped like everything else."""
        counts = ", ".join(severities(report.counts()))
        if not report.changes:
            label, style, rest = "No drift", "bold green", f": {report.new} matches {report.old}"
        elif report.fails(fail_on):
            label, style, rest = "Drift", "bold red", f": {counts} since {report.old}"
        else:
            level = "any change" if fail_on == "any" else f"{fail_on} or above"
            label, style = "No drift", "bold green"
            rest = f" since {report.old}: nothing at {level} ({counts} below)"
        lines = wrap(label + rest, self.p.width, 2, first="")
        yield self.p.paint(label, style) + lines[0][len(label) :]
        yield from lines[1:]

    def changes(self, changes: tuple[Change, ...], show_info: bool = False) -> Iterator[str]:
        """``show_info``: info rows too (-v, or --fail-on any, where they are the drift)."""
        shown = [c for c in changes if c.severity != "info" or self.verbosity > 0 or show_info]
        hidden = [c for c in changes if c not in shown]
        width = min(_SUBJECT_MAX, max((len(c.subject) for c in shown), default=0))
        for c in shown:
            yield from self.change(c, width)
        if hidden:
            names = listing(list(dict.fromkeys(c.subject for c in hidden)), most=4)
            text = f"and {plural(len(hidden), 'info change')}: {names} (-v shows them)"
            lines = wrap(text, self.p.width, 2, first="")  # continued lines indented, as all
            yield from (self.p.paint(line, "dim") for line in lines)
        if not self.expand and any(c.members for c in shown):
            yield self.p.paint("--expand lists the packages of each group", "dim")
        if self.show_patch:
            for c in changes:
                if c.patch:
                    yield self.p.paint(f"--- change to {c.subject}", "bold")
                    yield c.patch.rstrip("\n")

    def change(self, c: Change, subject_width: int) -> Iterator[str]:
        yield from headline(
            c.severity, c.subject, shown(c.old, c.unit), shown(c.new, c.unit), self.p,
            label_style=_STYLE[c.severity], subject_width=subject_width,
        )  # fmt: skip
        yield from wrap(c.why, self.p.width)
        if c.cause:
            yield from (self.p.paint(x, "dim") for x in wrap(c.cause, self.p.width))
        if self.expand:
            for member in c.members:
                yield from wrap(_member(member), self.p.width, INDENT + 2, first=" " * INDENT)

    def _notes(self, notes: tuple[str, ...]) -> Iterator[str]:
        for note in notes:
            label = self.p.paint("warning:", "yellow")
            lines = wrap(note, self.p.width, INDENT, first="warning: ")
            yield label + lines[0][len("warning:") :]
            yield from lines[1:]

    def _preflight(self, r: PreflightDone) -> Iterator[str]:
        report = r.forecast.report
        if not report.changes:
            safe = self.p.paint("Safe", "bold green")
            yield f"{safe}: this install changes nothing envguard tracks"
            if r.price is not None:
                yield from self.price(r.price)
            return
        verdict = (
            self.p.paint("Would break the training set", "bold red")
            if r.forecast.critical()
            else self.p.paint("Would change the environment", "yellow")
        )
        counts = ", ".join(severities(report.counts()))
        yield f"{verdict}: {counts} in {_p(r.venv)}"
        if self.verbosity < 0:
            return
        for line in r.forecast.reasons:
            yield from wrap(line, self.p.width, 2, first="  ")
        yield from self.changes(report.changes)
        if r.price is not None:
            yield from self.price(r.price)
        yield from self._hint(r.hint, "give it a venv of its own instead")

    def price(self, price: Price) -> Iterator[str]:
        """What the install would cost the lock's benchmark: the verdict and its figures,
        what moved, and how it was measured."""
        label, style, rest = _price_said(price)
        lines = wrap(f"{label}: {rest}", self.p.width, 2, first="")
        yield self.p.paint(label, style) + lines[0][len(label) :]
        yield from lines[1:]
        if price.moved:  # the ML stack first; the forecast above lists every package
            names = listing([f"{m.name} {_moved(m)}" for m in price.moved])
            yield from wrap(f"it moves {names}", self.p.width, 4, first="  ")
        yield from self._notes(price.notes)
        if self.verbosity < 0:
            return
        from envguard.bisect.moves import shell

        each = _price_runs(price)
        how = wrap(
            f"measured by `{shell(price.command)}` in two rebuilds of the venv, with the "
            f"install and without, in turn ({each}; {_took(price.seconds)}); the training "
            "venv untouched", self.p.width, 4, first="  ",
        )  # fmt: skip
        yield from (self.p.paint(line, "dim") for line in how)

    def _hint(self, command: str, what: str) -> Iterator[str]:
        if command:
            yield from wrap(f"{what}: {command}", self.p.width, 2, first="")

    def _run_refused(self, r: RunRefused) -> Iterator[str]:
        """The install not run: its price, above --max-cost."""
        from envguard.bisect.moves import shell

        lines = wrap(
            f"Refused: `{_short(r.price.install)}` was not run: its price is more than "
            f"--max-cost {r.max_cost:.0%} allows", self.p.width, 2, first="",
        )  # fmt: skip
        yield self.p.paint("Refused", "bold red") + lines[0][len("Refused") :]
        yield from lines[1:]
        yield from self.price(r.price)
        if self.verbosity >= 0:
            anyway = shell(("envguard", "run", "--", *r.price.install))
            yield from wrap(f"to install it anyway: {anyway}", self.p.width, 2, first="")

    def _run(self, r: RunDone) -> Iterator[str]:
        e = r.recorded.entry
        lines = wrap(
            f"envguard: `{_short(e.command)}` exited {e.exit_code}; "
            f"{len(e.added)} added, {len(e.changed)} changed, {len(e.removed)} removed "
            f"(journal: {_p(r.recorded.journal_path)})", self.p.width, 2, first="",
        )  # fmt: skip
        yield self.p.paint("envguard", "bold") + lines[0][len("envguard") :]
        yield from lines[1:]
        if self.verbosity >= 0:
            if r.price is not None:
                yield from self.price(r.price)
            yield from self.changes(r.recorded.report.changes)
            yield from self._hint(
                r.hint, "to move it out of the training venv (this venv becomes the tool, the "
                "training venv is rebuilt from the lock)",
            )  # fmt: skip

    # --- snapshot -----------------------------------------------------------------------------

    def _snapshot(self, r: SnapshotDone) -> Iterator[str]:
        snap = r.snapshot
        if self.verbosity < 0:
            yield r.lockfile
            return
        torch = f"torch {snap.torch.version}" if snap.torch else "no torch"
        yield from wrap(
            f"Snapshot of {_p(snap.venv.path)} → {_p(r.lockfile)}: Python {snap.python.version}, "
            f"{plural(len(snap.packages), 'distribution')}, {torch}",
            self.p.width, 2, first="",
        )  # fmt: skip
        if r.venv_from:  # which venv, and why that one: an implicit pick is not a surprise
            yield from wrap(r.venv_from, self.p.width, 18, first=f"  {'venv from':<15} ")
        for what, value in _facts(snap):
            yield from wrap(value, self.p.width, 18, first=f"  {what:<15} ")
        if r.archive:
            yield from wrap(
                f"saved the compile caches to {_p(r.archive)} ({human_bytes(r.archive_bytes)})",
                self.p.width, 4, first="  ",
            )  # fmt: skip
            yield from self._kept_out(r)
        yield from self._notes(snap.warnings)

    def _kept_out(self, r: SnapshotDone) -> Iterator[str]:
        """Whether git will leave the archive out of a commit, and what to do if not."""
        if r.in_store:
            said = "in the project's cache-store, under its hash: the lock finds it there"
        elif r.archive_tracked:
            said = (f"git tracks it all the same (committed before): `git rm --cached "
                    f"{_p(r.archive or '')}` and commit, or every clone carries it")  # fmt: skip
        elif r.gitignore and r.gitignore_added:
            said = f"added to {_p(r.gitignore)}, so git leaves it out: commit that file too"
        elif r.gitignore:
            said = f"git leaves it out ({_p(r.gitignore)})"
        else:
            return
        yield from wrap(said, self.p.width, 4, first="  ")

    # --- fleet ------------------------------------------------------------------------------

    def _fleet(self, r: FleetDone) -> Iterator[str]:
        report = r.report
        bad = [n for n in report.nodes if n.fails]
        nodes = plural(len(report.nodes), "node")
        groups = plural(len(report.groups), "group")
        head = (
            self.p.paint(
                f"{len(bad)} of {nodes} {'drifts' if len(bad) == 1 else 'drift'}", "bold red"
            )
            + " from the lock"
            if bad
            else self.p.paint(
                f"All {nodes} match the lock"
                if len(report.nodes) > 1
                else "The node matches the lock",
                "bold green",
            )
        )
        yield f"{head}; {groups} of nodes that agree"
        if self.verbosity < 0:
            return
        lock = ", ".join(f"{k} {v}" for k, v in report.lock.items())
        yield from wrap(lock, self.p.width, INDENT, first=self.p.paint("lock", "bold") + " " * 6)
        names = _node_names(report.nodes)
        width = min(_SUBJECT_MAX, max(map(len, names.values()), default=0))
        agreeing = 0
        for node in report.nodes:
            if not (node.fails or node.differs or self.show_all):
                agreeing += 1
                continue
            label = "drift" if node.fails else "ok"
            facts = [f"{d.name}: {d.old} → {d.new}" for d in node.differs]
            # the host with its first differing fact; the rest below it, one per line, so that a
            # long one (a 12-digit cache fingerprint, a GPU list) never runs past the width
            yield from headline(label, names[node.file], "", facts[0] if facts else "", self.p,
                                label_style="bold red" if node.fails else "green",
                                subject_width=width)  # fmt: skip
            for fact in facts[1:]:
                yield from wrap(fact, self.p.width, INDENT + width + 2)
            yield from self._node_changes(node.changes, r.fail_on)
        if agreeing:
            verb = "matches" if agreeing == 1 else "match"
            yield f"{plural(agreeing, 'node')} {verb} the lock (--all lists them)"
        for problem in report.problems:
            yield from wrap(
                problem, self.p.width, INDENT, first=self.p.paint("unusable", "yellow") + "  "
            )
        for note in report.notes:
            yield from wrap(
                note, self.p.width, INDENT, first=self.p.paint("note", "dim") + "      "
            )
        yield from self._accept(r.accept, "on a drifted node: ")

    def _node_changes(self, changes: tuple[NodeChange, ...], fail_on: str) -> Iterator[str]:
        """Eight a node of those at ``fail_on``, every one with -v; --json has them all, at
        every severity, each with its members."""
        from envguard.drift.report import counts_at

        counted = [c for c in changes if counts_at(c.severity, fail_on)]
        shown = list(changes) if self.verbosity > 0 else counted[:_NODE_CHANGES]
        for c in shown:
            yield from wrap(change_line(c), self.p.width)
        more, below = len(counted) - len(shown), len(changes) - len(counted)
        if self.verbosity > 0 or not (more > 0 or below):
            return
        parts = [f"{more} more" if more > 0 else "", f"{below} below {fail_on}" if below else ""]
        left = f"and {', '.join(p for p in parts if p)}: envguard fleet --json lists all"
        for line in wrap(f"{left} (-v shows them)", self.p.width):
            yield self.p.paint(line, "dim")

    # --- log, export, protect, backups --------------------------------------------------------

    def _log(self, r: LogDone) -> Iterator[str]:
        if not r.entries:
            yield f"no journal entries in {_p(r.journal)}"
            return
        for i, e in enumerate(r.entries, start=1):
            counts = f"+{len(e.added)} ~{len(e.changed)} -{len(e.removed)}"
            when = e.finished.replace("T", " ").rstrip("Z")
            yield f"#{i:<3} {when}  {e.user}@{e.host}  exit {e.exit_code}  {counts}"
            yield from wrap(" ".join(e.command), self.p.width, 5)

    def _export(self, r: ExportDone) -> Iterator[str]:
        yield f"wrote {_p(r.output)} ({r.format}, PEP 751): {plural(r.packages, 'package')}"

    def _protect(self, r: ProtectDone) -> Iterator[str]:
        p = r.protection
        yield f"protected {_p(p.venv)}: {plural(len(p.pins), 'pin')} in {_p(p.constraints)}"
        yield from wrap(
            "pip: always (the venv's pip.conf); uv: when the venv is activated or through "
            "envguard run", self.p.width, 2, first="  ",
        )  # fmt: skip
        yield from wrap(
            "a tool that needs another torch gets a venv of its own: envguard tool add NAME "
            "REQUIREMENT...", self.p.width, 2, first="  ",
        )  # fmt: skip

    def _unprotect(self, r: UnprotectDone) -> Iterator[str]:
        yield f"unprotected {_p(r.venv)}" if r.lifted else f"{_p(r.venv)} was not protected"

    def _backups(self, r: BackupsDone) -> Iterator[str]:
        listed = r.backups
        for note in listed.recovered:  # put right first, as the next restore would
            yield from wrap(
                note, self.p.width, INDENT, first=self.p.paint("recovered", "yellow") + " "
            )
        for b in listed.removed:
            why = ", left by an interrupted restore" if b.interrupted else ""
            done = f"removed {_p(b.path)} (freed {human_bytes(b.bytes)}){why}"
            yield from wrap(done, self.p.width, 2, first="")
        for path in listed.kept_in_use:
            yield f"{self.p.paint('kept', 'yellow')} {_p(path)}: a process still runs from it"
        if not listed.backups:
            yield f"no backups beside {_p(listed.venv)}"
        for b in listed.backups:
            # what removing it frees: most of a backup is uv's cache, linked, and stays
            set_aside = b.created.replace("T", " ").rstrip("Z")
            kept = f"frees {human_bytes(b.bytes)}, set aside {set_aside}"
            yield from wrap(kept, self.p.width, 2, first=_p(b.path) + "  ")
        yield from self._backups_unfinished(listed)

    def _backups_unfinished(self, listed: Backups) -> Iterator[str]:
        """The new venvs restores began: one being built now, and what killed ones left."""
        for b in listed.building:
            what = f"being built by a restore running now (pid {listed.running or '?'})"
            yield from wrap(what, self.p.width, 2, first=_p(b.path) + "  ")
        for b in listed.left_over:
            begun = b.created.replace("T", " ").rstrip("Z")
            what = f"left by an interrupted restore begun {begun}, frees {human_bytes(b.bytes)}"
            yield from wrap(what, self.p.width, 2, first=_p(b.path) + "  ")
        if not listed.left_over:
            return
        them = "it" if len(listed.left_over) == 1 else "them"
        hint = f"envguard backups --prune removes {them}"
        if listed.running is not None:  # the running one may be putting one right itself
            hint = f"a restore is running (pid {listed.running or '?'}): after it, {hint}"
        yield from wrap(hint, self.p.width, 2, first="")

    # --- tools --------------------------------------------------------------------------------

    def _tool_add(self, r: ToolAdded) -> Iterator[str]:
        t = r.tool
        what = ", ".join(t.requirements) or "the venv restore moved aside"
        torch = f"torch {t.torch}, " if t.torch else ""
        yield from wrap(
            f"{self.p.paint('Built tool', 'bold green')} {t.name} at {_p(t.path)}: {what} "
            f"({torch}{plural(t.packages, 'package')}, {human_bytes(t.bytes)} of its own); "
            f"lock {_p(t.lock)}", self.p.width, 2, first="",
        )  # fmt: skip
        yield from self._tool_use(t.name)

    def _tool_use(self, name: str) -> Iterator[str]:
        yield f"  run it:  envguard tool run {name} -- python -m ..."
        yield f"  or:      $(envguard tool path {name})/bin/python ..."
        yield "  the training venv is untouched"

    def _tool_list(self, r: ToolsListed) -> Iterator[str]:
        for name in r.added:
            yield f"{self.p.paint('Built tool', 'bold green')} {name}"
        if not r.tools:
            yield f"no tools beside {_p(r.train)} (envguard tool add NAME REQUIREMENT...)"
        width = min(_SUBJECT_MAX, max((len(t.name) for t in r.tools), default=0))
        for t in r.tools:
            state = {True: "matches its lock", False: "differs from its lock", None: "no lock"}
            label, style = ("ok", "green") if t.matches else ("drift", "yellow")
            torch = f"torch {t.torch}" if t.torch else "no torch"
            yield from headline(label, t.name, "", f"{torch}, {state[t.matches]}", self.p,
                                label_style=style, subject_width=width)  # fmt: skip
            reqs = ", ".join(t.requirements) or "moved from the training venv"
            yield from wrap(
                f"{_p(t.path)}: {reqs}; {plural(t.packages, 'package')}, "
                f"{human_bytes(t.bytes)} of its own", self.p.width,
            )  # fmt: skip

    def _tool_remove(self, r: ToolRemoved) -> Iterator[str]:
        t = r.tool
        yield from wrap(
            f"removed tool {t.name} ({_p(t.path)}, freed {human_bytes(t.bytes)}) and its lock",
            self.p.width, 2, first="",
        )  # fmt: skip

    def _restore(self, r: RestoreDone) -> Iterator[str]:
        """A restore's steps are streamed as they happen (``restore_step``): nothing is left
        to say at the end but its error, which goes to stderr."""
        yield from ()

    def _error(self, r: Failed) -> Iterator[str]:
        yield r.message

    # --- restore, streamed step by step ---------------------------------------------------------

    def restore_plan(self, planned: RestorePlanned) -> str:
        """The plan, before anything is done: a dry run's whole screen, else said unless -q;
        nothing without a venv step (--code, --cache)."""
        if planned.plan is None or (self.verbosity < 0 and not planned.dry_run):
            return ""
        full, unchanged = planned.dry_run, planned.unchanged
        return block(self._plan(planned.plan, full=full, unchanged=unchanged))

    def _plan(self, plan: Plan, *, full: bool, unchanged: bool) -> Iterator[str]:
        if unchanged:
            yield from wrap(
                f"{self.p.paint('Already matches the lock', 'bold green')}: {_p(plan.venv)} "
                "(nothing rebuilt; --rebuild forces it)", self.p.width, 2, first="",
            )  # fmt: skip
            return
        # the interpreter the build runs, named before anything is done (#23)
        how = plan.found_by if plan.found_by.startswith("-") else f"found by {plan.found_by}"
        where = f" ({_p(plan.interpreter)}, {how})" if plan.interpreter else ""
        yield from wrap(
            f"{self.p.paint('Restore plan', 'bold')} for {_p(plan.venv)}: Python {plan.python}"
            f"{where}, {plural(len(plan.pins), 'pin')}; uv asks {plan.indexes}",
            self.p.width, 2, first="",
        )  # fmt: skip
        if plan.sources:
            yield from wrap(plan.sources, self.p.width, 2, first="  ")
        # the pins from where most come are said once, in a count; the others one by one
        common = Counter(pin.source for pin in plan.pins).most_common(1)
        usual = common[0][0] if common else ""
        shown = [pin for pin in plan.pins if full or pin.source != usual]
        width = min(36, max((len(pin.requirement) for pin in shown), default=0))
        for pin in shown:
            yield from headline("pin", pin.requirement, "", pin.source, self.p, subject_width=width)
        if len(shown) < len(plan.pins):
            rest = len(plan.pins) - len(shown)
            yield from wrap(
                f"and {plural(rest, 'pin')} from {usual} (--dry-run lists every pin)",
                self.p.width, 2, first="",
            )  # fmt: skip
        for c in plan.changes:
            yield from headline("changes", c.name, c.old, c.new, self.p, label_style="yellow")
        for removal in plan.removals:
            yield from wrap(removal.summary, self.p.width, INDENT,
                            first=self.p.paint("goes away", "red") + " ")  # fmt: skip
        for s in plan.skipped:
            yield from wrap(skipped_line(s), self.p.width, INDENT,
                            first=self.p.paint("cannot pin", "yellow") + " ")  # fmt: skip
        if plan.system_site_packages:
            yield "the venv sees the base interpreter's packages (--system-site-packages)"
        if plan.split:
            yield from wrap(
                f"the old venv becomes tool {plan.split} at {_p(plan.split_to)}, as it is, "
                "instead of a backup", self.p.width, 2, first="",
            )  # fmt: skip
        if not plan.replaces_existing:
            yield f"{_p(plan.venv)} does not exist yet: it will be created"

    def restore_step(self, step: Step) -> str:
        return block(self.step_renderers()[type(step)](step))

    def step_renderers(self) -> dict[type, Callable[[Any], Iterator[str]]]:
        """Each restore step's lines, by its type (:data:`envguard.restore.steps.Step`): a
        new step adds its line here, and tests/test_renderers.py holds every one to one."""
        from envguard.restore.build import Outcome
        from envguard.restore.caches import CacheStep
        from envguard.restore.code import CodeStep, WorkMoved
        from envguard.restore.steps import PartFailed

        return {
            Outcome: self._venv_step,
            CacheStep: self._cache_step,
            CodeStep: self._code_step,
            WorkMoved: self._work_moved,
            PartFailed: self._part_failed,
        }

    def _venv_step(self, o: Outcome) -> Iterator[str]:
        for note in o.recovered:
            yield from wrap(
                note, self.p.width, INDENT, first=self.p.paint("recovered", "yellow") + " "
            )
        if o.unchanged:
            return
        yield (
            f"{self.p.paint('Restored', 'bold green')} {_p(o.venv)}: "
            f"{plural(len(o.plan.pins), 'package')} match the lock"
        )
        if o.backup:
            yield from wrap(f"the old venv is kept at {_p(o.backup)}", self.p.width, 2, first="")
        if o.tool:
            name = o.tool.rstrip("/").rsplit("/", 1)[-1]
            yield from wrap(
                f"the old venv is now tool {name} at {_p(o.tool)}, as it was: "
                f"envguard tool run {name} -- COMMAND", self.p.width, 2, first="",
            )  # fmt: skip
        if o.protection:
            yield f"envguard protect's pins: {o.protection}"
        if o.import_check:
            yield f"import torch: {o.import_check}"

    def _cache_step(self, step: CacheStep) -> Iterator[str]:
        if step.missing:
            yield from wrap(
                f"no compile caches were saved beside the lock ({_p(step.archive)}): none "
                "restored", self.p.width, 2, first="",
            )  # fmt: skip
            return
        # a dry run made every check the real run makes: it says what that one would do
        done = (
            "would unpack cache" if step.dry_run else self.p.paint("Restored cache", "bold green")
        )
        for kind, path, files in zip(step.kind, step.paths, step.files, strict=True):
            yield from wrap(
                f"{done}: {kind}, {plural(files, 'file')} into {_p(path)}",
                self.p.width, 2, first="",
            )  # fmt: skip

    def _part_failed(self, failed: PartFailed) -> Iterator[str]:
        label = {"venv": "Venv", "caches": "Caches", "code": "Code"}[failed.part]
        yield from wrap(
            f"{self.p.paint(label + ' not restored', 'bold red')}: {failed.reason}",
            self.p.width, 2, first="",
        )  # fmt: skip

    def _work_moved(self, moved: WorkMoved) -> Iterator[str]:
        if moved.stash:
            yield from wrap(
                f"saved your uncommitted work as {moved.stash}", self.p.width, 2, first=""
            )
        else:
            yield "your uncommitted work is back in place"

    def _code_step(self, code: CodeStep) -> Iterator[str]:
        stays = bool(code.snapshot_head) and code.head != code.snapshot_head
        same = (
            f", which has the snapshot's code (its commit {code.snapshot_head[:12]}; only "
            "envguard's own files changed since)"
            if stays
            else ""
        )
        if code.dry_run:
            move = (
                f"would stay at HEAD {code.head[:12]}"
                if stays
                else (f"would check out {code.head[:12]}")
            )
            patch = (
                f"apply the snapshot's patch of {plural(code.files, 'file')}"
                if code.files
                else "apply no patch (the snapshot had no uncommitted change)"
            )
            yield from wrap(
                f"{move}{_in(code.root)}{same}, {patch}; uncommitted work is stashed first",
                self.p.width, 2, first="",
            )  # fmt: skip
            yield from self._code_links(code, "would make")
            return
        for note in code.recovered:
            yield from wrap(
                note, self.p.width, INDENT, first=self.p.paint("recovered", "yellow") + " "
            )
        where = code.branch or "detached HEAD"
        patch = (
            f"with the snapshot's uncommitted change ({plural(code.files, 'file')})"
            if code.files
            else "and no uncommitted change, as the snapshot had"
        )
        yield from wrap(
            f"{self.p.paint('Restored code', 'bold green')}{_in(code.root)}: HEAD at "
            f"{code.head[:12]} ({where}){same} {patch}", self.p.width, 2, first="",
        )  # fmt: skip
        yield from self._code_links(code, "made")
        if code.kept:
            yield from wrap(f"envguard's own files kept in place: {', '.join(code.kept)}",
                            self.p.width, 2, first="")  # fmt: skip
        if code.back:
            yield from wrap(f"to go back: {code.back}", self.p.width, 2, first="")

    def _code_links(self, code: CodeStep, verb: str) -> Iterator[str]:
        """A link the patch makes may point anywhere (a teammate's ``~/.ssh``): named, so
        that nobody is surprised where it leads; git makes it a link, never a file."""
        if not code.links:
            return
        yield from wrap(
            f"the snapshot's patch {verb} {plural(len(code.links), 'symbolic link')}, "
            "as links only (nothing is written through them): " + ", ".join(code.links),
            self.p.width, 2, first="",
        )  # fmt: skip

    # --- bisect -------------------------------------------------------------------------------

    def _bisect(self, r: BisectDone) -> Iterator[str]:
        """GOOD and BAD, the moves, every trial, then the culprits and what puts each back
        (a BisectDone; a refusal never gets here: it is an error line)."""
        from envguard.bisect.moves import shell

        unit = f" {r.unit}" if r.unit else ""
        yield from self._bisect_verdict(r)
        if self.verbosity < 0:
            return
        values = {k: self._bisect_value(r, v) + (unit if r.metric else "")
                  for k, v in (("GOOD", r.good), ("BAD", r.bad))}  # fmt: skip
        wide = max(map(len, values.values()))
        live = f"{_p(r.venv)}, with the working tree, caches and variables here"
        for index, label, where in ((1, "GOOD", _p(r.lock)), (2, "BAD", live)):
            runs = self._bisect_runs(r, index)
            yield from wrap(f"{values[label]:>{wide}}{runs}  {where}", self.p.width, INDENT,
                            first=f"{label:<{INDENT}}")  # fmt: skip
            if label == "GOOD" and r.recorded is not None:
                yield from wrap(self._bisect_recorded(r, r.recorded), self.p.width, INDENT)
        if r.metric:
            how = f"--metric {shell((r.metric,))}" + (f", {r.direction} is better"
                                                       if r.direction else "")  # fmt: skip
        else:
            how = "exit status 0 is good"
        yield from wrap(f"`{shell(r.command)}`: {how}; {self._bisect_trial_runs(r)}",
                        self.p.width, INDENT)  # fmt: skip
        width = min(_SUBJECT_MAX, max(len(m.label) for m in r.moves))
        for i, m in enumerate(r.moves):
            label = plural(len(r.moves), "move") if i == 0 else ""
            yield from headline(label, m.label, m.old, m.new, self.p, subject_width=width)
        yield from self._bisect_trials(r)
        yield from self._bisect_culprits(r, unit)
        for note in r.notes:
            yield from wrap(note, self.p.width, INDENT, first=self.p.paint("note", "dim") + " " * 6)
        if r.work:
            yield from wrap(f"the trials are kept in {_p(r.work)}", self.p.width, INDENT, first="")

    @staticmethod
    def _bisect_recorded(r: BisectDone, bench: Benchmark) -> str:
        """What GOOD is held to: the lock's own benchmark, as it measured when taken."""
        band = f", GOOD within {r.within:.0%}" if r.within is not None else ""
        return f"the lock recorded {bench_figures(bench)}{band}"

    @staticmethod
    def _bisect_trial_runs(r: BisectDone) -> str:
        """How often a trial runs: ``--runs``, and on where a metric's verdict could turn."""
        from envguard.bisect.search import REFERENCE_RUNS

        runs = f"the median of {r.runs} runs" if r.runs > 1 else "1 run"
        if r.metric and r.runs < REFERENCE_RUNS[0]:
            return f"{runs} a trial, up to {REFERENCE_RUNS[0]} where its verdict could turn"
        return f"{runs} a trial"

    def _bisect_verdict(self, r: BisectDone) -> Iterator[str]:
        took = f"{plural(len(r.trials), 'trial')}, {r.seconds:.1f} s"
        if r.stop:
            label, style = "No culprit", "bold yellow"
            rest = f" after {took}: {r.why() or r.stop}"
        else:
            label, style = ("Culprit" if len(r.culprits) == 1 else "Culprits"), "bold red"
            if len(r.culprits) == 1:
                m = r.culprits[0].move
                names = f"{m.subject} {m.old} → {_short_new(m.old, m.new)}"
            else:
                names = " and ".join(c.move.subject for c in r.culprits) + " together"
            rest = f": {names} ({took})"
        lines = wrap(label + rest, self.p.width, 2, first="")
        yield self.p.paint(label, style) + lines[0][len(label) :]
        yield from lines[1:]

    def _bisect_runs(self, r: BisectDone, index: int) -> str:
        """GOOD's (1) or BAD's (2) runs beside its median, where there were several: how
        many, and the lowest and highest (`` (3 runs, 21.2-21.9)``)."""
        from envguard.bisect.metric import runs_said

        trial = r.reference(index)
        if trial is None or len(trial.values) < 2 or not r.metric:
            return ""
        return f" ({runs_said(trial.values)})"

    def _bisect_value(self, r: BisectDone, value: float | None) -> str:
        from envguard.bisect.metric import said

        return said(value, exits=not r.metric)

    def _bisect_trials(self, r: BisectDone) -> Iterator[str]:
        """One row a trial: what it applied, its metric and verdict, its time; why a trial
        said nothing below it."""
        every = len(r.moves)

        def applied(t: TrialRow, room: int) -> str:
            if not t.applied:
                return "nothing (GOOD)"
            if len(t.applied) == every:  # one move alone is named
                return f"{t.applied[0].label} (BAD)" if every == 1 else f"all {every} moves (BAD)"
            return _fitted([m.label for m in t.applied], room)

        # the column an 80-column screen has; a wider one grows it only as far as a row needs,
        # so that the metric stays beside what it measured
        fits = max(20, self.p.width - 37)
        room = min(fits, max([43, *(len(applied(t, 10**6)) for t in r.trials)]))
        yield self.p.paint(f"{'trial':>5}  {'applied':<{room}}  {'metric':>8}  {'verdict':<12}"
                           f"{'time':>6}", "bold")  # fmt: skip
        shown = {"unbuildable": "cannot build"}
        for t in r.trials:
            what = applied(t, room)
            verdict = shown.get(t.verdict, t.verdict)
            style = {"bad": "red", "good": "green"}.get(t.verdict, "yellow")
            yield (f"{t.index:>5}  {what:<{room}}  {self._bisect_value(r, t.value):>8}  "
                   f"{self.p.paint(f'{verdict:<12}', style)}{t.seconds:>4.1f} s")  # fmt: skip
            if t.failure:
                for line in wrap(t.failure, self.p.width, 7):
                    yield self.p.paint(line, "dim")

    def _bisect_culprits(self, r: BisectDone, unit: str) -> Iterator[str]:
        from envguard.bisect.moves import shell
        from envguard.results.bisect import UNTOLD

        if r.stop in UNTOLD:  # no search began: naming every move says nothing
            return
        if r.stop:
            among = ", ".join(m.subject for m in r.suspects)
            yield from wrap(f"among {among}", self.p.width, INDENT, first="suspects  ")
            return
        good = self._bisect_value(r, r.good)  # exit 0 → fails, where exit statuses decide
        if len(r.culprits) > 1:
            yield from wrap(f"together: {good} → {self._bisect_value(r, r.together)}{unit}",
                            self.p.width, INDENT, first="culprits  ")  # fmt: skip
        for c in r.culprits:
            m = c.move
            effect = f"{good} → {self._bisect_value(r, c.alone)}{unit}"
            said = f"{m.subject} {m.old} → {_short_new(m.old, m.new)}: "
            said += effect if len(r.culprits) == 1 else f"alone {effect}"
            alone = len(r.culprits) == 1
            yield from wrap(said, self.p.width, INDENT + 2,
                            first="culprit   " if alone else " " * INDENT)  # fmt: skip
            # each command whole on its line, as every value on a screen
            pad = " " * (INDENT if alone else INDENT + 2)
            commands = [
                f"`{shell(tuple(_p(a) if a.startswith('/') else a for a in argv))}`"
                for argv in c.fix
            ]
            lead = f"{pad}put it back: "
            if any(len(lead + c) + 3 > self.p.width for c in commands):  # each below, whole
                yield lead.rstrip()
                lead = pad
            for i, command in enumerate(commands):
                yield lead + command + (" &&" if i < len(commands) - 1 else "")
                lead = " " * len(lead)

    def bisect_status(self, event: Event) -> str:
        """The status line of the trial that runs: what it applied, its values so far."""
        from envguard.bisect.metric import number

        what = ", ".join(m.label for m in event.applied) or "nothing (GOOD)"
        values = " ".join(number(v) for v in event.values)
        line = f"trial {event.trial}: {what}" + (f": {values}" if values else "")
        room = max(20, self.p.width - 40)  # the bar, counts and time take the rest
        return line if len(line) <= room else line[: room - 1] + "…"

    def price_status(self, event: Event) -> str:
        """The status line of ``preflight --bench``: which side runs, its values so far."""
        from envguard.bisect.metric import number

        side = "with the install" if event.applied else "the venv as it is"
        values = " ".join(number(v) for v in event.values)
        return f"{side}: {values}" if values else side


def change_line(c: Change | NodeChange) -> str:
    """A change in one line, where there are many (a fleet's nodes, guard's ranks): its
    values, or its reason where it has none (an install group, a cache built for another
    stack)."""
    values = " → ".join(shown(v, c.unit) for v in (c.old, c.new) if v) or c.why
    return f"{c.severity} {c.subject}: {values}"


def skipped_line(s: Skipped) -> str:
    """A lock entry a restore cannot pin, on the plan's screen and in the errors that refuse
    it: ``name 1.0: why``."""
    return f"{s.name} {s.version}: {s.reason}"


def _member(m: Member) -> str:
    """``+ name 1.0`` (came), ``~ name 1.0 → 2.0`` (moved), ``- name 1.0`` (went), and what
    brought it in brackets."""
    said = (
        f"+ {m.name} {m.new}" if m.added
        else f"- {m.name} {m.old}" if m.removed
        else f"~ {m.name} {m.old} → {m.new}"
    )  # fmt: skip
    return f"{said} ({m.cause})" if m.cause else said


def _node_names(nodes: Sequence[Node]) -> dict[str, str]:
    """Each node file's name on screen: its host, and the file's name too where one host is
    in several files (two ranks of one node), else they would read alike."""
    from envguard.lockfile import SUFFIX

    twice = {h for h, n in Counter(n.host for n in nodes).items() if n > 1}
    stems = Counter(Path(n.file).name for n in nodes)

    def named(node: Node) -> str:
        name = Path(node.file).name
        file = name.removesuffix(SUFFIX) if stems[name] == 1 else _p(node.file)
        return f"{node.host} ({file})" if node.host in twice else node.host

    return {n.file: named(n) for n in nodes}


def _in(root: str) -> str:
    shown = _p(root)
    return "" if shown == "." else f" in {shown}"


def _facts(snap: Snapshot) -> Iterator[tuple[str, str]]:
    names = {"cpython": "CPython", "pypy": "PyPy"}
    impl = names.get(snap.python.implementation, snap.python.implementation)
    yield "Python", f"{impl} {snap.python.version} ({snap.python.abi})"
    if snap.torch:
        t = snap.torch
        git = f", git {t.git_version[:7]}" if t.git_version else ""
        read = f"(read from {t.source}{git})"
        if t.index_url:
            yield "torch", f"{t.version} from {t.index_url} {read}"
        else:  # pip and uv record no index: saying PyPI would be a guess
            yield "torch", f"{t.version} {read}, source unknown"
    for b in snap.torch_family:
        yield b.name, b.version
    cuda = snap.cuda
    for label, lib in (("CUDA runtime", cuda.runtime), ("cuDNN", cuda.cudnn), ("NCCL", cuda.nccl)):
        if lib:
            yield label, f"{lib.version} ({lib.wheel or lib.source})"
    gpus = ", ".join(f"{g.name} (sm {g.compute_capability})" for g in snap.gpu.gpus)
    yield "GPUs", f"{gpus or 'none'}; driver {snap.gpu.driver or 'none'}"
    family = {"torch", *(b.name for b in snap.torch_family)}
    libs = ", ".join(f"{k} {v}" for k, v in snap.key_libraries.items() if k not in family)
    if libs:
        yield "libraries", libs
    for c in snap.caches:
        entries = plural(c.entries, "entry", "entries")
        state = (
            f"{entries}, {plural(c.files, 'file')}, {human_bytes(c.bytes)}"
            if c.exists
            else "absent"
        )
        yield f"{c.kind} cache", f"{_p(c.path)}: {state}"
    if snap.code:
        code = snap.code
        dirty = f"dirty, {plural(len(code.changed), 'file')}" if code.dirty else "clean"
        head = code.head[:12] or "(no commits)"
        yield "code", f"{_p(code.root)} @ {head} {code.branch or 'detached'} ({dirty})"
    yield "env vars", f"{len(snap.environ)} training-relevant"
    host = snap.host
    yield (
        "host",
        f"{host.hostname}, {host.os}, {plural(host.cpu_count, 'CPU')}, "
        f"{human_bytes(host.memory_bytes)}",
    )
    if snap.bench:
        figures, command = bench_lines(snap.bench)
        yield "benchmark", figures
        yield "", command


def bench_lines(bench: Benchmark) -> tuple[str, str]:
    """A recorded benchmark: what it measured over how many runs (``21.5 Ktok/s (5 runs,
    21.2-21.9), higher is better``), and what ran, where (```python train.py` in src``)."""
    from envguard.bisect.moves import shell

    better = f", {bench.direction} is better" if bench.direction else ""
    where = f" in {bench.cwd}" if bench.cwd else ""
    return f"{bench_figures(bench)}{better}", f"`{shell(bench.command)}`{where}"


def bench_figures(bench: Benchmark) -> str:
    """``21.5 Ktok/s (5 runs, 21.2-21.9)``; ``exit 0 (5 runs)`` where exit statuses decide."""
    from envguard.bisect.metric import runs_said, said

    unit = f" {bench.unit}" if bench.unit and bench.metric else ""
    value = said(bench.median, exits=not bench.metric)
    runs = runs_said(bench.values) if bench.metric else plural(bench.runs, "run")
    return f"{value}{unit} ({runs})"


def _price_said(price: Price) -> tuple[str, str, str]:
    """The price's verdict word, its style, and the rest of its line."""
    from envguard import price as p
    from envguard.bisect.metric import median, said

    exits = not price.metric
    unit = f" {price.unit}" if price.unit and price.metric else ""
    was = said(median(price.before), exits=exits) if price.before else "-"
    now = said(median(price.after), exits=exits) if price.after else "-"
    moved = f"{was} → {now}{unit}"
    change = price.change
    shown = change is not None and price.metric and round(abs(change), 2) > 0
    share = f" ({change:+.0%})" if shown else ""
    if price.verdict == p.BREAKS:
        return (
            "Breaks the benchmark",
            "bold red",
            (f"after this install it fails ({price.why}); it measured {was}{unit} before"),
        )
    if price.verdict == p.COST:
        return "Costs", "bold red", f"this install would cost {moved}{share}"
    if price.verdict == p.MOVES:
        return (
            "Moves",
            "bold red",
            (
                f"this install would move the benchmark {moved}{share} (the lock records no "
                "direction: which is better, envguard cannot say)"
            ),
        )
    if price.verdict == p.CANNOT_TELL:
        return (
            "Cannot tell",
            "yellow",
            (
                f"{moved}{share}, a gap inside the runs' own spread: a quieter machine, a longer "
                "benchmark or more --runs may tell them apart"
            ),
        )
    if price.verdict == p.GAIN:
        return "No cost", "bold green", f"this install would make it faster, {moved}{share}"
    return "No cost measured", "bold green", f"{moved}{share}, within the runs' noise"


def _price_runs(price: Price) -> str:
    """``3 runs each``; where the install's side broke, what each side ran."""
    from envguard.bisect.metric import runs_said

    if len(price.before) == len(price.after):
        return f"{runs_said(price.before).split(',')[0]} each"
    if not price.after:
        return f"{plural(len(price.before), 'run')} without, the first with broke"
    return f"{plural(len(price.before), 'run')} without, {len(price.after)} with"


def _took(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 120 else f"{whole} s"


def _moved(m: Moved) -> str:
    if not m.old:
        return f"{m.new} (new)"
    if not m.new:
        return f"{m.old} (removed)"
    return f"{m.old} → {_short_new(m.old, m.new)}"


def _short(command: tuple[str, ...]) -> str:
    from envguard.attribution import short_command  # only the run screen needs it

    return short_command(command)


def _fitted(labels: list[str], room: int) -> str:
    """As many labels as fit in ``room``, the rest counted: "torch, sglang and 3 more"."""
    for n in range(len(labels), 0, -1):
        rest = len(labels) - n
        text = ", ".join(labels[:n]) + (f" and {rest} more" if rest else "")
        if len(text) <= room:
            return text
    return f"{len(labels)} moves"


def _short_new(old: str, new: str) -> str:
    """``+cu130`` for 2.11.0+cu130 after 2.11.0+cu128: only the build label differs."""
    a, _, la = old.partition("+")
    b, _, lb = new.partition("+")
    return f"+{lb}" if a == b and la and lb else new
