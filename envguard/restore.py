"""Rebuild a venv from a lockfile with uv: plan, build beside the old one, verify, swap.

The plan is a pure function of the lock (and the current venv, for what goes away). Building,
verifying and swapping go through :mod:`envguard.uv` and :mod:`envguard.transaction`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envguard import drift, grouping, transaction
from envguard import uv as uv_backend
from envguard._run import run
from envguard.errors import CommandError, EnvguardError, NotRestored
from envguard.model import Distribution, PackageBuild, Record, Snapshot
from envguard.probes.torch import PYPI_INDEX
from envguard.redact import strip_url_credentials

Progress = Callable[[str, int, int], None]
VERIFIED_AREAS = ("python", "torch", "cuda", "libraries", "packages")


@dataclass(frozen=True, kw_only=True)
class Pin(Record):
    name: str
    requirement: str  # a requirements-file line: "torch==2.11.0+cu128", "x @ url", "-e path"
    source: str  # the index (or URL) it comes from, for people


@dataclass(frozen=True, kw_only=True)
class Removal(Record):
    summary: str  # "sglang 0.5.23 and 46 packages installed with it"
    members: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Plan(Record):
    venv: str
    python: str
    pins: tuple[Pin, ...]
    indexes: str  # how uv is pointed at indexes, in words
    skipped: tuple[str, ...] = ()  # lock entries that cannot be pinned, with the reason
    removals: tuple[Removal, ...] = ()  # what the current venv has that the lock does not
    changes: tuple[str, ...] = ()  # "torch 2.11.0+cu130 → 2.11.0+cu128"
    replaces_existing: bool = False


@dataclass(frozen=True, kw_only=True)
class Overrides:
    """The user's index flags; any of them replaces the indexes inferred from the lock."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    offline: bool = False

    def given(self) -> bool:
        return bool(self.index_url or self.extra_index_urls or self.find_links or self.offline)


@dataclass(frozen=True, kw_only=True)
class Outcome(Record):
    venv: str
    backup: str | None = None
    recovered: tuple[str, ...] = ()
    import_check: str | None = None
    plan: Plan = field(default_factory=lambda: Plan(venv="", python="", pins=(), indexes=""))


def indexes_for(lock: Snapshot, overrides: Overrides) -> uv_backend.Indexes:
    if overrides.given():
        return uv_backend.Indexes(
            index_url=overrides.index_url,
            extra_index_urls=overrides.extra_index_urls,
            find_links=overrides.find_links,
            offline=overrides.offline,
        )
    torch = lock.torch
    pytorch_index = torch is not None and torch.index_url != PYPI_INDEX
    backend = uv_backend.torch_backend_for(torch.variant) if torch and pytorch_index else None
    return uv_backend.Indexes(torch_backend=backend)


def plan(lock: Snapshot, venv: Path, current: Snapshot | None, overrides: Overrides) -> Plan:
    if current is not None and current.venv.kind != "venv":
        raise EnvguardError(
            f"{venv} is a {current.venv.kind}, not a venv: restore builds venvs "
            "and will not replace it; pass --venv NEW_PATH"
        )
    builds = {b.name: b for b in (lock.torch, *lock.torch_family) if b}
    pins, skipped = [], []
    for dist in lock.packages:
        pin, reason = _pin(dist, builds.get(dist.name), overrides)
        if pin:
            pins.append(pin)
        else:
            skipped.append(f"{dist.name} {dist.version}: {reason}")
    return Plan(
        venv=str(venv.absolute()),
        python=lock.python.version,
        pins=tuple(pins),
        indexes=indexes_for(lock, overrides).describe(),
        skipped=tuple(skipped),
        removals=_removals(lock, current),
        changes=_changes(lock, current),
        replaces_existing=current is not None,
    )


def _pin(
    dist: Distribution, build: PackageBuild | None, overrides: Overrides
) -> tuple[Pin | None, str]:
    if dist.problem:
        return None, f"recorded incompletely ({dist.problem})"
    if dist.direct_url:
        return _direct_pin(dist)
    where = strip_url_credentials(overrides.index_url or "the default index")
    if build is not None and build.index_url != PYPI_INDEX:
        # The PyTorch index carries the label in the wheel's own version: pin it exactly.
        source = where if overrides.given() else build.index_url
        return Pin(name=dist.name, requirement=f"{dist.name}=={build.version}", source=source), ""
    return Pin(name=dist.name, requirement=f"{dist.name}=={dist.version}", source=where), ""


def _direct_pin(dist: Distribution) -> tuple[Pin | None, str]:
    url = dist.direct_url or ""
    if url.startswith("file://"):
        path = Path(url.removeprefix("file://"))
        if not path.exists():
            return None, f"installed from {url}, which no longer exists"
        line = f"-e {path}" if dist.editable else f"{dist.name} @ {url}"
        return Pin(name=dist.name, requirement=line, source=str(path)), ""
    return Pin(name=dist.name, requirement=f"{dist.name} @ {url}", source=url), ""


def _removals(lock: Snapshot, current: Snapshot | None) -> tuple[Removal, ...]:
    if current is None:
        return ()
    locked = {d.name for d in lock.packages}
    extra = [d for d in current.packages if d.name not in locked]
    out = []
    for group in grouping.install_groups(extra, []):
        root = group.root or group.members[0]
        others = len(group.members) - 1
        summary = f"{root.name} {root.version}" + (
            f" and {others} packages installed with it" if others else ""
        )
        out.append(
            Removal(summary=summary, members=tuple(f"{d.name} {d.version}" for d in group.members))
        )
    return tuple(out)


def _changes(lock: Snapshot, current: Snapshot | None) -> tuple[str, ...]:
    if current is None:
        return ()
    now = current.versions()
    return tuple(
        f"{name} {now[name]} → {want}"
        for name, want in lock.versions().items()
        if name in now and now[name] != want
    )


def requirements_text(p: Plan) -> str:
    return "".join(f"{pin.requirement}\n" for pin in p.pins)


def verify(lock: Snapshot, built: Snapshot) -> list[drift.Change]:
    """What differs between the lock and the new venv in packages, torch and the CUDA stack."""
    report = drift.compare(lock, built)
    # info-level rows (system libraries outside the venv, another host) do not make it wrong
    return [c for c in report.changes if c.area in VERIFIED_AREAS and c.severity != "info"]


def import_check(python: Path) -> str:
    code = (
        "import torch; print(torch.__version__, 'cuda available' if "
        "torch.cuda.is_available() else 'cuda not available')"
    )
    try:
        return run([str(python), "-c", code], timeout=600).stdout.strip()
    except CommandError as exc:
        raise NotRestored(f"the new venv cannot import torch: {exc}") from exc


def execute(
    lock: Snapshot,
    the_plan: Plan,
    overrides: Overrides,
    *,
    force: bool = False,
    verify_import: bool = False,
    progress: Progress | None = None,
) -> Outcome:
    """Build, verify and swap in the planned venv; the old one is never lost."""
    from envguard import processes, snapshot

    step = progress or (lambda phase, done, total: None)
    paths = transaction.Paths.for_venv(Path(the_plan.venv), transaction.stamp())
    with transaction.locked(paths):
        recovered = transaction.recover(paths)
        if paths.venv.exists() and not force:
            users = processes.using(paths.venv)
            if users:
                listed = "; ".join(f"pid {u.pid}: {u.command}" for u in users[:5])
                raise NotRestored(f"{paths.venv} is in use ({listed}); stop them or pass --force")
        step("create venv", 0, 1)
        python = uv_backend.home_python(the_plan.python, lock.python.home)
        python = python or uv_backend.find_python(the_plan.python)
        transaction.record(paths, "building")
        try:
            _create(paths.new, python, the_plan.python, lock.venv.prompt)
            step("install", 0, len(the_plan.pins))
            with tempfile.TemporaryDirectory(prefix="envguard-restore-") as tmp:
                reqs = Path(tmp) / "requirements.txt"
                reqs.write_text(requirements_text(the_plan), encoding="utf-8")
                uv_backend.sync(paths.new / "bin" / "python", reqs, indexes_for(lock, overrides))
            step("verify", 0, 1)
            transaction.record(paths, "verifying")
            built = snapshot.take(paths.new, default_caches=False, with_code=False, name=lock.name)
            mismatches = [c for c in verify(lock, built) if not _skipped(c, the_plan)]
            if mismatches:
                shown = "; ".join(f"{c.subject}: {c.old} → {c.new}" for c in mismatches[:5])
                raise NotRestored(f"the new venv does not match the lock ({shown})")
            checked = import_check(paths.new / "bin" / "python") if verify_import else None
        except BaseException as exc:
            transaction.discard(paths)
            if isinstance(exc, uv_backend.UvError):
                raise NotRestored(str(exc)) from exc
            raise
        step("swap", 0, 1)
        backup = transaction.swap_in(paths)
        transaction.finish(paths)
    return Outcome(
        venv=str(paths.venv),
        backup=str(backup) if backup else None,
        recovered=tuple(recovered),
        import_check=checked,
        plan=the_plan,
    )


def _create(path: Path, python: str, version: str, prompt: str | None) -> None:
    """A venv of exactly ``version``: the lock's own interpreter first, else uv's search."""
    from envguard.probes.venv import locate

    uv_backend.create_venv(path, python, prompt)
    if locate(path).python.version != version:
        shutil.rmtree(path, ignore_errors=True)
        uv_backend.create_venv(path, uv_backend.find_python(version), prompt)


def _skipped(change: drift.Change, the_plan: Plan) -> bool:
    """Packages the plan could not pin are reported there, not as a verify failure."""
    names = {s.split(" ", 1)[0] for s in the_plan.skipped}
    return change.subject in names or (
        bool(change.members) and all(m.split(" ")[1] in names for m in change.members)
    )
