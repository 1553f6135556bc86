"""Everything people see: rich tables, progress, and the JSON envelope for machines.

Only this module and ``cli.py`` import rich or click.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from envguard import __version__
from envguard._units import human_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from envguard.drift import DriftReport
    from envguard.fleet import FleetReport
    from envguard.journal import Entry
    from envguard.model import Snapshot
    from envguard.preflight import Forecast
    from envguard.restore import Outcome, Plan
    from envguard.restore.backups import Backups
    from envguard.restore.parts import CacheStep, CodeStep
    from envguard.watch import Watched

# rich costs ~40 ms to import: it is loaded by the functions that draw, so that --json,
# --quiet and error paths never pay for it.

JSON_SCHEMA = 1
_STYLE = {"critical": "bold red", "warning": "yellow", "info": "dim"}


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    # rich honours NO_COLOR itself; highlight=False keeps versions from being recoloured.
    return Console(stderr=stderr, highlight=False, no_color="NO_COLOR" in os.environ or None)


def envelope(kind: str, result: Any, exit_code: int) -> str:
    """The versioned JSON document every ``--json`` prints; its keys are pinned by a test."""
    doc = {
        "schema": JSON_SCHEMA,
        "tool": "envguard",
        "version": __version__,
        "kind": kind,
        "exit_code": exit_code,
        "result": result,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


def warning_line(message: str) -> None:
    _line("warning:", "yellow", message)


def error_line(message: str) -> None:
    """The one line of a failure, whatever the width or pipe: never wrapped, so a path in it
    stays whole; installers' output in it may carry index URLs."""
    from envguard.redact import strip_url_credentials

    _line("error:", "bold red", strip_url_credentials(message))


def _line(label: str, style: str, message: str) -> None:
    import sys

    from envguard import _term

    text = " ".join(message.split())  # one line, whatever the message carried
    sys.stderr.write(f"{_term.paint(label, style, _term.color(sys.stderr))} {text}\n")
    sys.stderr.flush()


@contextmanager
def progress(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A transient bar on stderr, driven by the core's (phase, done, total) callback."""
    if not enabled:
        yield lambda phase, done, total: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=max(total, 1))
        bar.update(tasks[phase], completed=done, total=max(total, 1))

    with bar:
        yield update


def snapshot_summary(snap: Snapshot, written_to: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    torch = f"torch {snap.torch.version}" if snap.torch else "no torch"
    out.print(
        f"[bold]Snapshot[/] of {escape(snap.venv.path)} → [bold]{escape(written_to)}[/]: "
        f"Python {snap.python.version}, {len(snap.packages)} distributions, {torch}"
    )
    table = Table(show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("recorded")
    for what, value in _facts(snap):
        table.add_row(what, escape(value))
    out.print(table)
    _print_notes(out, snap.warnings)


def _facts(snap: Snapshot) -> Iterator[tuple[str, str]]:
    yield "Python", f"{snap.python.implementation} {snap.python.version} ({snap.python.abi})"
    if snap.torch:
        t = snap.torch
        yield (
            "torch",
            (
                f"{t.version} from {t.index_url} (read from {t.source}"
                f"{', git ' + t.git_version[:7] if t.git_version else ''})"
            ),
        )
    for b in snap.torch_family:
        yield b.name, b.version
    cuda = snap.cuda
    for label, lib in (("CUDA runtime", cuda.runtime), ("cuDNN", cuda.cudnn), ("NCCL", cuda.nccl)):
        if lib:
            yield label, f"{lib.version} ({lib.wheel or lib.source})"
    gpus = ", ".join(f"{g.name} (sm {g.compute_capability})" for g in snap.gpu.gpus)
    yield "GPUs", f"{gpus or 'none'}; driver {snap.gpu.driver or 'none'}"
    libs = ", ".join(f"{k} {v}" for k, v in snap.key_libraries.items() if k != "torch")
    if libs:
        yield "key libraries", libs
    for c in snap.caches:
        state = (
            f"{c.entries} entries, {c.files} files, {human_bytes(c.bytes)}"
            if c.exists
            else "absent"
        )
        yield f"{c.kind} cache", f"{c.path}: {state}"
    if snap.code:
        code = snap.code
        dirty = f"dirty, {len(code.changed)} files" if code.dirty else "clean"
        yield (
            "code",
            f"{code.root} @ {code.head[:12] or '(no commits)'} {code.branch or ''} ({dirty})",
        )
    yield "env vars", f"{len(snap.environ)} training-relevant"
    host = snap.host
    yield (
        "host",
        f"{host.hostname}, {host.os}, {host.cpu_count} CPUs, {human_bytes(host.memory_bytes)}",
    )


def _print_notes(out: Console, notes: tuple[str, ...]) -> None:
    from rich.markup import escape

    for note in notes:
        out.print(f"[yellow]warning:[/] {escape(note)}")


def diff_report(report: DriftReport, *, expand: bool, show_patch: bool, fails: bool) -> None:
    from rich.markup import escape

    out = console()
    counts = report.counts()
    if not report.changes:
        out.print(f"[bold green]No drift[/]: {escape(report.new)} matches {escape(report.old)}")
        _print_notes(out, report.notes)
        return
    head = ", ".join(f"[{_STYLE[s]}]{n} {s}[/]" for s, n in counts.items() if n)
    if fails:
        out.print(f"[bold red]Drift[/]: {head} since {escape(report.old)}")
    else:
        out.print(f"[bold green]No drift[/] at this --fail-on ({head}) since {escape(report.old)}")
    _changes_table(out, report, expand=expand)
    if not expand and any(c.members for c in report.changes):
        out.print("[dim]--expand lists the packages of each group[/]")
    if show_patch:
        for c in report.changes:
            if c.patch:
                out.print(f"[bold]--- uncommitted change to {escape(c.subject)}[/]")
                out.print(escape(c.patch), markup=True, soft_wrap=True)
    _print_notes(out, report.notes)


def _changes_table(out: Console, report: DriftReport, *, expand: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", expand=False)
    for col in ("severity", "area", "what", "was", "now", "why it matters"):
        table.add_column(col, overflow="fold")
    for c in report.changes:
        why = escape(c.why) + (f"\n[dim]↳ {escape(c.cause)}[/]" if c.cause else "")
        table.add_row(
            f"[{_STYLE[c.severity]}]{c.severity}[/]",
            c.area,
            escape(c.subject),
            escape(c.old),
            escape(c.new),
            why,
        )
        if expand and c.members:
            table.add_row("", "", "", "", "", escape("\n".join(c.members)))
    out.print(table)


def restore_plan(plan: Plan, *, full: bool = True, unchanged: bool = False) -> None:
    """The plan; without ``full``, only pins from somewhere other than the default index."""
    from rich.markup import escape
    from rich.table import Table

    out = console()
    if unchanged:
        out.print(
            f"[bold green]{escape(plan.venv)} already matches the lock[/]: nothing to rebuild "
            "(--rebuild forces it)"
        )
        return
    out.print(
        f"[bold]Restore plan[/] for {escape(plan.venv)}: Python {plan.python}, "
        f"{len(plan.pins)} pins from {escape(plan.indexes)}"
    )
    shown = [p for p in plan.pins if full or p.source != "the default index"]
    table = Table(show_header=True, header_style="bold")
    table.add_column("pin")
    table.add_column("from")
    for pin in shown:
        table.add_row(escape(pin.requirement), escape(pin.source))
    if shown:
        out.print(table)
    if len(shown) < len(plan.pins):
        out.print(
            f"and {len(plan.pins) - len(shown)} pins from the default index "
            "(--dry-run lists every pin)"
        )
    for line in plan.changes:
        out.print(f"[yellow]changes:[/] {escape(line)}")
    for removal in plan.removals:
        out.print(f"[red]goes away:[/] {escape(removal.summary)}")
    for line in plan.skipped:
        out.print(f"[yellow]cannot pin:[/] {escape(line)}")
    if plan.system_site_packages:
        out.print("the venv sees the base interpreter's packages (--system-site-packages)")
    if not plan.replaces_existing:
        out.print(f"{escape(plan.venv)} does not exist yet: it will be created")


def restore_step(step: object) -> None:
    """One finished step of a restore, printed as soon as it is done."""
    from envguard.restore.build import Outcome
    from envguard.restore.parts import CacheStep, CodeStep

    if isinstance(step, Outcome):
        restore_outcome(step)
    elif isinstance(step, CacheStep):
        _cache_step(step)
    elif isinstance(step, CodeStep):
        _code_step(step)


def restore_outcome(outcome: Outcome) -> None:
    from rich.markup import escape

    out = console()
    for note in outcome.recovered:
        out.print(f"[yellow]recovered:[/] {escape(note)}")
    if outcome.unchanged:
        return
    out.print(
        f"[bold green]Restored[/] {escape(outcome.venv)}: {len(outcome.plan.pins)} "
        "packages match the lock"
    )
    if outcome.backup:
        out.print(f"the old venv is kept at [bold]{escape(outcome.backup)}[/]")
    if outcome.protection:
        out.print(f"envguard protect's pins: {outcome.protection}")
    if outcome.import_check:
        out.print(f"import torch: {escape(outcome.import_check)}")


def restore_saved(saved: str) -> None:
    from rich.markup import escape

    console().print(f"saved your uncommitted work as [bold]{escape(saved)}[/]")


def _code_step(code: CodeStep) -> None:
    from rich.markup import escape

    out = console()
    if code.dry_run:
        out.print(
            f"would check out {code.head[:12]} in {escape(code.root)} and apply a patch of "
            f"{code.files} file{'s' if code.files != 1 else ''} (uncommitted work is "
            "stashed first)"
        )
        return
    if code.saved:
        restore_saved(code.saved)
    where = code.branch or "detached HEAD"
    out.print(
        f"[bold green]Restored code[/]: {escape(code.root)} is at {code.head[:12]} "
        f"({escape(where)}) with the snapshot's patch ({code.files} files)"
    )
    if code.kept:
        out.print(f"envguard's own files kept in place: {escape(', '.join(code.kept))}")


def _cache_step(step: CacheStep) -> None:
    from rich.markup import escape

    out = console()
    if step.dry_run:
        out.print(f"would unpack {escape(step.archive)} if its caches fit this venv")
        return
    for kind, path, files in zip(step.kind, step.paths, step.files, strict=True):
        out.print(f"[bold green]Restored cache[/]: {kind}, {files} files into {escape(path)}")


def backups(listed: Backups) -> None:
    from rich.markup import escape

    out = console()
    for b in listed.removed:
        out.print(f"removed {escape(b.path)} ({human_bytes(b.bytes)})")
    for path in listed.kept_in_use:
        out.print(f"[yellow]kept[/] {escape(path)}: a process still runs from it")
    if not listed.backups:
        out.print(f"no backups beside {escape(listed.venv)}")
    for b in listed.backups:
        out.print(f"{escape(b.path)}  {human_bytes(b.bytes)}  {b.created}")


def run_summary(watched: Watched) -> None:
    """After the command's own output: what it changed, on stderr."""
    from rich.markup import escape

    err = console(stderr=True)
    e = watched.entry
    err.print(
        f"[bold]envguard[/]: `{escape(' '.join(e.command))}` exited {e.exit_code}; "
        f"{len(e.added)} added, {len(e.changed)} changed, {len(e.removed)} removed "
        f"(journal: {escape(str(watched.journal_path))})"
    )
    if watched.report.changes:
        _changes_table(err, watched.report, expand=False)


def journal_table(path: object, entries: list[Entry]) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    if not entries:
        out.print(f"no journal entries in {escape(str(path))}")
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("finished", "who", "exit", "command", "+", "~", "-"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(
            e.finished,
            f"{e.user}@{e.host}",
            str(e.exit_code),
            escape(" ".join(e.command)),
            str(len(e.added)),
            str(len(e.changed)),
            str(len(e.removed)),
        )
    out.print(table)


def preflight(forecast: Forecast) -> None:
    from rich.markup import escape

    out = console()
    if not forecast.report.changes:
        out.print("[bold green]Safe[/]: this install changes nothing envguard tracks")
        return
    verdict = (
        "[bold red]Would break the training set[/]"
        if forecast.critical()
        else ("[yellow]Would change the environment[/]")
    )
    out.print(f"{verdict}: {len(forecast.report.changes)} changes")
    for line in forecast.reasons:
        out.print(f"  {escape(line)}")
    _changes_table(out, forecast.report, expand=True)


def fleet_report(report: FleetReport, *, show_all: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    from envguard.fleet import COLUMNS

    out = console()
    bad = [n for n in report.nodes if n.fails]
    n, n_groups = len(report.nodes), len(report.groups)
    nodes = f"{n} node{'s' if n != 1 else ''}"
    head = (
        f"[bold red]{len(bad)} of {nodes} drift[/] from the lock"
        if bad
        else f"[bold green]All {nodes} match the lock[/]"
    )
    out.print(f"{head}; {n_groups} group{'s' if n_groups != 1 else ''} of nodes that agree")
    for g in report.groups:
        if not g.matches_lock:
            hosts = ", ".join(g.hosts[:8]) + (
                f" and {len(g.hosts) - 8} more" if len(g.hosts) > 8 else ""
            )
            out.print(f"[red]outliers[/] {escape(hosts)}: {escape('; '.join(g.differs))}")
    table = Table(show_header=True, header_style="bold")
    table.add_column("node")
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    table.add_row("[bold]lock[/]", *(escape(report.lock[c]) for c in COLUMNS))
    agreeing = 0
    for node in report.nodes:
        if not node.fails and not node.differs and not show_all:
            agreeing += 1
            continue
        wrong = {d.split(":")[0] for d in node.differs}
        table.add_row(
            escape(node.host),
            *(
                f"[red]{escape(node.facts[c])}[/]" if c in wrong else escape(node.facts[c])
                for c in COLUMNS
            ),
        )
    if agreeing:
        table.add_row(f"{agreeing} nodes", *(["= lock"] * len(COLUMNS)))
    out.print(table)
    for problem in report.problems:
        out.print(f"[yellow]unusable:[/] {escape(problem)}")
