"""envguard against its peers, in one run on one machine; prints markdown tables.

    python bench/bench.py [--runs 11] [--sizes 197,1000,5000] [--files 30000,100000]
                          [--cache-copies 32] [--json bench/results/latest.json]

envguard runs as users install it: in a venv of its own made by uv, installed from this checkout
with its bytecode compiled (``--envguard PATH`` times another install instead). Each round runs
every command of a table once, in an order that rotates from round to round, so that load drift
on the machine moves every command alike; peers get the same runs as envguard. Wall time is the
median of the runs (min in brackets); peak RSS comes from wait4(). Every command runs in a
scratch folder outside any git repository.

1. ``envguard snapshot -q``, ``envguard snapshot`` (its summary, off a terminal), ``envguard
   diff -q`` and ``envguard --version`` against ``uv pip freeze`` and ``pip freeze``, on a venv
   holding the H200 training venv's 197 distributions, then padded to 1,000 and 5,000.
2. Compile caches: a warm re-fingerprint of an unchanged cache of ``--files`` small files against
   a bare stat walk (``find -printf '%s %T@ %p'``); and the cold fingerprint of the real H200
   Inductor cache copied ``--cache-copies`` times against ``cat`` of the same files (both from
   the page cache). envguard's side is ``caches.probe`` in a fresh interpreter, imports included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_venv import DEFAULT_FIXTURES, build

ROOT = Path(__file__).resolve().parents[1]
Table = dict[str, dict[str, float]]
PROBE = """
import os, sys, tempfile
if sys.argv[2] == "cold":  # no stat cache: hash every file
    os.environ["ENVGUARD_CACHE_DIR"] = tempfile.mkdtemp(dir=sys.argv[3])
from pathlib import Path
from envguard.probes import caches
caches.probe("inductor", Path(sys.argv[1]))
"""


def _once(
    argv: list[str], ok: tuple[int, ...], env: dict[str, str], cwd: Path
) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{argv} failed with {status}")
    return wall, usage.ru_maxrss / 1024


def interleaved(
    commands: dict[str, list[str]],
    runs: int,
    cwd: Path | dict[str, Path],
    ok: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
) -> Table:
    """Each round runs every command once, in an order that rotates from round to round; a
    first, untimed round warms the page cache and the bytecode. ``cwd``: one folder for all,
    or each command's (a snapshot inside a repository and outside any)."""
    env = env or dict(os.environ)
    names = list(commands)
    at = cwd if isinstance(cwd, dict) else dict.fromkeys(names, cwd)
    walls: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    for name in names:
        _once(commands[name], ok, env, at[name])
    for r in range(runs):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            wall, peak = _once(commands[name], ok, env, at[name])
            walls[name].append(wall)
            rss[name].append(peak)
    return {
        n: {
            "median_ms": statistics.median(walls[n]) * 1000,
            "min_ms": min(walls[n]) * 1000,
            "peak_rss_mib": max(rss[n]),
        }
        for n in names
    }


def envguard_install(work: Path, given: str | None) -> Path:
    """envguard's console script in a venv of its own, as ``uv tool install`` or pip lays it."""
    if given:
        return Path(given)
    from uv import find_uv_bin

    venv = work / "envguard-venv"
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python",
         str(venv / "bin" / "python"), str(ROOT)],
        check=True,
    )  # fmt: skip
    return venv / "bin" / "envguard"


def snapshot_bench(work: Path, envguard: Path, size: int, runs: int, fixtures: Path) -> Table:
    venv = build(work / f"venv-{size}", fixtures, total=size)
    return venv_bench(work, envguard, venv, runs, with_version=size == 197)


def venv_bench(work: Path, envguard: Path, venv: Path, runs: int, with_version: bool) -> Table:
    from uv import find_uv_bin

    site = next(venv.glob("lib/python*/site-packages"))
    lock = work / f"lock-{venv.name}.envguard.toml"  # the lock diff reads, written once
    out = work / f"bench-{venv.name}.envguard.toml"  # what each timed snapshot writes
    snap = [str(envguard), "snapshot", "--venv", str(venv), "--no-default-caches", "-o", str(out)]
    commands = {
        "envguard snapshot -q": [*snap, "-q"],
        "envguard snapshot": snap,
        "envguard diff -q": [str(envguard), "diff", str(lock), "--venv", str(venv), "-q"],
        "uv pip freeze": [find_uv_bin(), "pip", "freeze", "--python", str(venv / "bin" / "python")],
        "pip freeze": [sys.executable, "-m", "pip", "freeze", "--path", str(site)],
    }
    if with_version:
        commands["envguard --version"] = [str(envguard), "--version"]
    # the lock diff compares with, as a committed one: the same bytes run after run
    subprocess.run([*snap[:-1], str(lock)], check=True, capture_output=True, cwd=work)
    return interleaved(commands, runs, work)


def _synthetic_cache(root: Path, files: int) -> Path:
    """``files`` small files laid out as Inductor lays out generated code: 2-character folders."""
    for i in range(files):
        folder = root / f"{i % 256:02x}" / f"c{i // 256:05d}"[:5]
        if i % 256 == 0 or not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"k{i:06d}.py").write_bytes(b"# kernel\n" * (1 + i % 40))
    return root


def _settle(root: Path) -> None:
    """Older than the stat cache's racy window, so that a warm pass trusts every file."""
    old = time.time() - 3600
    for dirpath, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (old, old))


def warm_bench(work: Path, python: Path, files: int, runs: int) -> Table:
    root = _synthetic_cache(work / f"cache-{files}", files)
    _settle(root)
    env = {**os.environ, "ENVGUARD_CACHE_DIR": str(work / f"statcache-{files}")}
    probe = [str(python), "-c", PROBE, str(root), "warm", str(work)]
    subprocess.run(probe, check=True, env=env)  # the cold pass that leaves the stat cache
    commands = {
        "envguard warm re-fingerprint": probe,
        "find -printf (stat walk)": ["find", str(root), "-printf", "%s %T@ %p\n"],
    }
    return interleaved(commands, runs, work, env=env)


def cold_bench(work: Path, python: Path, copies: int, runs: int, fixtures: Path) -> Table:
    root = work / "inductor"
    with tarfile.open(fixtures / "inductor_cache.tgz") as tar:
        tar.extractall(work / "one", filter="data")
    for i in range(copies):
        shutil.copytree(work / "one" / "probe_inductor", root / f"copy{i:03d}")
    _settle(root)
    commands = {
        "envguard cold fingerprint": [str(python), "-c", PROBE, str(root), "cold", str(work)],
        "cat (every file)": ["sh", "-c", f"find {root} -type f -exec cat {{}} + > /dev/null"],
    }
    return interleaved(commands, runs, work)


def _table(title: str, table: Table, peer: str, other: str | None = None) -> list[str]:
    base = table[peer]["median_ms"]
    head = f"| {title} | median ms (min) | peak RSS MiB | × {peer.split(' (')[0]} |"
    lines = [head + (f" {other} ÷ this |" if other else ""), "|---|---:|---:|---:|"]
    lines[1] += "---:|" if other else ""
    for name, m in table.items():
        row = (
            f"| `{name}` | {m['median_ms']:.0f} ({m['min_ms']:.0f}) | {m['peak_rss_mib']:.0f} | "
            f"{m['median_ms'] / base:.2f}× |"
        )
        if other:
            row += f" {table[other]['median_ms'] / m['median_ms']:.1f}× |"
        lines.append(row)
    return [*lines, ""]


def report(snaps: dict[str, Table], warm: dict[int, Table], cold: Table, cold_info: str) -> str:
    lines: list[str] = []
    for title, table in snaps.items():
        lines += _table(title, table, "uv pip freeze", "pip freeze")
        delta = table["envguard diff -q"]["median_ms"] - table["envguard snapshot -q"]["median_ms"]
        lines += [f"`diff -q` − `snapshot -q`: {delta:+.0f} ms", ""]
    for files, table in warm.items():
        lines += _table(f"unchanged cache, {files:,} files", table, "find -printf (stat walk)")
    lines += _table(f"cold, {cold_info}", cold, "cat (every file)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--sizes", default="197,1000,5000")
    parser.add_argument("--files", default="30000,100000")
    parser.add_argument("--cache-copies", type=int, default=32)
    parser.add_argument("--envguard", help="an installed envguard console script to time")
    parser.add_argument("--venv", type=Path, help="also time this existing venv (yours)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    args = parser.parse_args()
    work = Path(os.environ.get("BENCH_WORK") or "/tmp") / f"envguard-bench-{os.getpid()}"
    work.mkdir(parents=True)
    try:
        envguard = envguard_install(work, args.envguard)
        python = envguard.parent / "python"
        snaps = {
            f"{int(n):,} distributions": snapshot_bench(
                work, envguard, int(n), args.runs, args.fixtures
            )
            for n in args.sizes.split(",")
            if n
        }
        if args.venv:
            table = venv_bench(work, envguard, args.venv.absolute(), args.runs, False)
            snaps[f"{args.venv} (real)"] = table
        warm = {
            int(n): warm_bench(work, python, int(n), args.runs) for n in args.files.split(",") if n
        }
        cold = cold_bench(work, python, args.cache_copies, args.runs, args.fixtures)
        files = sum(1 for p in (work / "inductor").rglob("*") if p.is_file())
        mb = sum(p.stat().st_size for p in (work / "inductor").rglob("*") if p.is_file()) / 1e6
        cold_info = f"{files:,} files / {mb:.0f} MB (the H200 Inductor cache, copied)"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(snaps, warm, cold, cold_info))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {"snapshot": snaps, "warm": warm, "cold": cold, "cold_cache": cold_info}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
