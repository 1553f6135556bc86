"""The known-good state's benchmark (``snapshot --bench``): the user's command, run where
the snapshot is taken and as the venv runs it, a few times; its numbers go into the lock.

bisect then runs the same command when it is given none, and holds GOOD, rebuilt in a
trial, to these numbers: a GOOD that no longer measures what the known-good state did is
not the known-good state, and no verdict can rest on it. Each run is one process group in
the venv's environment, its output in a private folder, as a bisect trial's run is
(:func:`envguard._run.run_group`); the number is read as bisect reads it
(:mod:`envguard.bisect.metric`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from envguard import _run
from envguard.bisect import metric
from envguard.errors import ArgumentError, BenchmarkError, CommandError
from envguard.model import BENCH_MAX_RUNS, Benchmark

RUNS = 5  # enough to see the noise, and to leave one far-off run out of the spread


@dataclass(frozen=True, kw_only=True)
class Request:
    """What ``snapshot --bench`` was asked to measure."""

    command: tuple[str, ...]
    metric: str = ""
    direction: str = ""  # "higher" or "lower" is better; "" either way
    unit: str = ""
    runs: int = RUNS
    timeout: float = 3600.0

    def checked(self) -> Request:
        """The request, or an ArgumentError naming the option that cannot be."""
        if not self.command:
            raise ArgumentError("--bench needs the benchmark after --: snapshot --bench -- CMD")
        if self.direction and not self.metric:
            raise ArgumentError("--higher-is-better and --lower-is-better need --metric")
        if not 1 <= self.runs <= BENCH_MAX_RUNS:
            raise ArgumentError(f"--runs {self.runs}: expected 1 to {BENCH_MAX_RUNS}")
        if self.metric:
            try:
                metric.compile_metric(self.metric)
            except ValueError as exc:
                raise ArgumentError(str(exc)) from None
        return self


def venv_environ(venv: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as the venv's ``activate`` leaves it (which unsets PYTHONHOME)."""
    return _run.activated({k: v for k, v in environ.items() if k != "PYTHONHOME"}, venv)


def measure(
    request: Request,
    *,
    venv: Path,
    cwd: Path,
    environ: Mapping[str, str] | None = None,
    on_run: Callable[[int, int], None] | None = None,
) -> tuple[float, ...]:
    """Each run's number, ``request.runs`` of them, or a BenchmarkError that says why the
    known-good state cannot be measured (a run that breaks, or fails its exit status)."""
    pattern = metric.compile_metric(request.metric) if request.metric else None
    env = venv_environ(venv, os.environ if environ is None else environ)
    values: list[float] = []
    with tempfile.TemporaryDirectory(prefix="envguard-bench-") as tmp:
        for i in range(request.runs):
            if on_run is not None:
                on_run(i, request.runs)
            output = Path(tmp) / f"run-{i}"
            try:
                done = _run.run_group(request.command, timeout=request.timeout, env=env,
                                      cwd=cwd, output=output)  # fmt: skip
            except CommandError as exc:
                raise BenchmarkError(f"the benchmark cannot run: {exc}") from None
            run = metric.read(pattern, done.returncode, done.stdout, done.stderr)
            if run.value is None:
                raise BenchmarkError(f"the benchmark's run {i + 1} measured nothing: {run.why}")
            if pattern is None and run.value != metric.GOOD_EXIT:
                said = metric.last_line(done.stderr or done.stdout)
                raise BenchmarkError(
                    f"the benchmark fails here (run {i + 1} exited {done.returncode}: {said}); "
                    "the known-good state's benchmark must succeed in it"
                )
            values.append(run.value)
    return tuple(values)


def record(request: Request, values: tuple[float, ...], *, cwd: str) -> Benchmark:
    """The lock's [bench] from the runs measured."""
    from envguard.bisect.search import spread

    return Benchmark(
        command=request.command, cwd=cwd, metric=request.metric,
        direction=request.direction, unit=request.unit, runs=len(values), values=values,
        median=metric.median(values), spread=spread(values),
    )  # fmt: skip


def relative_cwd(cwd: Path, root: str | None) -> str:
    """Where the benchmark ran, as a path inside the repository at ``root`` ("" its root,
    or no repository, or outside it: bisect then runs it where the user is)."""
    if not root:
        return ""
    try:
        inside = cwd.resolve().relative_to(Path(root).resolve())
    except ValueError:
        return ""
    return "" if str(inside) == "." else inside.as_posix()


def recorded_cwd(root: Path, cwd: str) -> Path | None:
    """Where the lock's benchmark ran, in the repository at ``root`` (None: that folder is
    not here)."""
    folder = root / cwd if cwd else root
    return folder if folder.is_dir() else None
