"""``envguard preflight``: what an install would change, from the installer's own dry run.

``uv pip install …`` runs as ``uv pip install --dry-run --python <venv>``; ``pip install …``
as ``pip install --dry-run --report -`` with the venv's own pip (a venv without pip is
refused: ``pip`` there is another environment's). Nothing is installed. The predicted
environment goes through the same :func:`envguard.drift.compare` as ``diff``, so severities
and reasons are the ones a later ``diff`` would print.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import _run, attribution, catalog, drift, requirements
from envguard import uv as uv_backend
from envguard.errors import ArgumentError, CommandError, InstallerError
from envguard.model import CudaLibrary, CudaStack, Distribution, PackageBuild, Snapshot
from envguard.probes import cuda as cuda_probe
from envguard.probes.torch import variant_of
from envguard.restore.plan import Overrides
from envguard.versions import local, same

PLANNED = "planned"
_UV_LINE = re.compile(r"^\s*([+-])\s+([A-Za-z0-9][\w.\-]*)(?:==(\S+)| @ (\S+))")
# name-version-...whl, as a wheel's file name carries them (PEP 427)
_WHEEL = re.compile(r"/([A-Za-z0-9_.]+)-([^-/]+?)(?:-\d[^-/]*)?-[^-/]+-[^-/]+-[^-/]+\.whl$")
_PIP = re.compile(r"^pip(3(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")
_CUDA_PIN = re.compile(
    r"^(?:cuda-toolkit|nvidia-cuda-runtime(?:-cu\d+)?)(?:\[[^\]]*\])?==(\d+)\.(\d+)"
)
_CUDA_LABEL = re.compile(r"^cu(\d+)(\d)$")  # cu130 -> 13.0, cu128 -> 12.8
_RUNTIME = "nvidia-cuda-runtime"
_SUFFIX = re.compile(r"-cu(\d+)$")  # nvidia-cudnn-cu13: a wheel of CUDA 13


@dataclass(frozen=True, kw_only=True)
class Command:
    installer: str  # "uv" or "pip"
    argv: tuple[str, ...]  # as given
    args: tuple[str, ...]  # what follows `install`, the user's target flags taken out
    target: str | None = None  # the venv or interpreter the user's --python/--prefix names


@dataclass(frozen=True, kw_only=True)
class Planned:
    name: str
    version: str
    requires: tuple[str, ...] = ()  # as the installer's report has them; forecast() cuts them
    requested: bool = False
    extras: tuple[str, ...] = ()  # the extras the command asked of it (pip's requested_extras)


@dataclass(frozen=True, kw_only=True)
class Forecast:
    report: drift.DriftReport
    reasons: tuple[str, ...]  # "would replace torch … because sglang 0.5.23 requires torch==…"

    def critical(self) -> bool:
        return any(c.severity == "critical" for c in self.report.changes)


# Flags that name where an install goes. --python/--prefix may name the venv checked; the
# others install elsewhere, which preflight cannot forecast and run must not let happen.
TARGET_FLAGS = {"--python": "python", "-p": "python", "--prefix": "prefix"}
# (--break-system-packages is not one: it only matters to a system Python, never to a venv)
ELSEWHERE = {"--target", "-t", "--root", "--user", "--system"}
VALUED = {"--target", "-t", "--root"}
# The same, said by the environment: another interpreter for uv or pip, a system install, a
# target or prefix folder. An install envguard runs or forecasts goes without them.
ELSEWHERE_ENV = (
    "PYTHONHOME",
    "UV_PYTHON",
    "UV_SYSTEM_PYTHON",
    "PIP_PYTHON",
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_ROOT",
    "PIP_USER",
)


def parse(argv: Sequence[str]) -> Command:
    if not argv:
        raise ArgumentError("nothing to check: envguard preflight -- uv pip install NAME...")
    tool = Path(argv[0]).name
    rest = list(argv[1:])
    if tool == "uv" and rest[:2] == ["pip", "install"]:
        return _command("uv", argv, rest[2:])
    pip = pip_args(argv)
    if pip is not None:
        if pip[:1] == ["install"]:
            return _command("pip", argv, pip[1:])
        raise InstallerError(
            f"`{' '.join(argv[:3])}` is not an install; preflight checks "
            "`pip install …` and `uv pip install …`"
        )
    if tool == "uv":
        raise InstallerError(
            f"`{' '.join(argv[:3])}` is not an install; preflight checks `uv pip install …`"
        )
    raise InstallerError(
        f"unknown installer {tool!r}: preflight checks `uv pip install …` and `pip install …`"
    )


def pip_args(argv: Sequence[str]) -> list[str] | None:
    """What follows pip when ``argv`` runs pip (``pip``, ``pip3.11``, ``python3 -m pip``, by
    name or by path); None for any other command."""
    name = Path(argv[0]).name
    if _PIP.match(name):
        return list(argv[1:])
    if _PYTHON.match(name) and list(argv[1:3]) == ["-m", "pip"]:
        return list(argv[3:])
    return None


def has_pip(venv: Path) -> bool:
    """Whether ``venv``'s python runs pip: its own, or the base's that a venv with system
    site-packages imports (NGC-style containers), which installs into the venv all the same."""
    if any(venv.glob("lib/python*/site-packages/pip/__init__.py")):
        return True
    probe = "import importlib.util as u, sys; sys.exit(u.find_spec('pip') is None)"
    try:
        return _run.run([str(venv / "bin" / "python"), "-c", probe], check=False).returncode == 0
    except CommandError:  # no interpreter at all: no pip either
        return False


def no_pip(venv: Path, pip: Sequence[str], how: str) -> InstallerError:
    """The refusal of ``pip PIP...`` in a venv without pip, naming what works instead; ``how``:
    the envguard command it was given to (``envguard run``)."""
    works = shlex.join([*how.split(), "--venv", str(venv), "--", "uv", "pip", *pip])
    return InstallerError(
        f"{venv} has no pip (uv makes venvs without one), so pip here would be another "
        f"environment's and install there: run `{works}` instead, or add pip first: "
        f"`{venv}/bin/python -m ensurepip`"
    )


def _command(installer: str, argv: Sequence[str], args: Sequence[str]) -> Command:
    """Take the user's own target flags out of ``args``: preflight passes the venv itself.
    An installer named by path (``V/bin/pip``, ``V/bin/python -m pip``) names its venv too."""
    kept: list[str] = []
    target: str | None = argv[0] if installer == "pip" and "/" in argv[0] else None
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if flag in ELSEWHERE:
            raise InstallerError(
                f"`{flag}` installs outside a venv; preflight forecasts installs into one "
                "(drop it, or name the venv with --venv)"
            )
        if names_target(installer, flag, eq):
            if not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            if not value:
                raise InstallerError(f"`{flag}` needs a value")
            target = value
        else:
            kept.append(arg)
        i += 1
    return Command(installer=installer, argv=tuple(argv), args=tuple(kept), target=target)


def names_target(installer: str, flag: str, eq: str) -> bool:
    """Whether ``flag`` names the environment to install into (pip has no ``-p``)."""
    return flag in TARGET_FLAGS and bool(eq or flag != "-p" or installer == "uv")


def venv_of(cmd: Command, venv: Path | None) -> Path | None:
    """The venv the install command names (its --python or --prefix), checked against
    ``--venv``; None when it names none."""
    if cmd.target is None:
        return venv
    named = venv_root(Path(cmd.target))
    if named is None:
        raise InstallerError(
            f"cannot tell which venv `{cmd.target}` is; name the venv with --venv and drop "
            "the install's own --python/--prefix"
        )
    if venv is not None and named.resolve() != venv.resolve():
        raise InstallerError(
            f"the install targets {named} but --venv is {venv}: preflight checks one venv; "
            "drop one of the two"
        )
    return named


def venv_root(path: Path) -> Path | None:
    """A venv folder, or its interpreter (``V/bin/python``), to the venv folder."""
    for candidate in (path, path.parent.parent):
        if (candidate / "pyvenv.cfg").is_file() or (candidate / "conda-meta").is_dir():
            return candidate
    return None


def dry_run(cmd: Command, venv: Path, sources: Overrides | None = None) -> list[Planned]:
    """The installer's own dry run of ``cmd`` in ``venv``, told envguard's own index flags
    (``sources``: preflight's ``--offline``, ``--find-links``…) besides the command's."""
    python = str(venv / "bin" / "python")
    given = flags_for(cmd, sources) if sources is not None else []
    if cmd.installer == "uv":
        # the user's uv when it resolves, else the one envguard ships with
        uv = shutil.which(cmd.argv[0]) or uv_backend.find_uv()
        argv = [
            uv,
            "pip",
            "install",
            "--dry-run",
            "--python",
            python,
            *cmd.args,
            *given,
        ]
        done = _checked(argv)
        asked = {r.name for a in cmd.args if not a.startswith("-") and (r := requirements.parse(a))}
        return [
            dataclasses.replace(p, requested=p.name in asked)
            for p in _parse_uv(done.stderr + done.stdout)
        ]
    # without pip of its own, `pip install` in the venv is another environment's: its
    # forecast would be of an install that never lands here
    if not has_pip(venv):
        raise no_pip(venv, ["install", *cmd.args], "envguard preflight")
    pip = [python, "-m", "pip", "install", "--dry-run", "--report", "-", "--quiet"]
    done = _checked([*pip, *cmd.args, *given])
    return _parse_pip(done.stdout)


def flags_for(cmd: Command, sources: Overrides) -> list[str]:
    """envguard's index flags as ``cmd``'s installer takes them, less what the command says
    itself (uv refuses a flag twice, and an index the command names is its own). pip has no
    offline mode: offline, it asks no index."""
    from envguard import install_sources

    own = install_sources.of(cmd.args, Path.cwd())
    out: list[str] = []
    if sources.index_url and own.index_url is None:
        out += ["--index-url", sources.index_url]
    for url in sources.extra_index_urls:
        if url not in own.extra_index_urls:
            out += ["--extra-index-url", url]
    for links in sources.find_links:
        if links not in own.find_links:
            out += ["--find-links", links]
    if sources.offline and cmd.installer == "uv" and not own.offline:
        out.append("--offline")
    no_index = sources.no_index or (sources.offline and cmd.installer == "pip")
    if no_index and not own.no_index:
        out.append("--no-index")
    return out


def installer_env() -> dict[str, str]:
    """The environment an install envguard forecasts or runs gets: the user's, less what
    would send it into another interpreter, prefix or target."""
    return {k: v for k, v in os.environ.items() if k not in ELSEWHERE_ENV}


def _checked(argv: Sequence[str]) -> _run.Completed:
    env = installer_env()
    try:
        done = _run.run(argv, check=False, timeout=1800, env=env)
    except CommandError as exc:
        raise InstallerError(str(exc)) from exc
    if done.returncode != 0:
        last = [ln for ln in done.stderr.strip().splitlines() if ln.strip()][-3:]
        raise InstallerError(f"the installer's dry run failed: {' '.join(last) or 'no output'}")
    return done


def _parse_uv(text: str) -> list[Planned]:
    """uv's ``- name==old`` / ``+ name==new`` lines (``+ name @ url`` for a wheel or a
    repository given directly); the ``+`` ones are what lands."""
    return [
        Planned(name=catalog.canonical(m.group(2)), version=m.group(3) or _url_version(m.group(4)))
        for line in text.splitlines()
        if (m := _UV_LINE.match(line)) and m.group(1) == "+"
    ]


def _url_version(url: str) -> str:
    """A wheel URL's version, from its file name; any other URL's version is unknown until
    it is built, and is said so."""
    m = _WHEEL.search(url.split("#", 1)[0].split("?", 1)[0])
    return m.group(2) if m else f"unknown ({url})"


def _parse_pip(text: str) -> list[Planned]:
    try:
        report = json.loads(text)
        items = report["install"]
    except (ValueError, KeyError, TypeError) as exc:
        raise InstallerError("pip's --report output could not be read") from exc
    out = []
    for item in items:
        meta = item.get("metadata", {})
        out.append(
            Planned(
                name=catalog.canonical(meta["name"]),
                version=meta["version"],
                requires=tuple(meta.get("requires_dist") or ()),
                requested=bool(item.get("requested")),
                extras=tuple(item.get("requested_extras") or ()),
            )
        )
    return out


def forecast(before: Snapshot, planned: Sequence[Planned]) -> Forecast:
    planned = in_effect(before, planned)
    after = predict(before, planned)
    report = drift.compare(before, after, planned=True)
    return Forecast(
        report=dataclasses.replace(report, new="after this install"),
        reasons=tuple(_reasons(before, after, planned)),
    )


def in_effect(before: Snapshot, planned: Sequence[Planned]) -> list[Planned]:
    """The plan with each package's requirements cut to the lines in effect in the venv it
    would leave, as a snapshot records them (:func:`envguard.requirements.in_effect`): the
    extras the command asked for count, as the installer's report says them."""
    env = requirements.marker_environment(before.python.version, before.python.implementation)
    mine = {p.name for p in planned}
    lines = {d.name: d.requires for d in before.packages if d.name not in mine}
    lines.update({p.name: p.requires for p in planned})
    asked = tuple(f"{p.name}[{','.join(p.extras)}]" for p in planned if p.extras)
    kept = requirements.in_effect(lines, env, asked=asked)
    return [dataclasses.replace(p, requires=kept[p.name]) for p in planned]


def predict(before: Snapshot, planned: Sequence[Planned]) -> Snapshot:
    """``before`` with the planned distributions in place: what the install would leave.

    Facts the installer's plan does not tell (a torch build's git commit, whether it is a
    debug build, what uv's plan requires) are left unknown, never carried over or guessed.
    """
    versions = {p.name: p.version for p in planned}
    by_name = {d.name: d for d in before.packages}
    # one install writes every dist-info within seconds: the plan is one install group
    for p in planned:
        by_name[p.name] = Distribution(
            name=p.name,
            version=p.version,
            requires=p.requires,
            requested=p.requested,
            installed_at=PLANNED,
        )
    wheels = _wheels_after(before.cuda, versions)
    torch = _torch_after(before.torch, planned, wheels)
    stack = _cuda_after(before.cuda, versions, wheels, torch.cuda if torch else None)
    builds = {b.name: b for b in before.torch_family}
    # torchvision, torchaudio, triton: the new ones as well as those replaced
    family = set(catalog.BUILDS) - {catalog.TORCH}
    builds.update({n: _planned_build(n, v) for n, v in versions.items() if n in family})
    key = dict(before.key_libraries)
    key.update({n: v for n, v in versions.items() if n in catalog.KEY_LIBRARIES})
    key.update({b.name: b.version for b in builds.values()})
    if torch:
        key["torch"] = torch.version
    return dataclasses.replace(
        before,
        packages=tuple(by_name[n] for n in sorted(by_name)),
        torch=torch,
        torch_family=tuple(builds[n] for n in sorted(builds)),
        key_libraries=key,
        cuda=stack,
        taken_at="planned",
    )


def _planned_build(name: str, version: str) -> PackageBuild:
    """A torch-family build after the install: its version, the rest unknown."""
    return PackageBuild(
        name=name,
        version=version,
        metadata_version=version,
        variant=variant_of(version, {}) if "+" in version else "",
        source="planned",
    )


def _wheels_after(stack: CudaStack, versions: Mapping[str, str]) -> dict[str, str]:
    """The nvidia wheels the venv will hold: the planned ones, and the live ones the plan
    leaves alone (uv's plan names only what it installs; the rest stays)."""
    planned = {n: v for n, v in versions.items() if catalog.is_cuda_wheel(n)}
    return dict(sorted({**stack.wheels, **planned}.items()))


def wheels_cuda(wheels: Mapping[str, str], major: str | None = None) -> str | None:
    """The CUDA release (``13.0``) a set of nvidia wheels provides for CUDA ``major``: its
    runtime wheel's, as the CUDA probe picks it. Without ``major``, the one major among the
    runtime wheels; None without a runtime, or with several majors and none given."""
    runtimes = {n: v for n, v in wheels.items() if n.startswith(_RUNTIME)}
    majors = {v.split(".")[0] for v in runtimes.values()}
    major = major or (next(iter(majors)) if len(majors) == 1 else None)
    if major not in majors:
        return None
    wheel = cuda_probe.owner(runtimes, _RUNTIME, major)
    return ".".join(runtimes[wheel].split(".")[:2]) if wheel else None


def wheels_major(wheels: Mapping[str, str]) -> str | None:
    """The one CUDA major a set of nvidia wheels is for, by their ``-cuNN`` suffixes and
    runtime versions; None when they say none, or several."""
    majors = {m.group(1) for n in wheels if (m := _SUFFIX.search(n))}
    majors |= {v.split(".")[0] for n, v in wheels.items() if n.startswith(_RUNTIME)}
    return next(iter(majors)) if len(majors) == 1 else None


def _cuda_after(
    stack: CudaStack, versions: Mapping[str, str], wheels: Mapping[str, str], cuda: str | None
) -> CudaStack:
    """The libraries torch will load, each from the wheel the CUDA probe would pick for
    torch's CUDA major among the wheels the venv will hold."""
    major = cuda.split(".")[0] if cuda else None
    changed: dict[str, Any] = {"wheels": dict(wheels)}
    for part, prefix, width in (
        ("runtime", _RUNTIME, 2),
        ("cudnn", "nvidia-cudnn", 3),
        ("nccl", "nvidia-nccl", 3),
    ):
        wheel = cuda_probe.owner(wheels, prefix, major)
        old: CudaLibrary | None = getattr(stack, part)
        if wheel and (wheel in versions or old is None or old.wheel != wheel):
            version = ".".join(wheels[wheel].split(".")[:width])
            name = "cudart" if part == "runtime" else part
            changed[part] = CudaLibrary(name=name, version=version, source="planned", wheel=wheel)
    return dataclasses.replace(stack, **changed)


def _torch_after(
    old: PackageBuild | None, planned: Sequence[Planned], wheels: Mapping[str, str]
) -> PackageBuild | None:
    mine = next((p for p in planned if p.name == "torch"), None)
    if mine is None:
        return old
    cuda = _torch_cuda(mine, planned, wheels)
    # no CUDA known is an unknown build, not a CPU one: only a +cpu label says cpu
    fields = {"__version__": mine.version, "cuda": cuda} if cuda else {}
    variant = variant_of(mine.version, fields)
    label = "+" in mine.version or not cuda
    return PackageBuild(
        name="torch",
        version=mine.version if label else f"{mine.version}+{variant}",
        metadata_version=mine.version,
        variant=variant,
        source="planned",
        cuda=cuda,
    )


def _torch_cuda(mine: Planned, planned: Sequence[Planned], wheels: Mapping[str, str]) -> str | None:
    """The CUDA torch's version.py will say. PyPI's METADATA carries no +cuXXX, and uv's plan
    no requirements: then the runtime the venv will hold, of the CUDA major of the nvidia
    wheels the install brings (those this torch requires) when they name one."""
    label = _CUDA_LABEL.match(local(mine.version) or "")
    if label:
        return f"{label.group(1)}.{label.group(2)}"
    brought = {p.name: p.version for p in planned if catalog.is_cuda_wheel(p.name)}
    return _cuda_from_requires(mine.requires) or wheels_cuda(wheels, wheels_major(brought))


def _cuda_from_requires(requires: Sequence[str]) -> str | None:
    for req in requires:
        m = _CUDA_PIN.match(req.replace(" ", ""))
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return None


def _reasons(before: Snapshot, after: Snapshot, planned: Sequence[Planned]) -> list[str]:
    old = {d.name: d.version for d in before.packages}
    real_old = before.versions()
    real_new = {"torch": after.torch.version} if after.torch else {}
    requirers = _requirers(planned)
    out = []
    for p in planned:
        if p.name not in old or same(old[p.name], p.version):
            continue
        line = (
            f"would replace {p.name} {real_old.get(p.name, old[p.name])} with "
            f"{real_new.get(p.name, p.version)}"
        )
        if p.name == "torch" and before.torch and after.torch:
            line += _cuda_move(before.torch, after.torch)
        because = attribution.forced_by(p.name, old[p.name], requirers.get(p.name, ()))
        out.append(f"{line} because {because}" if because else line)
    return out


def _cuda_move(old: PackageBuild, new: PackageBuild) -> str:
    """`` (CUDA 12.8 → 13.0)`` when torch's CUDA would move; nothing when it would not, or
    when the new build is unknown: the torch row says that, and once is enough."""
    was, will = _cuda_said(old), _cuda_said(new)
    return f" (CUDA {was or 'unknown'} → {will})" if will and was != will else ""


def _cuda_said(build: PackageBuild) -> str | None:
    """A build's CUDA, ``none`` for a known build without one (cpu, ROCm), None unknown."""
    return build.cuda or ("none" if build.variant else None)


def _requirers(planned: Sequence[Planned]) -> dict[str, list[attribution.Requirer]]:
    """Who in the plan requires what, what was asked for first. uv's plan says nothing of
    requirements, so with uv this is empty and no "because" is guessed."""
    out: dict[str, list[attribution.Requirer]] = {}
    for p in sorted(planned, key=lambda o: not o.requested):
        for line in p.requires:
            req = requirements.parse(line)
            if req is not None and req.name != p.name:
                out.setdefault(req.name, []).append((f"{p.name} {p.version}", req))
    return out
