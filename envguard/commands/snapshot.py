"""``envguard snapshot``: record the environment in a lockfile."""

from __future__ import annotations

import dataclasses
import stat
from collections.abc import Sequence
from pathlib import Path

from envguard import benchmark, lockfile, snapshot, targets
from envguard.config import Config
from envguard.errors import ArgumentError, VenvError
from envguard.model import Snapshot
from envguard.results.snapshot import SnapshotDone
from envguard.snapshot import Progress


def take(
    cfg: Config,
    *,
    venv: Path | None = None,
    repo: Path | None = None,
    cache_dirs: Sequence[Path] = (),
    default_caches: bool = True,
    output: str | Path | None = None,
    name: str | None = None,
    save_cache: bool = False,
    bench: benchmark.Request | None = None,
    progress: Progress | None = None,
) -> SnapshotDone:
    # "DIR/" names a folder, made if need be; pathlib would drop the slash that says so
    into_folder = isinstance(output, str) and output.endswith("/")
    output = Path(output) if output else None
    if save_cache and output is not None and not _beside_ok(output):
        raise ArgumentError(
            f"--save-cache puts the archive beside the lockfile: {output} is a stream or a "
            f"device, not a file (give -o a file or a folder)"
        )
    chosen = targets.chosen_venv(venv, cfg)
    values = _measure(bench.checked(), chosen.path, progress) if bench else None
    snap = snapshot.take(
        chosen.path,
        repo=repo,
        repo_required=repo is not None,
        # absolute, as restore needs them; the project's cache-dirs are recorded too
        cache_dirs=tuple(dict.fromkeys(p.absolute() for p in (*cache_dirs, *cfg.cache_dirs))),
        default_caches=default_caches,
        name=name,
        progress=progress,
    )
    if bench is not None and values is not None:  # measured first: what it warms, recorded
        root = snap.code.root if snap.code else None
        where = benchmark.relative_cwd(Path.cwd(), root)
        snap = dataclasses.replace(snap, bench=benchmark.record(bench, values, cwd=where))
    path = (
        lockfile.expand_output(output, snap)
        if output
        else lockfile.default_path(snap.name, cfg.lockfiles)
    )
    if into_folder or path.is_dir():  # -o DIR: the lock goes inside it, named as usual
        path = lockfile.default_path(snap.name, path)
    if not save_cache:
        lockfile.write(path, snap)
        return SnapshotDone(lockfile=str(path.absolute()), snapshot=snap, venv_from=chosen.why)
    return _with_archive(snap, path, chosen.why, cfg.cache_store)


def _with_archive(snap: Snapshot, path: Path, venv_from: str, store: Path | None) -> SnapshotDone:
    """The archive first (into the project's cache store, else beside the lock, kept out of
    git before it lands), then the lock that names it by hash: a lock on disk never names
    an archive that is not there yet."""
    from envguard import gitignore
    from envguard.restore import cache_archive

    data = cache_archive.pack(snap)
    saved = cache_archive.saved(data)
    snap = dataclasses.replace(snap, saved_caches=saved)
    kept = None
    if store is not None:
        archive = cache_archive.save_to_store(data, saved, store)
    else:
        kept = gitignore.keep_out(cache_archive.archive_path(path))
        archive, _ = cache_archive.save(snap, path, data)
    lockfile.write(path, snap)
    return SnapshotDone(
        lockfile=str(path.absolute()), snapshot=snap,
        archive=str(archive.absolute()), archive_bytes=len(data), venv_from=venv_from,
        in_store=store is not None, gitignore=str(kept.gitignore) if kept else None,
        gitignore_added=bool(kept and kept.added), archive_tracked=bool(kept and kept.tracked),
    )  # fmt: skip


def _measure(
    request: benchmark.Request, venv: Path, progress: Progress | None
) -> tuple[float, ...]:
    """The benchmark's runs in the venv, here, before anything is recorded: a cache it
    fills is a cache the lock records warm."""

    def on_run(i: int, n: int) -> None:
        if progress is not None:
            progress(f"benchmark, run {i + 1} of {n}", i, n)

    if not (venv / "bin").is_dir():
        raise VenvError(f"{venv}: no bin/ folder to run the benchmark in; is it a venv?")
    return benchmark.measure(request, venv=venv, cwd=Path.cwd(), on_run=on_run)


def _beside_ok(output: Path) -> bool:
    """Whether a file can sit beside ``output``: not for /dev/stdout, /dev/null, a FIFO."""
    from envguard._fs import descriptor

    if descriptor(output) is not None:
        return False
    try:
        mode = output.stat().st_mode
    except OSError:
        return True  # not there yet: a file it will be
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)
