"""envguard against its peers, in one run on one machine; prints a markdown table.

    python bench/bench.py [--runs 15] [--cache-copies 32] [--json bench/results/latest.json]

1. Snapshot (no compile caches) of a venv holding the H200 training venv's 197 distributions,
   against ``uv pip freeze`` and ``pip freeze`` on the same venv.
2. ``envguard --version`` (must stay under 100 ms).
3. Compile-cache fingerprint throughput, cold (no stat cache) and warm, against ``cat`` of the
   same files; the cache is the real H200 Inductor cache copied ``--cache-copies`` times.

Wall time is the median of ``--runs`` runs (min in brackets); peak RSS comes from wait4().
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
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_venv import DEFAULT_FIXTURES, build


def measure(argv: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, float]:
    walls, rss = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        rss.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{argv} failed with {status}")
    return {
        "median_ms": statistics.median(walls) * 1000,
        "min_ms": min(walls) * 1000,
        "peak_rss_mib": max(rss),
    }


def _once(argv: list[str], ok: tuple[int, ...], env: dict[str, str] | None) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{argv} failed with {status}")
    return wall, usage.ru_maxrss / 1024


def interleaved(
    commands: dict[str, list[str]],
    runs: int,
    ok: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """Each round runs every command once, in an order that rotates from round to round, so
    that a machine's drift in load moves every command alike; the same runs for each."""
    names = list(commands)
    walls: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(1):  # a warm-up round: page cache, bytecode
        for name in names:
            _once(commands[name], ok, env)
    for r in range(runs):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            wall, peak = _once(commands[name], ok, env)
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


def envguard_cmd() -> list[str]:
    """The console script beside this Python, else what that script runs (no runpy)."""
    path = Path(sys.executable).parent / "envguard"
    if path.exists():
        return [str(path)]
    return [sys.executable, "-c", "from envguard.__main__ import main; main()"]


def snapshot_bench(work: Path, runs: int, fixtures: Path) -> dict[str, dict[str, float]]:
    from uv import find_uv_bin

    venv = build(work / "h200-venv", fixtures)
    site = next(venv.glob("lib/python*/site-packages"))
    out = work / "bench.envguard.toml"
    envguard = [
        *envguard_cmd(),
        "snapshot",
        "--venv",
        str(venv),
        "--no-default-caches",
        "-o",
        str(out),
    ]
    return {
        "envguard snapshot": measure(envguard, runs),
        "envguard snapshot --quiet": measure([*envguard, "--quiet"], runs),
        "uv pip freeze": measure(
            [find_uv_bin(), "pip", "freeze", "--python", str(venv / "bin" / "python")], runs
        ),
        "pip freeze": measure(
            [sys.executable, "-m", "pip", "freeze", "--path", str(site)], max(3, runs // 3)
        ),
        "envguard --version": measure([*envguard_cmd(), "--version"], runs),
    }


def cache_bench(work: Path, copies: int, runs: int, fixtures: Path) -> dict[str, float]:
    from envguard.probes import caches

    root = work / "inductor"
    with tarfile.open(fixtures / "inductor_cache.tgz") as tar:
        tar.extractall(work / "one", filter="data")
    for i in range(copies):
        shutil.copytree(work / "one" / "probe_inductor", root / f"copy{i:03d}")
    old = time.time() - 3600  # older than the stat cache's racy window
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    files = [p for p in root.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    cat = measure(["sh", "-c", f"find {root} -type f -exec cat {{}} + > /dev/null"], runs)
    cold, warm = [], []
    for _ in range(runs):
        os.environ["ENVGUARD_CACHE_DIR"] = tempfile.mkdtemp(dir=work)
        t = time.perf_counter()
        caches.probe("inductor", root)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        caches.probe("inductor", root)
        warm.append(time.perf_counter() - t)
    mb = total / 1e6
    return {
        "files": len(files),
        "mb": mb,
        "cat_ms": cat["median_ms"],
        "cold_ms": statistics.median(cold) * 1000,
        "warm_ms": statistics.median(warm) * 1000,
        "cat_mb_s": mb / cat["median_ms"] * 1000,
        "cold_mb_s": mb / statistics.median(cold),
        "warm_mb_s": mb / statistics.median(warm),
    }


def report(snap: dict[str, dict[str, float]], cache: dict[str, float]) -> str:
    uv = snap["uv pip freeze"]["median_ms"]
    pip = snap["pip freeze"]["median_ms"]
    lines = [
        "| command (197 distributions) | median ms (min) | peak RSS MiB | × uv | pip ÷ this |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, m in snap.items():
        lines.append(
            f"| `{name}` | {m['median_ms']:.0f} ({m['min_ms']:.0f}) | "
            f"{m['peak_rss_mib']:.0f} | {m['median_ms'] / uv:.1f}× | "
            f"{pip / m['median_ms']:.1f}× |"
        )
    lines += [
        "",
        f"Cache fingerprint, {cache['files']} files / {cache['mb']:.0f} MB "
        "(the H200 Inductor cache, copied):",
        "",
        "| pass | ms | MB/s | × cat |",
        "|---|---:|---:|---:|",
        f"| `cat` every file | {cache['cat_ms']:.0f} | {cache['cat_mb_s']:.0f} | 1.0× |",
        f"| cold (hash every file) | {cache['cold_ms']:.0f} | {cache['cold_mb_s']:.0f} | "
        f"{cache['cold_ms'] / cache['cat_ms']:.2f}× |",
        f"| warm (stat cache) | {cache['warm_ms']:.0f} | {cache['warm_mb_s']:.0f} | "
        f"{cache['warm_ms'] / cache['cat_ms']:.2f}× |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cache-copies", type=int, default=32)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envguard-bench-") as tmp:
        work = Path(tmp)
        snap = snapshot_bench(work, args.runs, args.fixtures)
        cache = cache_bench(work, args.cache_copies, max(3, args.runs // 3), args.fixtures)
    print(report(snap, cache))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"snapshot": snap, "cache": cache}, indent=2) + "\n")


if __name__ == "__main__":
    main()
